"""`yardstick eval submit|resolve|status|list|cancel|artifacts|catalog` and `yardstick boards`: a platform's
runs and boards from the command line, as a caller of its API.

Every call goes through `platform_client.client.PlatformClient`, the Positronic contract's own client
(`positronic-platform-client==0.37.1`, Apache-2.0, published for callers to use). We use it rather than
writing a client of ours so that this command speaks exactly the contract, request and response models
included: an answer it cannot read is one the contract's own callers could not read either.

The platform is `--platform-url`, else `$YARDSTICK_PLATFORM_URL`, else `$POSITRONIC_PLATFORM_URL`, else
the one `yardstick login` saved, else a local one (`http://127.0.0.1:8080`, where `yardstick server`
listens). The key is `$YARDSTICK_API_KEY`, else `$POSITRONIC_PLATFORM_API_KEY`, else the saved one when
the platform is the one it was saved for (`credentials.py`), and never an argument, so it reaches no
process listing.

Exit statuses follow the contract's table (`exit_status`): 1 the caller (a 4xx refusal, no key, a quota
used up), 2 usage (an id that is not hexadecimal, a plan file that does not parse or validate), 3 the
platform (a 5xx, `internal_error` or `upstream_unavailable`, no answer, a time-out, an answer the client
cannot read). A refusal prints its error envelope as JSON on stdout under `--json`, else `code: message`
on stderr; any other failure prints its message on stderr. Tables and progress go to stderr, data
(`--json`, a new submission's id) to stdout.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import typer
import yaml
from platform_client.boards import BoardRef
from platform_client.client import PlatformClient
from platform_client.enums import TERMINAL_STATUSES, ErrorCode, SubmissionStatus
from platform_client.errors import PlatformError
from platform_client.eval_plan import (
    REVEAL_REGISTRY_PASSWORD,
    EvalPlan,
    RegistryCredential,
    RegistryCredentialFile,
    plan_of_image,
    plan_with_passwords_read,
)
from platform_client.ids import ApiKey, SubmissionId
from platform_client.policy_images import PolicyImage
from platform_client.requests import CancelRequest
from platform_client.responses import (
    ArtifactEntry,
    ArtifactRefs,
    BlockedSubmissionView,
    CancelledSubmissionView,
    ErroredSubmissionView,
    FinishedSubmissionView,
    PendingSubmissionView,
    ResolvedEndpoint,
    ResolvedPlan,
    RunningSubmissionView,
    SubmissionCreateResponse,
    SubmissionListRow,
    SubmissionView,
)
from positronic_evals.slug import slug_of
from pydantic import BaseModel, ValidationError
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from yardstick.cli import credentials
from yardstick.cli.credentials import DEFAULT_PLATFORM_URL, KEY_ENVS
from yardstick.cli.display import console, fail, print_table
from yardstick.cli.exits import Exit
from yardstick.cli.money import describe_quote
from yardstick.cli.own_calls import call, http_to
from yardstick.positronic.own_routes import (
    BOARD_CURVES,
    BOARD_PAIRWISE,
    SUBMISSION_DETAILS,
    SUBMISSIONS_UNTIL,
)

URL_ENVS = ["YARDSTICK_PLATFORM_URL", "POSITRONIC_PLATFORM_URL"]
POLL_S = 1.0
# The codes the contract counts as the platform's own fault whatever the HTTP status says.
PLATFORM_CODES = frozenset({ErrorCode.internal_error, ErrorCode.upstream_unavailable})
LIST_PAGE_CAP = 200  # the most rows the platform answers a page with

PlatformUrl = typer.Option(
    None,
    "--platform-url",
    envvar=URL_ENVS,
    show_envvar=True,
    show_default=False,
    help=f"The platform to call [default: the one `yardstick login` saved, else {DEFAULT_PLATFORM_URL}].",
)
AsJson = typer.Option(False, "--json", help="Print the answer as JSON on stdout.")
FromFile = typer.Option(..., "--from-file", help="The eval plan, YAML or JSON.", show_default=False)
IdArgument = typer.Argument(..., metavar="ID", help="The submission id (hexadecimal).", show_default=False)


# --- whose fault -------------------------------------------------------------------------------------


def exit_status(exc: BaseException) -> Exit:
    """Whose fault a failed call is, by the contract's CLI table.

    A refusal (`PlatformError`) is the caller's, unless it is a 5xx or carries `internal_error` or
    `upstream_unavailable` (the code the client also gives an answer with no envelope, a proxy's page);
    no answer, a time-out or an answer the client cannot read (`httpx.HTTPError`, `ValidationError`) is
    the platform's. Anything else is not a failed call, and is this command's own bug.
    """
    if isinstance(exc, PlatformError):
        if exc.http_status >= 500 or exc.code in PLATFORM_CODES:
            return Exit.PLATFORM
        return Exit.CALLER
    if isinstance(exc, (httpx.HTTPError, ValidationError)):
        return Exit.PLATFORM
    raise TypeError(f"{type(exc).__name__} is not the failure of a platform call") from exc


def _explain(exc: BaseException, url: str) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"the platform at {url} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, httpx.HTTPError):
        return f"no answer from the platform at {url}: {type(exc).__name__}: {exc}"
    if isinstance(exc, ValidationError):
        return f"the platform at {url} answered with something this client cannot read: {_problems(exc)}"
    return str(exc)


def _refused(exc: PlatformError, as_json: bool) -> None:
    if as_json:
        print(json.dumps(exc.envelope.model_dump(mode="json"), indent=2))
        return
    console.print(f"[red]{escape(exc.code.name)}:[/red] {escape(exc.message)}", soft_wrap=True)
    # The names on offer, when the one asked for is not among them (`evals`, `tasks`, `specs`, ...).
    for key, value in exc.details.items():
        if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
            console.print(f"  {escape(key)}: {escape(', '.join(value))}", soft_wrap=True)


@contextmanager
def explained_calls(url: str, as_json: bool) -> Iterator[None]:
    """Turn a failed platform call into its message and its exit status."""
    try:
        yield
    except PlatformError as exc:
        _refused(exc, as_json)
        raise typer.Exit(exit_status(exc)) from None
    except (httpx.HTTPError, ValidationError) as exc:
        fail(exit_status(exc), _explain(exc, url))


def platform_and_key(given_url: str | None) -> tuple[str, ApiKey | None]:
    """The platform to call and the key to call it with, by the order in `credentials.py`."""
    if given_url is not None and not given_url.strip():
        fail(
            Exit.USAGE,
            f"--platform-url is empty: name a platform, or leave it unset for {DEFAULT_PLATFORM_URL}",
        )
    try:
        url, key = credentials.locate(given_url)
    except credentials.RecordUnreadable as exc:
        fail(Exit.CALLER, str(exc))
    return url, ApiKey(key) if key else None


@contextmanager
def connected_client(
    given_url: str | None, as_json: bool, *, key_required: bool = True
) -> Iterator[PlatformClient]:
    url, key = platform_and_key(given_url)
    if key is None and key_required:
        fail(
            Exit.CALLER,
            f"no API key for {url}: run `yardstick login` (or set {KEY_ENVS[0]}); an administrator "
            "mints one with `yardstick admin key create LOGIN`",
        )
    try:
        client = PlatformClient(url, api_key=key)
    except ValueError as exc:
        fail(Exit.USAGE, f"--platform-url: {exc}")
    with client, explained_calls(url, as_json):
        yield client


# --- arguments -------------------------------------------------------------------------------------


def _submission_id(value: str) -> SubmissionId:
    try:
        return SubmissionId.parse(value)
    except (ValueError, TypeError) as exc:
        fail(Exit.USAGE, f"ID {value!r} is not a submission id: {exc}")


def _problems(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "the plan"
        lines.append(f"{where}: {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(lines)


def read_plan(path: Path) -> EvalPlan:
    """The plan a file states, YAML or JSON, as the contract's `EvalPlan` (which refuses unknown fields).

    An `image_credential` names its password's file, as the contract's plan files do; the password is
    read here. Raises `ValueError` with a message naming the file and each problem.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ValueError(f"{path} cannot be read: {reason}") from None
    try:
        data: Any = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
        raise ValueError(f"{path} does not parse as {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{path} holds a {type(data).__name__}, not a plan: a plan is a mapping of request_type, "
            "eval or tasks, endpoints, ..."
        )
    try:
        return plan_with_passwords_read(EvalPlan[RegistryCredentialFile].model_validate(data))
    except ValidationError as exc:
        raise ValueError(f"{path} is not a valid plan: {_problems(exc)}") from None


def _plan(path: Path) -> EvalPlan:
    try:
        return read_plan(path)
    except ValueError as exc:
        fail(Exit.USAGE, str(exc))


def print_json(data: BaseModel | dict[str, Any]) -> None:
    body = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
    print(json.dumps(body, indent=2))


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _when(moment: dt.datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


# --- eval submit / resolve ---------------------------------------------------------------------------


def _run_status(view: SubmissionView) -> Exit:
    """The exit status of a run that ended: 0 finished, 1 cancelled or a caller fault, 3 the platform's."""
    if isinstance(view, FinishedSubmissionView):
        return Exit.DONE
    if isinstance(view, ErroredSubmissionView) and view.reason_code is not None:
        return Exit.PLATFORM if view.reason_code.is_platform_fault else Exit.CALLER
    return Exit.CALLER


def _progress_line(view: SubmissionView) -> str:
    if isinstance(view, PendingSubmissionView):
        return f"pending (queue position {view.queue_position})"
    if isinstance(view, BlockedSubmissionView):
        return f"blocked: {view.reason or 'waiting'}"
    return slug_of(view.status)


def _progress(label: str) -> Progress:
    """A bar of items done of total with the time taken, `label` (rich markup) before it."""
    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    )


def _wait(client: PlatformClient, submission: SubmissionId) -> SubmissionView:
    with _progress("[bold]{task.description}") as progress:
        task = progress.add_task("waiting", total=None)
        while True:
            view = client.get_submission(submission)
            progress.update(
                task,
                description=escape(_progress_line(view)),
                completed=view.episodes.done,
                total=view.episodes.total or None,
            )
            if view.status in TERMINAL_STATUSES:
                return view
            time.sleep(POLL_S)


def submit(
    from_file: Path | None = typer.Option(
        None,
        "--from-file",
        help="The eval plan, YAML or JSON (or --policy-image with --eval).",
        show_default=False,
    ),
    policy_image: str | None = typer.Option(
        None,
        "--policy-image",
        help="Submit this image (HOST[:PORT]/REPO:TAG) on --eval: the contract's plan_of_image.",
    ),
    eval_name: str | None = typer.Option(None, "--eval", help="The eval a --policy-image runs."),
    org: str | None = typer.Option(None, "--org", help="Run a --policy-image privately for this org."),
    registry_user: str | None = typer.Option(None, "--registry-user", help="The image's registry user."),
    registry_password_file: Path | None = typer.Option(
        None, "--registry-password-file", help="A file holding the registry's password."
    ),
    wait: bool = typer.Option(False, "--wait", help="Follow the run to its end, then print its score."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the answer as JSON on stdout (with --wait, the ended run's status)."
    ),
    until: str | None = typer.Option(
        None,
        "--until",
        help='Grow the run in rounds until "decided" (every --gate decided) or "width<=W"; the plan\'s '
        "trials a task are the cap (Yardstick's own; a plan of one endpoint).",
    ),
    gate: list[str] = typer.Option([], "--gate", help='With --until decided: "success>=0.8". Repeatable.'),
    alpha: float = typer.Option(0.05, "--alpha", min=1e-6, max=0.5, help="With --until: the error allowed."),
    checkpoint: str | None = typer.Option(
        None,
        "--checkpoint",
        help="The policy's checkpoint (a step, 20000, or a label): its endpoint is named NAME@CHECKPOINT, "
        "and its runs line up on the board's checkpoint curve (a plan of one endpoint).",
    ),
    platform_url: str | None = PlatformUrl,
) -> None:
    """File a plan (submissions.create) and print its id; --wait follows the run and prints its score.

    With --wait the exit status is the run's: 0 finished, 1 cancelled or failed by the policy, 3 failed by
    the platform.
    """
    plan = _submitted_plan(from_file, policy_image, eval_name, org, registry_user, registry_password_file)
    if until is None and (gate or alpha != 0.05):
        fail(Exit.USAGE, "--gate and --alpha decide a stopping rule: give --until too")
    if checkpoint is not None:
        plan = _with_checkpoint(plan, checkpoint)
    with connected_client(platform_url, as_json) as client:
        if until is None:
            created = client.create_submission(plan)
        else:
            # As the contract's client sends a plan (the registry password revealed to the platform only).
            sent = {
                "plan": plan.model_dump(mode="json", context={REVEAL_REGISTRY_PASSWORD: True}),
                "stopping": {"until": until, "gates": gate, "alpha": alpha},
            }
            answered = own_call(client, "POST", SUBMISSIONS_UNTIL, body=sent)
            created = SubmissionCreateResponse.model_validate(answered)
        ident = created.submission_id
        if not as_json:
            print(ident, flush=True)
            total = f", {created.resolved.episodes_total} episodes" if created.resolved else ""
            console.print(f"submission {ident}: {slug_of(created.status)}{total}")
            if created.policy_image_digest:
                console.print(f"image pinned to {created.policy_image_digest}")
            if created.billing is not None and created.billing.quote is not None:
                console.print(describe_quote(created.billing.quote), soft_wrap=True)
        if not wait:
            if as_json:
                print_json(created)
            if created.status is SubmissionStatus.errored:
                # Refused at the door (an image that cannot be pulled): terminal, and charged.
                code = created.reason_code
                console.print(f"[red]errored:[/red] {slug_of(code) if code else 'no reason given'}")
                raise typer.Exit(Exit.PLATFORM if code and code.is_platform_fault else Exit.CALLER)
            if not as_json:
                console.print(f"follow it: yardstick eval status {ident}", style="dim")
            return
        try:
            view = _wait(client, ident)
        except KeyboardInterrupt:
            console.print(f"stopped waiting; the run goes on: yardstick eval status {ident}")
            raise typer.Exit(Exit.INTERRUPTED) from None
        details = {} if as_json else _details(client, view.id)
    if as_json:
        print_json(view)
    else:
        _describe(view)
        _endpoint_lines(details)
    raise typer.Exit(_run_status(view))


def _with_checkpoint(plan: EvalPlan, checkpoint: str) -> EvalPlan:
    """The plan with its one endpoint named `name@checkpoint` (`core.checkpoints` reads it back)."""
    label = checkpoint.strip()
    if not label or "@" in label:
        fail(Exit.USAGE, f"--checkpoint {checkpoint!r}: a step or a label, not empty and without '@'")
    body = plan.model_dump(mode="json", context={REVEAL_REGISTRY_PASSWORD: True})
    nodes = [node for node in body.get("tasks") or [] if isinstance(node, dict)]
    if len(body["endpoints"]) != 1 or any(node.get("endpoints") for node in nodes):
        fail(
            Exit.USAGE,
            "--checkpoint names the checkpoint of a plan's one endpoint; in a plan of several, name each "
            "endpoint policy@checkpoint in the plan itself",
        )
    body["endpoints"][0]["name"] = f"{body['endpoints'][0]['name']}@{label}"
    try:
        return EvalPlan.model_validate(body)
    except ValidationError as exc:
        fail(Exit.USAGE, f"--checkpoint {checkpoint!r}: the endpoint's name would be refused: {exc}")


def _submitted_plan(
    from_file: Path | None,
    image: str | None,
    eval_name: str | None,
    org: str | None,
    user: str | None,
    password_file: Path | None,
) -> EvalPlan:
    """The plan a file states, or the one a policy image runs as on an eval (`plan_of_image`)."""
    if (from_file is None) == (image is None):
        fail(Exit.USAGE, "name the plan: --from-file PLAN, or --policy-image IMAGE --eval NAME")
    if from_file is not None:
        return _plan(from_file)
    if eval_name is None:
        fail(Exit.USAGE, "--policy-image runs on an eval: name it with --eval")
    if (user is None) != (password_file is None):
        fail(Exit.USAGE, "--registry-user and --registry-password-file go together")
    try:
        credential = None
        if user is not None and password_file is not None:
            password = password_file.read_text(encoding="utf-8").strip()
            credential = RegistryCredential(username=user, password=password)  # type: ignore[arg-type]
        return plan_of_image(PolicyImage(str(image)), eval_name, org=org, credential=credential)  # type: ignore[arg-type]
    except (OSError, ValueError) as exc:
        fail(Exit.USAGE, f"--policy-image: {exc}")


def _runs_of(order: list[str], shown: int = 4) -> str:
    """The episode order as runs of one endpoint: `a ×3, b ×1, a ×2`, the first few of them."""
    runs: list[tuple[str, int]] = []
    for name in order:
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + 1)
        else:
            runs.append((name, 1))
    text = ", ".join(f"{name}×{count}" for name, count in runs[:shown])
    return text + (f", … ({len(runs)} runs)" if len(runs) > shown else "")


def _locator(endpoint: ResolvedEndpoint) -> str:
    if endpoint.address is not None:
        return " ".join(f"{k}={v}" for k, v in endpoint.address.model_dump(mode="json").items() if v)
    return endpoint.spec or endpoint.provider or ""


def resolved_tables(resolved: ResolvedPlan) -> tuple[Table, Table]:
    """The endpoints the plan runs, and a row per task: its counts per endpoint, cap and episode order."""
    endpoints = Table(title="endpoints", title_justify="left")
    for column in ("endpoint", "kind", "runs", "wire"):
        endpoints.add_column(column)
    seen: set[tuple[str, str, str]] = set()
    for task in resolved.tasks:
        for endpoint in task.endpoints:
            row = (endpoint.name, slug_of(endpoint.kind), _locator(endpoint))
            if row not in seen:
                seen.add(row)
                endpoints.add_row(*(Text(cell) for cell in row), slug_of(endpoint.wire))
    shape = slug_of(resolved.rig_shape)
    tasks = Table(
        title=f"the plan as it would run: {resolved.episodes_total} episodes on {shape}", title_justify="left"
    )
    tasks.add_column("task", no_wrap=True)
    tasks.add_column("endpoints")
    tasks.add_column("episodes", justify="right", no_wrap=True)
    tasks.add_column("cap", justify="right", no_wrap=True)
    tasks.add_column("episode order")
    for task in resolved.tasks:
        tasks.add_row(
            Text(str(task.task_id)),
            Text(", ".join(f"{e.name}×{e.episodes}" for e in task.endpoints)),
            str(task.episodes),
            f"{task.cap_per_episode_sec} s",
            Text(_runs_of(task.episode_order)),
        )
    tasks.add_section()
    tasks.add_row(Text("total", style="bold"), "", Text(str(resolved.episodes_total), style="bold"), "", "")
    return endpoints, tasks


def resolve(
    from_file: Path = FromFile, as_json: bool = AsJson, platform_url: str | None = PlatformUrl
) -> None:
    """The plan as it would run (submissions.resolve), with nothing filed and no quota spent."""
    plan = _plan(from_file)
    with connected_client(platform_url, as_json) as client:
        resolved = client.resolve_plan(plan)
    if as_json:
        print_json(resolved)
        return
    for table in resolved_tables(resolved):
        print_table(table)
    if resolved.credit_quote is not None:
        console.print(describe_quote(resolved.credit_quote), soft_wrap=True)


# --- eval status / list / cancel ---------------------------------------------------------------------


def _links(refs: ArtifactRefs | None) -> None:
    if refs is None:
        return
    for name in ("result", "diagnostics", "policy_log"):
        url = getattr(refs, name)
        if url:
            console.print(f"{name}: {escape(url)}", soft_wrap=True)


def _describe(view: SubmissionView) -> None:
    status = slug_of(view.status)
    console.print(f"[bold]submission {view.id}[/bold]: {status}")
    console.print(f"episodes: {view.episodes.done}/{view.episodes.total}")
    if isinstance(view, FinishedSubmissionView):
        console.print(f"score (primary): [bold]{_score(view.scores.primary)}[/bold]")
        _links(view.artifacts)
        if view.replay is not None:
            console.print(f"replay: {escape(view.replay.url)}", soft_wrap=True)
    elif isinstance(view, ErroredSubmissionView):
        code = slug_of(view.reason_code) if view.reason_code is not None else "no reason code"
        console.print(f"[red]{escape(code)}:[/red] {escape(view.reason or '')}", soft_wrap=True)
        _links(view.artifacts)
    elif isinstance(view, PendingSubmissionView):
        console.print(f"queue position: {view.queue_position} (received {_when(view.received_at)})")
    elif isinstance(view, RunningSubmissionView):
        detail = f" ({view.stage_detail})" if view.stage_detail else ""
        console.print(f"running since {_when(view.running_since)}, stage {view.stage or '-'}{escape(detail)}")
    elif isinstance(view, BlockedSubmissionView):
        console.print(f"blocked: {escape(view.reason or 'no reason given')}", soft_wrap=True)
    elif isinstance(view, CancelledSubmissionView):
        console.print(f"cancelled at {_when(view.cancelled_at)}")


def status(ident: str = IdArgument, as_json: bool = AsJson, platform_url: str | None = PlatformUrl) -> None:
    """A submission's status (submissions.get): episodes done, its score, why it failed, its artifacts."""
    submission = _submission_id(ident)
    with connected_client(platform_url, as_json) as client:
        view = client.get_submission(submission)
        details = _details(client, submission)
    if as_json:
        # The contract's view as its CLI prints it, and Yardstick's own beside it.
        print_json({**view.model_dump(mode="json"), "yardstick": details})
    else:
        _describe(view)
        _endpoint_lines(details)
        if details.get("stopping"):
            _stopping_line(details["stopping"])
        for point in details.get("checkpoints") or []:
            _checkpoint_line(point)


def own_call(client: PlatformClient, method: str, path: str, **sent: Any) -> Any:
    """One of Yardstick's own routes beside the contract's, with the client's key."""
    with http_to(client.base_url) as http:
        return call(http, method, path, key=client.api_key, **sent)


def _pairwise_tables(read: dict[str, Any]) -> None:
    if not read["standings"]:
        console.print(f"{read['board']}: no run you can read has played two policies on the same trials")
        return
    table = Table(
        title=f"{read['board']}: pairwise, {read['games']} games in {read['runs']} runs", title_justify="left"
    )
    for column in ("rank", "rank 95%", "policy", "score", "95% interval", "games"):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for s in read["standings"]:
        spread = (
            f"{s['rank_low']}" if s["rank_low"] == s["rank_high"] else f"{s['rank_low']}-{s['rank_high']}"
        )
        table.add_row(
            str(s["rank"]),
            spread,
            Text(s["policy"]),
            f"{100 * s['chance']:.1f}%",
            f"{100 * s['low']:.1f}-{100 * s['high']:.1f}%",
            str(s["games"]),
        )
    print_table(table)
    duels = Table(title="head to head", title_justify="left")
    for column in ("policy", "against", "wins", "ties", "losses"):
        duels.add_column(column, justify="left" if column in ("policy", "against") else "right")
    for h in read["head_to_head"]:
        duels.add_row(Text(h["a"]), Text(h["b"]), str(h["wins"]), str(h["ties"]), str(h["losses"]))
    print_table(duels)
    for a, b in read["next_pairs"]:
        console.print(f"to play next: {escape(a)} against {escape(b)}", soft_wrap=True)


def _curve_tables(read: dict[str, Any]) -> None:
    if not read["curves"]:
        console.print(f"{read['board']}: no run names a checkpoint (an endpoint named policy@checkpoint)")
    for curve in read["curves"]:
        table = Table(title=curve["policy"], title_justify="left")
        for column in ("checkpoint", "success", "95% interval", "episodes", "against earlier"):
            table.add_column(
                column, justify="left" if column in ("checkpoint", "against earlier") else "right"
            )
        for p in curve["points"]:
            regression = p["regression"]
            against = (
                "-"
                if regression is None
                else f"regressed against {regression['against']} (p = {regression['p_value']:.3g})"
            )
            shown = "-" if p["low"] is None else f"{100 * p['low']:.1f}-{100 * p['high']:.1f}%"
            table.add_row(
                Text(p["checkpoint"]), _score(p["success"]), shown, str(p["episodes"]), Text(against)
            )
        print_table(table)


def _details(client: PlatformClient, submission: SubmissionId) -> dict[str, Any]:
    """Yardstick's own of a run: its checkpoints and, for a run stopped by a rule, its rounds."""
    return dict(own_call(client, "GET", SUBMISSION_DETAILS, params={"id": str(submission)}))


def _stopping_line(stopping: dict[str, Any]) -> None:
    state = stopping.get("state") or {}
    rounds = ", ".join(str(r) for r in stopping.get("rounds") or [])
    played = ", ".join(f"{t} {trace['episodes']}" for t, trace in (state.get("tasks") or {}).items())
    verdict = "decided" if stopping.get("decided") else "open" if stopping.get("open") else "at the cap"
    console.print(
        f"until {escape(str(stopping['until']))} (alpha {stopping['alpha']:g}): rounds to {rounds} trials; "
        f"{verdict}" + (f"; played {escape(played)}" if played else ""),
        soft_wrap=True,
    )
    for gate in state.get("gates") or []:
        console.print(f"gate {escape(gate['gate'])}: {gate['decision'] or 'undecided'}")


def _endpoint_lines(details: dict[str, Any]) -> None:
    """Each endpoint's own success, for a run of several: the contract's primary score pools them."""
    endpoints: dict[str, dict[str, Any] | None] = details.get("endpoints") or {}
    if len(endpoints) < 2:
        return
    console.print(f"the primary score pools {len(endpoints)} endpoints; each one's own:")
    for name, success in endpoints.items():
        if not success or success.get("value") is None:
            console.print(f"endpoint {escape(name)}: no success scored", soft_wrap=True)
            continue
        console.print(
            f"endpoint {escape(name)}: success {success['value']:.1%} ({success['low']:.1%}-"
            f"{success['high']:.1%}, {success['interval']}, {success['n']} episodes)",
            soft_wrap=True,
        )


def _checkpoint_line(point: dict[str, Any]) -> None:
    regression = point["regression"]
    shown = f"checkpoint {escape(point['endpoint'])}: success {_score(point['success'])}"
    if regression is None:
        console.print(shown, soft_wrap=True)
        return
    console.print(
        f"{shown} [red]regressed[/red] against {escape(regression['against'])}: "
        f"{regression['earlier_only']} trials only it succeeded at, {regression['this_only']} only this one "
        f"(of {regression['pairs']}; exact paired p = {regression['p_value']:.3g})",
        soft_wrap=True,
    )


def _status_cell(row: SubmissionListRow) -> Text:
    text = slug_of(row.status)
    if row.reason_code is not None:
        text += f" ({slug_of(row.reason_code)})"
    style = {"finished": "green", "errored": "red", "cancelled": "yellow"}.get(slug_of(row.status), "")
    return Text(text, style=style)


def list_submissions(
    as_json: bool = AsJson,
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="At most N submissions, the oldest first (default: all)."
    ),
    platform_url: str | None = PlatformUrl,
) -> None:
    """Your submissions, oldest first (submissions.list, every page)."""
    rows: list[SubmissionListRow] = []
    cursor: SubmissionId | None = None
    with connected_client(platform_url, as_json) as client:
        while limit is None or len(rows) < limit:
            wanted = None if limit is None else min(limit - len(rows), LIST_PAGE_CAP)
            page = client.list_submissions(after=cursor, limit=wanted)
            rows.extend(page.submissions)
            cursor = page.next
            if cursor is None or not page.submissions:
                cursor = None
                break
    if limit is not None and len(rows) > limit:
        rows, cursor = rows[:limit], rows[limit - 1].id
    if as_json:
        # Every page as one, as the contract's CLI prints it; `next` is where a --limit stopped, else null.
        print(
            json.dumps(
                {
                    "submissions": [row.model_dump(mode="json") for row in rows],
                    "next": None if cursor is None else str(cursor),
                },
                indent=2,
            )
        )
        return
    table = Table(title=f"{len(rows)} submissions", title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("status")
    table.add_column("eval", no_wrap=True)
    table.add_column("episodes", justify="right", no_wrap=True)
    table.add_column("received")
    for row in rows:
        table.add_row(
            str(row.id),
            _status_cell(row),
            Text(str(row.eval) if row.eval else "(own tasks)"),
            f"{row.episodes.done}/{row.episodes.total}",
            _when(row.received_at),
        )
    print_table(table)
    if cursor is not None:
        console.print(f"more after {cursor}: raise --limit to see them", style="dim")


def cancel(ident: str = IdArgument, as_json: bool = AsJson, platform_url: str | None = PlatformUrl) -> None:
    """Cancel a run that has not ended (submissions.cancel); its quota comes back if nothing had started."""
    submission = _submission_id(ident)
    with connected_client(platform_url, as_json) as client:
        answer = client.cancel_submission(CancelRequest(id=submission))
    if as_json:
        print_json(answer)
    else:
        refund = "quota refunded" if answer.refunded else "not refunded: it had started"
        console.print(f"submission {submission}: {slug_of(answer.status)} ({refund})")


# --- eval artifacts ----------------------------------------------------------------------------------


def _all_artifacts(
    client: PlatformClient, submission: SubmissionId, prefix: str | None
) -> list[ArtifactEntry]:
    entries: list[ArtifactEntry] = []
    after: str | None = None
    while True:
        page = client.list_artifacts(submission, prefix=prefix, after=after)
        entries.extend(page.artifacts)
        if page.next is None or not page.artifacts:
            return entries
        after = page.next


def _target(folder: Path, key: str) -> Path:
    """Where an artifact lands: its key's path under `folder`, never outside it."""
    parts = PurePosixPath(key).parts
    if not parts or PurePosixPath(key).is_absolute() or any(part in ("..", ".") for part in parts):
        raise ValueError(f"the platform named an artifact {key!r}, which is no path under a folder")
    return folder.joinpath(*parts)


def _download(entries: list[ArtifactEntry], folder: Path, url: str, as_json: bool) -> None:
    # A signed URL is its own credential: no key goes with it, and no proxy from the environment on http.
    with (
        httpx.Client(timeout=60.0, trust_env=url.startswith("https:")) as http,
        _progress("[bold]downloading") as progress,
        explained_calls(url, as_json),
    ):
        task = progress.add_task("files", total=len(entries))
        for entry in entries:
            try:
                target = _target(folder, entry.key)
            except ValueError as exc:
                fail(Exit.PLATFORM, str(exc))
            target.parent.mkdir(parents=True, exist_ok=True)
            with http.stream("GET", entry.url) as response:
                if not 200 <= response.status_code < 300:
                    response.read()
                    try:
                        payload: object = response.json()
                    except ValueError:
                        payload = response.text
                    raise PlatformError.from_payload(response.status_code, payload)
                with target.open("wb") as out:
                    for chunk in response.iter_bytes():
                        out.write(chunk)
            progress.advance(task)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    scaled = float(size)
    for unit in ("KB", "MB", "GB"):
        scaled /= 1024
        if scaled < 1024 or unit == "GB":
            break
    return f"{scaled:.1f} {unit}"


def artifacts(
    ident: str = IdArgument,
    prefix: str | None = typer.Option(
        None, "--prefix", help="Only keys under this prefix, e.g. attempts/1/episodes/."
    ),
    as_json: bool = AsJson,
    download: Path | None = typer.Option(
        None, "--download", help="Fetch every file listed into this folder, keeping the key paths."
    ),
    platform_url: str | None = PlatformUrl,
) -> None:
    """What a finished run wrote (submissions.artifacts, every page); --download fetches the files."""
    submission = _submission_id(ident)
    with connected_client(platform_url, as_json) as client:
        entries = _all_artifacts(client, submission, prefix)
        reached = client.base_url
    if as_json:
        # Fetched first, so a refused download leaves its envelope alone on stdout.
        if download is not None:
            _download(entries, download, reached, as_json)
        print(json.dumps({"artifacts": [e.model_dump(mode="json") for e in entries], "next": None}, indent=2))
        return
    table = Table(title=f"{len(entries)} artifacts of {submission}", title_justify="left")
    table.add_column("key", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    for entry in entries:
        table.add_row(Text(entry.key), _size(entry.size))
    print_table(table)
    if download is not None:
        _download(entries, download, reached, as_json)
        console.print(f"{len(entries)} files in {escape(str(download))}")


# --- eval catalog ------------------------------------------------------------------------------------


def catalog(as_json: bool = AsJson, platform_url: str | None = PlatformUrl) -> None:
    """The evals a plan may name (catalog.evals), and the tasks it may compose (catalog.tasks).

    Composing a plan of its own tasks takes a grant; without one the tasks are not listed.
    """
    refusal: PlatformError | None = None
    with connected_client(platform_url, as_json) as client:
        evals = client.catalog_evals().evals
        try:
            tasks = client.catalog_tasks().tasks
        except PlatformError as exc:
            if exc.code is not ErrorCode.forbidden:
                raise
            tasks, refusal = None, exc
    if as_json:
        print(
            json.dumps(
                {
                    "evals": [e.model_dump(mode="json") for e in evals],
                    "tasks": None if tasks is None else [t.model_dump(mode="json") for t in tasks],
                },
                indent=2,
            )
        )
        return
    table = Table(title="evals a plan may name", title_justify="left")
    for column in ("eval", "embodiment", "tasks", "composable", "metric", "description"):
        table.add_column(column, no_wrap=column in ("eval", "tasks", "metric"))
    for ev in evals:
        table.add_row(
            Text(str(ev.id)),
            Text(ev.embodiment),
            str(len(ev.tasks)),
            "yes" if ev.composable else "no",
            Text(ev.primary_metric or "-"),
            Text(ev.description),
        )
    print_table(table)
    if tasks is None:
        reason = f" ({refusal.message})" if refusal is not None else ""
        console.print(
            f"tasks: composing a plan of your own tasks needs a grant your key does not hold{escape(reason)}",
            soft_wrap=True,
        )
        return
    tasks_table = Table(title="tasks a plan may compose", title_justify="left")
    for column in ("task", "embodiments", "default cap", "description"):
        tasks_table.add_column(column, no_wrap=column == "task")
    for summary in tasks:
        cap = summary.default_cap_per_episode_sec
        tasks_table.add_row(
            Text(str(summary.id)),
            Text(", ".join(slug_of(shape) for shape in summary.embodiments)),
            "-" if cap is None else f"{cap} s",
            Text(summary.task),
        )
    print_table(tasks_table)


# --- boards ------------------------------------------------------------------------------------------


def boards(
    board: str | None = typer.Option(None, "--board", help="One board's rankings, by its slug."),
    pairwise: bool = typer.Option(
        False, "--pairwise", help="With --board: its pairwise (Bradley–Terry) ranking, head to head."
    ),
    curves: bool = typer.Option(
        False, "--curves", help="With --board: each policy's success by checkpoint, regressions flagged."
    ),
    as_json: bool = AsJson,
    platform_url: str | None = PlatformUrl,
) -> None:
    """The boards you can read (rankings.list), or one board's rankings (rankings.get), its pairwise
    ranking (--pairwise) or its checkpoint curves (--curves): Yardstick's own.

    A public board needs no key.
    """
    if (pairwise or curves) and board is None:
        fail(Exit.USAGE, f"--{'pairwise' if pairwise else 'curves'} reads one board: give --board SLUG")
    if pairwise and curves:
        fail(Exit.USAGE, "--pairwise and --curves are two views: ask for one at a time")
    if board is not None and (pairwise or curves):
        with connected_client(platform_url, as_json, key_required=False) as client:
            read = own_call(
                client, "GET", BOARD_PAIRWISE if pairwise else BOARD_CURVES, params={"board": board}
            )
        if as_json:
            print(json.dumps(read, indent=2))
        elif pairwise:
            _pairwise_tables(read)
        else:
            _curve_tables(read)
        return
    ref: BoardRef | None = None
    if board is not None:
        try:
            ref = BoardRef(board)
        except ValueError as exc:
            fail(Exit.USAGE, f"--board: {exc}")
    with connected_client(platform_url, as_json, key_required=False) as client:
        if ref is None:
            listed = client.list_boards()
            if as_json:
                print_json(listed)
                return
            table = Table(title="boards", title_justify="left")
            for column in ("board", "title", "eval", "ranked on", "visibility"):
                table.add_column(column, no_wrap=column == "board")
            for summary in listed.boards:
                table.add_row(
                    Text(str(summary.board)),
                    Text(summary.title),
                    Text(str(summary.eval)),
                    Text(summary.primary_metric),
                    slug_of(summary.visibility),
                )
            print_table(table)
            return
        ranked = client.rankings(board=ref)
    if as_json:
        print_json(ranked)
        return
    table = Table(
        title=f"{ranked.board}: {ranked.eval}, ranked on {ranked.primary_metric}",
        title_justify="left",
        caption="a baseline is a reference model: shown, not ranked",
        caption_justify="left",
    )
    table.add_column("rank", justify="right", no_wrap=True)
    table.add_column("name#tag", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("submission", no_wrap=True)
    table.add_column("baseline of")
    for row in ranked.rankings:
        table.add_row(
            "" if row.rank is None else str(row.rank),
            Text(f"{row.display_name}#{row.tag}"),
            _score(row.scores.primary),
            str(row.submission_id),
            Text(row.baseline.publisher if row.baseline else ""),
        )
    print_table(table)
