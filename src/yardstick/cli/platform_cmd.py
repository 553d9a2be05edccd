"""`yardstick server`, `yardstick worker`, `yardstick db upgrade` and `yardstick admin …`: running a
platform and administering it with direct access to its database."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer

from yardstick.cli.display import console, print_error, print_table
from yardstick.cli.exits import Exit
from yardstick.cli.options import RayAddressOption, chosen_cluster
from yardstick.core.settings import Settings
from yardstick.distribution import install_hint

DataDir = typer.Option(
    None,
    "--data-dir",
    help="Where the platform keeps its state (default: $YARDSTICK_DATA_DIR or ~/.local/share/yardstick).",
)
DatabaseUrl = typer.Option(
    None,
    "--database",
    help="postgresql://… or a SQLite path (default: a SQLite file in the "
    "data directory; $YARDSTICK_DATABASE_URL).",
)


CallTimeout = typer.Option(
    None,
    "--call-timeout",
    min=0.1,
    help="Seconds one policy or benchmark call may take before its episode fails (default 60).",
)


Registry = typer.Option(
    [],
    "--registry",
    help="A container registry policy images are pulled from (http://HOST:PORT or https://HOST; "
    "repeatable); the first is also the mirror Sequences images' bases are built from. None named: image "
    "endpoints and images with a system of their own are refused.",
)
ImageCacheSize = typer.Option(
    None,
    "--image-cache",
    min=1.0,
    help="GiB the images pulled from the registries (and bases of builds) may take in podman's store before "
    "those used longest ago are removed (default 32).",
)
AllowRemote = typer.Option(
    [],
    "--allow-remote",
    help="An address on this machine remote endpoints may name (HOST:PORT, HOST for any port, or "
    "unix:/path); loopback, link-local and unix-socket endpoints are refused otherwise. Repeatable.",
)
BoxMemory = typer.Option(
    None, "--box-memory", min=0.1, help="GiB of memory each box of an org's code may use (default 8)."
)
BoxProcesses = typer.Option(
    None, "--box-processes", min=8, help="Processes each box of an org's code may run (default 512)."
)
RobotsHost = typer.Option(
    None,
    "--robots-host",
    help="The address of this machine that robots reach its act workers at (sequence_ai.connect's direct "
    "plane; default 127.0.0.1: robots on this machine only).",
)
RobotIdle = typer.Option(
    None, "--robot-idle", min=1.0, help="Seconds an act worker serves past its last act (default 300)."
)
Artifacts = typer.Option(
    None,
    "--artifacts",
    envvar="YARDSTICK_ARTIFACTS",
    help="Where runs' objects are kept: s3://BUCKET/PREFIX for an S3-compatible store (its endpoint and "
    "credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE); "
    "by default the data folder's artifacts/.",
)
Executor = typer.Option(
    "pool",
    "--executor",
    help="Where the catalogue's episodes play: pool (this machine's worker processes) or ray (a Ray "
    "cluster, one worker process driving actors on all its machines; org code stays in this machine's "
    "boxes).",
)
EpisodeTimeout = typer.Option(
    None,
    "--episode-timeout",
    min=1.0,
    help="Seconds of wall-clock time one episode of an org's code may take before its box is killed, and "
    "any episode on a Ray actor before the actor is (default 1800).",
)


def _settings(data_dir: Path | None, database: str | None, call_timeout: float | None = None) -> Settings:
    settings = Settings.from_env(data_dir, database)
    return settings if call_timeout is None else dataclasses.replace(settings, call_timeout_s=call_timeout)


def _platform_settings(
    data_dir: Path | None,
    database: str | None,
    call_timeout: float | None,
    allow_remote: list[str],
    box_memory: float | None,
    box_processes: int | None,
    episode_timeout: float | None,
    registries: list[str] = [],  # noqa: B006 -- read only
    image_cache: float | None = None,
    robots_host: str | None = None,
    robot_idle: float | None = None,
    artifacts: str | None = None,
    ray_address: str | None = None,
) -> Settings:
    """The settings of a server or a worker: what boxes may use, which local addresses may be dialled,
    where runs' objects are kept."""
    from yardstick.core.s3_artifacts import S3ArtifactStore
    from yardstick.hosted.limits import GiB

    settings = _settings(data_dir, database, call_timeout)
    for allowed in allow_remote:
        if not _allowable(allowed):
            rule = f"{allowed!r} is HOST:PORT, HOST (any port) or unix:/absolute/path"
            raise typer.BadParameter(rule, param_hint="--allow-remote")
    for registry in registries:
        parts = urlsplit(registry)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/"):
            raise typer.BadParameter(
                f"{registry!r} is http://HOST:PORT or https://HOST", param_hint="--registry"
            )
    if robots_host is not None and not _host(robots_host):
        said = f"an IP address or a host name, not {robots_host!r}"
        raise typer.BadParameter(said, param_hint="--robots-host")
    if artifacts is not None:
        try:
            S3ArtifactStore(artifacts).check()
        except (ValueError, RuntimeError) as exc:
            raise typer.BadParameter(str(exc).removeprefix("artifacts: "), param_hint="--artifacts") from None
    limits = settings.box_limits
    if box_memory is not None:
        limits = dataclasses.replace(limits, memory_bytes=int(box_memory * GiB))
    if box_processes is not None:
        limits = dataclasses.replace(limits, processes=box_processes)
    return dataclasses.replace(
        settings,
        allow_remote=tuple(allowed.strip() for allowed in allow_remote),
        registries=tuple(registry.rstrip("/") for registry in registries),
        image_cache_bytes=int(image_cache * GiB) if image_cache else settings.image_cache_bytes,
        box_limits=limits,
        episode_timeout_s=episode_timeout or settings.episode_timeout_s,
        act_host=robots_host or settings.act_host,
        act_idle_s=robot_idle or settings.act_idle_s,
        artifacts_url=artifacts,
        ray_address=ray_address,
    )


def _platform_ray(executor: str, address: str | None, processes: int, processes_flag: str) -> str | None:
    """The Ray cluster a server's or worker's episodes play on (None: this machine's processes), checked to
    answer before anything starts; a misused flag refused by name."""
    if chosen_cluster(executor, address) is None:
        return None
    if processes > 1:
        # Each worker process's actors take every CPU of the cluster: a second would wait for the first's.
        raise typer.BadParameter(
            "one worker process drives the whole Ray cluster with --executor ray: add machines to the "
            "cluster (ray start --address …), not worker processes",
            param_hint=processes_flag,
        )
    from yardstick.engine.ray_executor import check_answers

    try:
        import ray  # noqa: F401 -- only asked whether it is installed
    except ModuleNotFoundError:
        raise typer.BadParameter(
            f"Ray is not installed here: {install_hint('cluster')}", param_hint="--executor ray"
        ) from None
    address = address or "auto"
    try:
        check_answers(address)
    except ConnectionError as exc:
        raise typer.BadParameter(f"no Ray cluster at {address}: {exc}", param_hint="--ray-address") from None
    return address


def _executor(no_worker: bool, workers: int, ray_address: str | None = None) -> str:
    """Where this process's episodes play, as its start-up says it."""
    if no_worker:
        return "on workers elsewhere (yardstick worker)"
    if ray_address is not None:
        return (
            f"the Ray cluster at {ray_address} (one worker process here hands the catalogue's episodes to "
            "actors on its machines; org code plays in this machine's boxes)"
        )
    return f"the local pool ({workers} worker process{'es' if workers > 1 else ''} on this machine)"


def _artifact_place(settings: Settings) -> str:
    from yardstick.core.install import open_artifact_store

    return str(open_artifact_store(settings))


def _host(text: str) -> bool:
    """An IP address, or a host name of DNS's letters."""
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return re.fullmatch(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?", text) is not None


def _allowable(text: str) -> bool:
    text = text.strip()
    if text.startswith("unix:"):
        return text[len("unix:") :].startswith("/")
    host, colon, port = text.rpartition(":") if not text.endswith("]") else (text, "", "")
    if colon and port.isdigit() and 0 < int(port) < 65536:
        return bool(host)
    return bool(text) and " " not in text and "/" not in text


def run_worker(settings: Settings, name: str | None = None, parent: int | None = None) -> None:
    """A worker process's life: play episodes until SIGTERM, SIGINT or (given its `parent`'s pid) the
    parent's death, then hand back what it held, the episode in play included."""
    from yardstick.gateway.services import ledger_for
    from yardstick.worker.platform_worker import PlatformWorker
    from yardstick.worker.processes import die_with_parent

    worker = PlatformWorker(settings, ledger_for(settings), name=name)
    signal.signal(signal.SIGTERM, lambda *_: worker.interrupt())
    signal.signal(signal.SIGINT, lambda *_: worker.interrupt())
    if parent is not None:
        # From the watching thread: it cannot cut the episode in play, so it wakes the main thread's handler.
        die_with_parent(parent, lambda: os.kill(os.getpid(), signal.SIGTERM))
    worker.run()


class _Held:
    """`with held():` a signal that arrives inside the block takes effect when the block ends, not in it:
    a process spawned while SIGTERM cut its parent short was handed half its start-up data (it died with
    a traceback)."""

    def __init__(self, stop: Callable[[int, Any], None]) -> None:
        self._stop = stop
        self.holding = False
        self.arrived: int | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
            if self.arrived is not None:
                self._stop(self.arrived, None)


@contextmanager
def _stopped_by_signals() -> Iterator[_Held]:
    """SIGTERM (and SIGINT) end the block by an exception, so what follows it (stopping the workers) runs:
    uvicorn re-raises the signal it caught once it has shut down, and the default SIGTERM would kill the
    process there, before the workers were stopped. A second signal while stopping is ignored. The block is
    handed a `_Held`, to start processes in without a signal cutting a start in half."""

    def stop(signum: int, frame: Any) -> None:
        if held.holding:
            held.arrived = signum
            return
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise SystemExit(0)

    held = _Held(stop)
    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield held
    except KeyboardInterrupt:
        pass
    finally:
        for sig in before:
            signal.signal(sig, signal.SIG_IGN)  # stopping now: a second signal must not cut it short


def server(
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
    host: str = typer.Option("127.0.0.1", help="The address to bind."),
    port: int = typer.Option(8080, help="The HTTP port."),
    no_worker: bool = typer.Option(False, "--no-worker", help="Serve the API only; workers run elsewhere."),
    workers: int = typer.Option(1, min=1, help="Embedded worker processes."),
    http_workers: int = typer.Option(
        1,
        "--http-workers",
        min=1,
        help="HTTP processes serving the API on one socket (more cores); 1 serves in this process.",
    ),
    log_level: str = typer.Option(
        "warning",
        help="uvicorn's log level; info adds a line per request (method, path, status; tokens and "
        "signatures in paths redacted).",
    ),
    call_timeout: float | None = CallTimeout,
    allow_remote: list[str] = AllowRemote,
    registry: list[str] = Registry,
    image_cache: float | None = ImageCacheSize,
    box_memory: float | None = BoxMemory,
    box_processes: int | None = BoxProcesses,
    episode_timeout: float | None = EpisodeTimeout,
    robots_host: str | None = RobotsHost,
    robot_idle: float | None = RobotIdle,
    artifacts: str | None = Artifacts,
    executor: str = Executor,
    ray_address: str | None = RayAddressOption,
) -> None:
    """The whole platform on one machine: the API, workers, the database and the artifacts, migrations
    applied. OpenAPI at /docs."""
    from yardstick.gateway.app import create_app
    from yardstick.gateway.http_workers import supervisor as http_workers_of
    from yardstick.gateway.services import open_services
    from yardstick.gateway.serving import bind, serve
    from yardstick.worker.supervisor import Supervisor

    settings = _platform_settings(
        data_dir,
        database,
        call_timeout,
        allow_remote,
        box_memory,
        box_processes,
        episode_timeout,
        registry,
        image_cache,
        robots_host,
        robot_idle,
        artifacts,
        _platform_ray(executor, ray_address, 0 if no_worker else workers, "--workers"),
    )
    supervisor = Supervisor(settings, 0 if no_worker else workers, run_worker)
    with _stopped_by_signals() as held:
        services = open_services(settings)
        http: Supervisor | None = None
        try:
            console.print(f"data: {settings.data_dir}  database: {settings.database.split('@')[-1]}")
            console.print(f"artifacts: {services.platform.artifacts}")
            console.print(f"episodes: {_executor(no_worker, workers, settings.ray_address)}", soft_wrap=True)
            console.print(f"API:  http://{host}:{port}/v1  (OpenAPI at /docs)")
            console.print(f"sign-in: http://{host}:{port}/device  (yardstick login)")
            with held():
                supervisor.start()
            if http_workers == 1:
                serve(create_app(services), host=host, port=port, log_level=log_level)
            else:
                http = http_workers_of(settings, http_workers, bind(host, port), log_level)
                with held():
                    http.start()
                http.join()
        finally:
            if http is not None:
                http.stop()  # the HTTP processes first: they finish the requests in hand
            supervisor.stop()
            services.close()


def worker(
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
    concurrency: int = typer.Option(1, min=1, help="Worker processes on this machine."),
    call_timeout: float | None = CallTimeout,
    allow_remote: list[str] = AllowRemote,
    registry: list[str] = Registry,
    image_cache: float | None = ImageCacheSize,
    box_memory: float | None = BoxMemory,
    box_processes: int | None = BoxProcesses,
    episode_timeout: float | None = EpisodeTimeout,
    robots_host: str | None = RobotsHost,
    robot_idle: float | None = RobotIdle,
    artifacts: str | None = Artifacts,
    executor: str = Executor,
    ray_address: str | None = RayAddressOption,
) -> None:
    """Play queued episodes from a platform's database (PostgreSQL for workers on other machines; the
    artifact folder must be shared with the server's). The worker processes are supervised: one that dies is
    replaced; SIGTERM or SIGINT stops them all."""
    from yardstick.worker.supervisor import Supervisor

    settings = _platform_settings(
        data_dir,
        database,
        call_timeout,
        allow_remote,
        box_memory,
        box_processes,
        episode_timeout,
        registry,
        image_cache,
        robots_host,
        robot_idle,
        artifacts,
        _platform_ray(executor, ray_address, concurrency, "--concurrency"),
    )
    supervisor = Supervisor(settings, concurrency, run_worker)
    console.print(f"artifacts: {_artifact_place(settings)}")
    console.print(f"episodes: {_executor(False, concurrency, settings.ray_address)}", soft_wrap=True)
    with _stopped_by_signals() as held:
        try:
            with held():
                supervisor.start()
            supervisor.join()
        finally:
            supervisor.stop()


db_app = typer.Typer(help="The platform's database.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(data_dir: Path | None = DataDir, database: str | None = DatabaseUrl) -> None:
    """Apply every migration not yet applied."""
    from yardstick.store.db import Database

    settings = _settings(data_dir, database)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    Database(settings.database).upgrade()
    console.print("database is up to date")


admin_app = typer.Typer(help="Administer a platform (direct database access).", no_args_is_help=True)
org_app = typer.Typer(help="Organizations.", no_args_is_help=True)
user_app = typer.Typer(help="Users.", no_args_is_help=True)
key_app = typer.Typer(help="API keys.", no_args_is_help=True)
eval_admin_app = typer.Typer(help="Catalogue evals.", no_args_is_help=True)
baseline_app = typer.Typer(help="Baselines on boards.", no_args_is_help=True)
for sub, name in (
    (org_app, "org"),
    (user_app, "user"),
    (key_app, "key"),
    (eval_admin_app, "eval"),
    (baseline_app, "baseline"),
):
    admin_app.add_typer(sub, name=name)


@contextmanager
def _database(
    data_dir: Path | None, database: str | None, *, write: bool = True
) -> Iterator[tuple[Any, Any]]:
    """The open install and a session on its database, closed after; an `AdminError` is the caller's
    (exit 1)."""
    from yardstick.core.admin import AdminError
    from yardstick.core.install import open_install

    install = open_install(_settings(data_dir, database))
    try:
        with install.db.writing() if write else install.db.reading() as session:
            yield install, session
    except AdminError as exc:
        print_error(str(exc))
        raise typer.Exit(Exit.CALLER) from None
    finally:
        install.close()


def _do(data_dir: Path | None, database: str | None, action: Any) -> Any:
    with _database(data_dir, database) as (_, session):
        return action(session)


BillingMode = typer.Option(
    "packaged", help="packaged (invoiced by its terms) or pay_as_you_go (runs spend its credit balance)."
)
OnExhausted = typer.Option(
    "block",
    help="When a quota is spent: block refuses a submission, meter admits it and counts past the limit.",
)


@org_app.command("create")
def org_create(
    slug: str,
    name: str = "",
    per_day: int = typer.Option(20, help="Submissions a day per user."),
    concurrent: int = typer.Option(4, help="Submissions queued or running at once."),
    no_compose: bool = typer.Option(False, help="Its members may only name evals."),
    billing_mode: str = BillingMode,
    on_exhausted: str = OnExhausted,
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.core import admin

    _do(
        data_dir,
        database,
        lambda s: admin.create_org(
            s,
            slug,
            name=name,
            per_day=per_day,
            concurrent=concurrent,
            may_compose=not no_compose,
            billing_mode=billing_mode,
            on_exhausted=on_exhausted,
        ),
    )
    console.print(f"org {slug} created")


@user_app.command("create")
def user_create(
    login: str,
    org: list[str] = typer.Option([], "--org", help="An org to join (repeatable)."),
    alias: str | None = None,
    is_admin: bool = typer.Option(False, "--admin"),
    password: bool = typer.Option(
        False,
        "--password",
        help="Set a password for the sign-in page (asked at a prompt, or a line of stdin).",
    ),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.core import admin
    from yardstick.signin.passwords import set_password

    secret = _read_password() if password else None

    def create(session: Any) -> None:
        admin.create_user(session, login, orgs=org, alias=alias, is_admin=is_admin)
        if secret is not None:
            set_password(session, login, secret)

    _do(data_dir, database, create)
    console.print(f"user {login} created" + (", with a password" if secret is not None else ""))


def _read_password() -> str:
    """A password from the terminal (asked twice), else one line of stdin: never an argument, which any
    process listing would show."""
    import getpass
    import sys

    if sys.stdin.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != first:
            console.print("[red]error:[/red] the two passwords differ")
            raise typer.Exit(Exit.CALLER)
        return first
    return sys.stdin.readline().rstrip("\r\n")


@user_app.command("password")
def user_password(login: str, data_dir: Path | None = DataDir, database: str | None = DatabaseUrl) -> None:
    """Set a user's password for the platform's sign-in page (the device flow's approval), read from a
    prompt or one line of stdin. Only its salted scrypt digest is kept."""
    from yardstick.signin.passwords import set_password

    secret = _read_password()
    _do(data_dir, database, lambda s: set_password(s, login, secret))
    console.print(f"password of {login} set")


@key_app.command("create")
def key_create(
    login: str, label: str = "", data_dir: Path | None = DataDir, database: str | None = DatabaseUrl
) -> None:
    """Mint a key for a user. It is shown this once; only its hash is kept."""
    from yardstick.core import admin

    minted = _do(data_dir, database, lambda s: admin.create_key(s, login, label))
    console.print(f"key for {login} (shown once; store it now):", style="bold")
    print(minted.plaintext)


@key_app.command("revoke")
def key_revoke(prefix: str, data_dir: Path | None = DataDir, database: str | None = DatabaseUrl) -> None:
    from yardstick.core import admin

    _do(data_dir, database, lambda s: admin.revoke_key(s, prefix))
    console.print(f"key {prefix}… revoked")


@eval_admin_app.command("create")
def eval_create(
    slug: str,
    benchmark: str = typer.Option(..., help="mt10, gym:<id>, module:Class …"),
    task: list[str] = typer.Option([], "--task", help="Offer only these tasks (repeatable)."),
    trials: int = typer.Option(10, min=1, help="Trials per task when a plan names the eval."),
    org: str | None = typer.Option(None, help="Offer it to this org only (a tenant board)."),
    title: str = "",
    param: list[str] = typer.Option(
        [], "--param", help="A benchmark parameter, e.g. benchmark.cameras='[\"corner\"]' (repeatable)."
    ),
    record_video: bool = typer.Option(
        False, "--record-video", help="Record every episode (a video per camera, the trajectory)."
    ),
    record_fps: float | None = typer.Option(None, min=0.1, help="Video frame rate (default: the policy's)."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.cli.options import parse_params
    from yardstick.core import admin

    benchmark_params, policy_params = parse_params(param)
    if policy_params:
        raise typer.BadParameter("an eval takes benchmark.NAME=VALUE parameters only", param_hint="--param")
    _do(
        data_dir,
        database,
        lambda s: admin.create_eval(
            s,
            slug,
            benchmark,
            title=title,
            org_slug=org,
            choice=admin.EvalTasks(task or None, trials),
            params=benchmark_params,
            record_video=record_video,
            record_fps=record_fps,
        ),
    )
    console.print(f"eval {slug} created, with its board")


@eval_admin_app.command("from-benchmark")
def eval_from_benchmark(
    owner: str = typer.Argument(..., help="The org that registered the benchmark."),
    name: str = typer.Argument(..., help="The benchmark's name (as `seq deploy` registered it)."),
    slug: str = typer.Argument(..., help="The eval's slug."),
    trials: int = typer.Option(10, min=1, help="Trials per task when a plan names the eval."),
    public: bool = typer.Option(False, "--public", help="A public board (default: the owner's own)."),
    title: str = "",
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Make an org's registered benchmark a catalogue eval with a board: Positronic plans and Sequences evals
    then share it, and rank on its board."""
    from yardstick.core import admin

    _do(
        data_dir,
        database,
        lambda s: admin.eval_of_hosted(s, slug, owner, name, trials=trials, public=public, title=title),
    )
    console.print(f"eval {slug} created over {owner}'s {name}, with its board")


@baseline_app.command("add")
def baseline_add(
    board: str,
    submission: str,
    publisher: str = typer.Option(..., help="Who released the model."),
    name: str = typer.Option(..., help="The name the board shows."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.core import admin

    _do(data_dir, database, lambda s: admin.add_baseline(s, board, int(submission, 16), publisher, name))
    console.print(f"baseline {name} added to {board}")


@org_app.command("set")
def org_set(
    slug: str,
    billing_mode: str | None = typer.Option(None, help="packaged or pay_as_you_go."),
    on_exhausted: str | None = typer.Option(None, help="block or meter."),
    per_day: int | None = typer.Option(None, help="Submissions a day per user."),
    concurrent: int | None = typer.Option(None, help="Submissions queued or running at once."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Change an org's billing mode, what its quotas do when spent, or its limits."""
    from yardstick.core import admin

    _do(
        data_dir,
        database,
        lambda s: admin.set_org(
            s,
            slug,
            billing_mode=billing_mode,
            on_exhausted=on_exhausted,
            per_day=per_day,
            concurrent=concurrent,
        ),
    )
    console.print(f"org {slug} updated")


@org_app.command("billing-role")
def org_billing_role(
    slug: str,
    login: str,
    role: str = typer.Argument(..., help="spender (may buy credits for the org) or none."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Set a member's billing role in an org."""
    from yardstick.billing import admin as billing_admin

    _do(data_dir, database, lambda s: billing_admin.set_billing_role(s, slug, login, role))
    console.print(f"{login} is billing role {role} in {slug}")


credits_app = typer.Typer(help="Credits: grants, purchases, balances.", no_args_is_help=True)
admin_app.add_typer(credits_app, name="credits")


@credits_app.command("grant")
def credits_grant(
    org: str,
    amount: str = typer.Argument(
        ..., help="Credits (100, 2.5), or integer units with a u suffix (600000000u)."
    ),
    note: str = typer.Option("", help="Why, for the ledger."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Add credits to an org's balance directly (a ledger entry of kind grant)."""
    from yardstick.billing import admin as billing_admin
    from yardstick.billing.terms import credits

    units, posted = _do(data_dir, database, lambda s: billing_admin.grant_credits(s, org, amount, note))
    console.print(f"granted {credits(units)} credits ({units} units) to {org}; posted now {credits(posted)}")


@credits_app.command("settle")
def credits_settle(
    purchase_id: str,
    note: str = typer.Option("", help="The payment's reference, for the ledger."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Grant an open purchase's credits once it is paid (the built-in payment provider's confirmation)."""
    from yardstick.billing import admin as billing_admin
    from yardstick.billing.terms import credits

    slug, units = _do(data_dir, database, lambda s: billing_admin.settle_purchase(s, purchase_id, note))
    console.print(f"purchase {purchase_id} settled: {credits(units)} credits granted to {slug}")


@credits_app.command("show")
def credits_show(org: str, data_dir: Path | None = DataDir, database: str | None = DatabaseUrl) -> None:
    """An org's balance, its latest ledger entries and its open purchases."""
    from yardstick.billing import admin as billing_admin
    from yardstick.billing.terms import credits

    summary = _do(data_dir, database, lambda s: billing_admin.credit_summary(s, org))
    posted, reserved = summary["posted_units"], summary["reserved_units"]
    console.print(
        f"{org}: posted {credits(posted)}, reserved {credits(reserved)},"
        f" available {credits(posted - reserved)} credits"
    )
    for at, kind, units, note in summary["entries"]:
        console.print(f"  {at:%Y-%m-%d %H:%M:%S}  {kind:<8} {credits(units):>16}  {note}", soft_wrap=True)
    for purchase_id, package, at in summary["open_purchases"]:
        console.print(f"  open purchase {purchase_id} ({package}) since {at:%Y-%m-%d %H:%M}")


@credits_app.command("usage")
def credits_usage(
    org: str,
    month: str | None = typer.Option(
        None, help="A calendar month, YYYY-MM, in UTC (default: the current one)."
    ),
    since: str | None = typer.Option(
        None, help="The window's start, YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC unless a zone is given)."
    ),
    until: str | None = typer.Option(None, help="The window's end, exclusive (default: now); needs --since."),
    as_json: bool = typer.Option(False, "--json", help="Print the statement as JSON on stdout."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """An org's usage statement, to invoice a packaged org by: each run that ended in the window, the
    episodes it played, their robot time and their price in credits under the configured tariff (a run
    that held credits also shows what its settlement charged)."""
    import json

    from rich import box
    from rich.table import Table

    from yardstick.billing.terms import BillingTerms, credits
    from yardstick.billing.usage import UsageWindowError, usage, usage_window
    from yardstick.cli.money import describe_tariff
    from yardstick.core import admin
    from yardstick.store.models import utcnow

    try:
        since_at, until_at = usage_window(month, since, until, utcnow())
    except UsageWindowError as exc:
        raise typer.BadParameter(exc.message, param_hint=exc.option) from None
    with _database(data_dir, database, write=False) as (install, session):
        tariff = BillingTerms.locate(install.settings.data_dir).tariff()
        statement = usage(session, admin.org(session, org).id, since_at, until_at, tariff)
    if as_json:
        print(json.dumps(statement.as_json(), indent=2))
        return
    charged = statement.charged_units is not None
    table = Table(
        title=f"usage of {statement.org} ({statement.billing_mode}),"
        f" {since_at:%Y-%m-%d %H:%M:%S} to {until_at:%Y-%m-%d %H:%M:%S} UTC",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("run", no_wrap=True)
    table.add_column("eval", no_wrap=True)
    table.add_column("ended (UTC)", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("episodes", justify="right", no_wrap=True)
    table.add_column("robot time", justify="right", no_wrap=True)
    table.add_column("credits", justify="right", no_wrap=True)
    if charged:
        table.add_column("charged", justify="right", no_wrap=True)
    for line in statement.lines:
        status = line.status + (f": {line.failure}" if line.failure else "")
        cells = [
            line.submission,
            line.eval,
            f"{line.ended_at:%m-%d %H:%M}",
            status + (" (platform fault, not billed)" if line.platform_fault else ""),
            str(line.episodes),
            f"{line.robot_seconds:,.1f} s",
            credits(line.units),
        ]
        if charged:
            cells.append("-" if line.charged_units is None else credits(line.charged_units))
        table.add_row(*cells)
    print_table(table)
    total = (
        f"total: {len(statement.lines)} run{'' if len(statement.lines) == 1 else 's'},"
        f" {statement.episodes} episodes, {statement.robot_seconds:,.1f} s of robot time,"
        f" {credits(statement.units)} credits ({statement.units} units)"
    )
    if statement.charged_units is not None:
        total += f"; charged {credits(statement.charged_units)} credits"
    console.print(total, soft_wrap=True)
    console.print(
        f"tariff {statement.tariff.version[:12]} (credits): {describe_tariff(statement.tariff)};"
        " each episode capped at its task's time limit",
        style="dim",
        soft_wrap=True,
    )


@admin_app.command("audit")
def audit_log(
    limit: int = typer.Option(50, min=1, max=200, help="How many events, newest first."),
    before: int | None = typer.Option(None, min=1, help="Only events older than this id (to page back)."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """The install's audit log: every change made through the doors, newest first, every org's."""
    from rich.table import Table

    from yardstick.core.audit import Audit
    from yardstick.core.install import open_install

    install = open_install(_settings(data_dir, database))
    try:
        events, older = Audit(install.db).page(None, limit=limit, before=before)
    finally:
        install.close()
    table = Table("id", "when (UTC)", "door", "action", "target", "who", "status")
    for event in events:
        who = event["actor_email"] + (f" with {event['actor_key']}" if event["actor_key"] else "")
        when = event["created_at"][:19].replace("T", " ")
        table.add_row(
            str(event["id"]), when, event["door"], event["action"], event["target"] or "—", who,
            str(event["detail"]["status"]),
        )  # fmt: skip
    print_table(table)
    if older is not None:
        console.print(f"older: yardstick admin audit --before {older}")


rig_admin_app = typer.Typer(
    help="Rigs: an org's robots, each with a rig process and its key.", no_args_is_help=True
)
admin_app.add_typer(rig_admin_app, name="rig")


@rig_admin_app.command("add")
def rig_add(
    org: str = typer.Option(..., "--org", help="The organisation whose rig plans it plays."),
    name: str = typer.Option(..., "--name", help="The rig's name within its org, e.g. lab-franka-1."),
    shape: str = typer.Option(..., "--shape", help="franka (a single-arm Franka) or yam (a bimanual YAM)."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Add a rig (or give an existing one a new key): its key is shown this once; only its hash is kept."""
    from yardstick.core import rigs
    from yardstick.core.refusals import Refusal

    try:
        minted = _do(data_dir, database, lambda s: rigs.register(s, org, name, shape))
    except Refusal as refused:
        print_error(str(refused))
        raise typer.Exit(Exit.USAGE) from None
    console.print(
        f"rig {minted.name} ({minted.shape}) of {org}: its key (shown once; store it at the robot):"
    )
    print(minted.plaintext)


@rig_admin_app.command("revoke")
def rig_revoke(
    org: str = typer.Option(..., "--org"),
    name: str = typer.Option(..., "--name"),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    """Stop a rig's key working: its process is refused from its next call."""
    from yardstick.core import rigs

    if not _do(data_dir, database, lambda s: rigs.revoke(s, org, name)):
        print_error(f"no live rig {name!r} of {org!r}")
        raise typer.Exit(Exit.CALLER)
    console.print(f"rig {name} of {org}: key revoked")
