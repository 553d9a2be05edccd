"""An eval asked for through the Sequences door, resolved and filed: the use case behind `POST /v1/eval`.
What an eval may name (`offered_benchmark`, `offered_policy`: the org's registered code, else the catalogue),
the earlier eval a rerun lays itself over, the quote and the spending cap, and the filing itself. The
routes (`routes.py`) only read the request and show the answer."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

from yardstick.billing.terms import credits_value
from yardstick.catalog import resolve as resolve_class
from yardstick.core.accounts import Caller
from yardstick.core.adapters import Chosen
from yardstick.core.catalog import CatalogEval
from yardstick.core.idempotency import request_digest
from yardstick.core.ledger import Quote
from yardstick.core.platform import Platform
from yardstick.core.refusals import Feature, Refusal, RefusalKind, bad_request, not_found
from yardstick.core.runs import BenchmarkTarget, Filing, hosted_ref, org_for
from yardstick.sdk.decorators import benchmark_spec
from yardstick.sdk.specs import RECORDED_REPLAYS
from yardstick.sequences import eval_report, evals
from yardstick.sequences.models import Estimate, EvalDryRunResponse, EvalRequest, EvalResponse, InferParam
from yardstick.store.models import Hosted, HostedVersion, Run, ServedPolicy
from yardstick.store.states import Contract, HostedKind, TargetKind

__all__ = ["SHORT_ID_HEX", "eval_run", "file_eval", "offered_benchmark", "offered_policy"]

_RERUN_FIELDS = {"rerun_of", "rerun_unsuccessful_of", "dry_run"}

# The fewest hex digits of an eval id that may name it, as the start of the id: what `seq eval ls` shows.
SHORT_ID_HEX = 5


# An eval's fields this install cannot honour, each with why: refused by name rather than run without them.
UNOFFERED_FIELDS: dict[str, str] = {
    "policy_gpu": "this install plays on CPU workers: there is no GPU to place the policy on",
}
# Machine counts: one (the CLI's default) is what this install plays; more are refused, not ignored.
MACHINES = ("policy_machines", "benchmark_machines")
MORE_MACHINES = "this install plays an eval on its own workers, as many as are free: leave it at 1"


def _refuse_unoffered(body: EvalRequest) -> None:
    """Refuse, naming it, the first field the eval sets that this install cannot honour."""
    asked = [(field, why) for field, why in UNOFFERED_FIELDS.items() if getattr(body, field) is not None]
    asked += [(field, MORE_MACHINES) for field in MACHINES if (getattr(body, field) or 1) > 1]
    if asked:
        field, why = asked[0]
        raise Refusal(RefusalKind.NOT_OFFERED, f"{field}: {why}", field=field, feature=Feature(field, why))


def _refuse_unrecorded_replay(benchmark: evals.OfferedBenchmark, asked: EvalRequest) -> None:
    """Refuse, naming it, an eval asking for the 3D replay (the contract's default) of a benchmark whose
    replay engine this install does not read, rather than run it without one."""
    engine = benchmark.replay_engine
    if engine is None or engine in RECORDED_REPLAYS or asked.replay == "none":
        return
    why = (
        f"{benchmark.name} declares seq.Replay(engine={engine!r}): Yardstick reads MuJoCo and hands-over "
        "(engine='own') replays only, so it cannot record this eval's 3D replay; --replay none runs it "
        "without one"
    )
    raise Refusal(RefusalKind.NOT_OFFERED, f"replay: {why}", field="replay", feature=Feature("replay", why))


def file_eval(plat: Platform, who: Caller, body: EvalRequest) -> EvalResponse | EvalDryRunResponse:
    """`POST /v1/eval`: the eval asked for (laid over the one it reruns), resolved against what the caller's
    org may name, cut to its spending cap, priced, and filed on the platform's queue; or, with `dry_run`,
    only said what would run and cost."""
    _refuse_unoffered(body)
    asked, only = _with_rerun(plat, who, body)
    if asked.model is None or asked.benchmark is None:
        missing = [
            name for name, named in (("model", asked.model), ("benchmark", asked.benchmark)) if not named
        ]
        raise bad_request(f"{', '.join(missing)}: an eval names a model and a benchmark (or reruns one)")
    org = org_for(who, None)
    benchmark = offered_benchmark(plat, who, asked.benchmark)
    _refuse_unrecorded_replay(benchmark, asked)
    policy = offered_policy(plat, who, asked.model)
    chosen = _adapter(plat, org.id, asked.adapter, benchmark, policy) if asked.adapter else None
    resolved = evals.resolve(
        asked,
        benchmark,
        policy,
        adapter=None if chosen is None else _offered_adapter(chosen),
        only=only,
    )
    if asked.replay == "none":  # "3d", the contract's default, records one where the benchmark declares it
        resolved = resolved.unreplayed()
    mode = plat.runs.billing_mode(org)
    quote, cost = _quoted(plat, mode, resolved)
    asked_episodes = len(resolved.plan.episodes)
    if body.spend_cap_usd is not None and cost > body.spend_cap_usd:
        resolved = _within_cap(plat, mode, resolved, body.spend_cap_usd)
        quote, cost = _quoted(plat, mode, resolved)
    estimate = Estimate(
        wall_clock_s=_wall_clock(resolved),
        cost_usd=cost,
        default_timing=True,
        held_usd=cost if quote is not None else None,
    )
    layout = resolved.layout()
    if asked.dry_run or body.dry_run:
        notes = [f"{layout['selection']['episodes']} episodes on the platform's workers"]
        return EvalDryRunResponse(estimate=estimate, layout=layout, notes=notes)
    sent = body.model_dump(mode="json", exclude_none=True)
    filing = Filing(
        plan=resolved.plan,
        contract=Contract.SEQUENCES,
        digest=request_digest(sent),
        request=asked.model_dump(mode="json", exclude_none=True),
        answer={
            "layout": layout,
            "model": resolved.policy.name,
            "model_version": resolved.policy.version,
            "benchmark": resolved.benchmark.name,
            "benchmark_version": resolved.benchmark.version,
            "arms": [{"arm": a.number, "endpoint": a.endpoint, "params": a.shown()} for a in resolved.arms],
            "arm_params": resolved.arm_params(),
            # Apart, as the contract names them: the CLI labels a rerun of all and a rerun of the unsuccessful
            # differently, and the latter is not a rerun of the errors alone.
            "rerun_of": body.rerun_of,
            "rerun_unsuccessful_of": body.rerun_unsuccessful_of,
            "adapter": None if chosen is None else {**chosen.manifest(), "pair": chosen.pair},
            **(
                {"spend_cap_cut": {"asked": asked_episodes, "kept": len(resolved.plan.episodes)}}
                if len(resolved.plan.episodes) < asked_episodes
                else {}
            ),
        },
        quote=quote,
        # What the run's page and lists call it: the eval names no catalogue eval of its own.
        alias=(
            f"{resolved.policy.name} v{resolved.policy.version} on"
            f" {resolved.benchmark.name} v{resolved.benchmark.version}"
        ),
    )
    run, _ = plat.runs.file(who, org, filing)
    if chosen is not None:
        plat.adapters.ran(
            org.id,
            chosen.name,
            {
                "eval_id": eval_report.eval_id(run.id),
                "version": chosen.version.number,
                "benchmark": resolved.benchmark.name,
                "model": resolved.policy.name,
            },
        )
    return EvalResponse(eval_id=eval_report.eval_id(run.id), estimate=estimate, arms=len(resolved.arms))


def _adapter(
    plat: Platform, org_id: int, ref: str, benchmark: evals.OfferedBenchmark, policy: evals.OfferedPolicy
) -> Chosen:
    """The adapter version the eval names, once it declares this benchmark → policy pair. It runs in a box
    between the benchmark and a deployment's server: a policy the platform serves itself is not one."""
    if policy.kind != TargetKind.HOSTED:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"adapter: {policy.name} is a policy this install serves itself, which reads its benchmarks as"
            " they are: an adapter runs in front of a deployed policy (seq deploy)",
            field="adapter",
        )
    return plat.adapters.choose(
        org_id, ref, (benchmark.name, benchmark.templates), (policy.name, policy.templates)
    )


def _offered_adapter(chosen: Chosen) -> evals.OfferedAdapter:
    return evals.OfferedAdapter(
        name=chosen.name,
        version=chosen.version.number,
        version_id=chosen.version.id,
        params=_params(chosen.version.params or {}),
    )


def made_from(declared: Mapping[str, Any]) -> frozenset[str]:
    """The templates a version's code was made from: each `template_files` step of its image (the line
    `seq init` writes into a template's entry file)."""
    steps = (declared.get("image") or {}).get("steps") or []
    return frozenset(
        str(step["template_files"]["template"])
        for step in steps
        if isinstance(step, dict)
        and isinstance(step.get("template_files"), dict)
        and step["template_files"].get("template")
    )


def eval_run(platform: Platform, caller: Caller, eval_id: str) -> Run:
    """The eval `eval_id` names: a whole id, or the start of one (`seq eval ls` shows 8 characters), at
    least `SHORT_ID_HEX` hex digits and naming one eval only."""
    run_id = eval_report.run_id_of(eval_id)
    if run_id is None:
        raise not_found(f"eval_id: {eval_id!r} is no eval id (ev-<hex>)")
    try:
        return platform.runs.get(caller, run_id, Contract.SEQUENCES)
    except Refusal:
        pass
    hexits = eval_id.partition("-")[2]
    found = platform.runs.by_prefix(caller, Contract.SEQUENCES, hexits) if len(hexits) >= SHORT_ID_HEX else []
    if len(found) > 1:
        named = ", ".join(eval_report.eval_id(run.id) for run in found)
        raise bad_request(f"eval_id: {eval_id!r} starts more than one eval ({named}): give more of it")
    if not found:
        raise not_found(f"eval_id: no eval {eval_id!r} that you can see")
    return found[0]


def _with_rerun(
    platform: Platform, caller: Caller, body: EvalRequest
) -> tuple[EvalRequest, list[tuple[str, int]] | None]:
    """The request an eval runs: a rerun takes the earlier eval's, with what this one sets laid over it;
    `rerun_unsuccessful_of` replays only the earlier episodes that did not succeed."""
    earlier_id = body.rerun_of or body.rerun_unsuccessful_of
    if earlier_id is None:
        return body, None
    if body.rerun_of and body.rerun_unsuccessful_of:
        raise bad_request("rerun_of, rerun_unsuccessful_of: name one eval to rerun, not both")
    field_name = "rerun_of" if body.rerun_of else "rerun_unsuccessful_of"
    run = eval_run(platform, caller, earlier_id)
    laid = {
        **run.plan,
        **{k: v for k, v in body.model_dump(exclude_unset=True).items() if k not in _RERUN_FIELDS},
    }
    asked = EvalRequest.model_validate(laid)
    if body.rerun_of:
        return asked, None
    missed = [
        (e.benchmark_task, e.seed) for e in platform.runs.episodes(run.id) if not eval_report.succeeded(e)
    ]
    if not missed:
        raise bad_request(f"{field_name}: every episode of {earlier_id} succeeded: nothing to rerun")
    return asked, missed


def _wall_clock(resolved: evals.Resolved) -> float:
    """The robot time the eval may take at most: an upper bound of its wall clock on one worker that plays
    faster than real time."""
    return sum(e.cap_s for e in resolved.plan.episodes)


def offered_benchmark(platform: Platform, caller: Caller, name: str) -> evals.OfferedBenchmark:
    """The benchmark an eval names: the org's own (its newest ready version), else one of the catalogue's
    evals the caller may name."""
    org = org_for(caller, None)
    hosted = platform.hosting.ready(org.id, HostedKind.BENCHMARK, name)
    if hosted is not None:
        return _from_hosted(*hosted)
    catalog = platform.catalog(caller)
    found = catalog.evals.get(name)
    if found is None:
        own = _runnable(platform, org.id, HostedKind.BENCHMARK, name, "benchmark")
        raise evals.unknown("benchmark", name, sorted({*own, *catalog.evals}))
    return _from_catalog(found)


def _runnable(platform: Platform, org_id: int, kind: HostedKind, name: str, field: str) -> list[str]:
    """The org's names of `kind` an eval can run (a version passed its build), for a refusal to list; a
    refusal of its own when `name` is one of the org's that none of whose versions passed."""
    if any(hosted.name == name for hosted, _ in platform.hosting.listed(org_id, kind)):
        said = "benchmark logs" if kind == HostedKind.BENCHMARK else "policy logs"
        raise Refusal(
            RefusalKind.CONFLICT,
            f"{field}: {kind} {name!r} has no version that passed its build yet (seq {said} {name} --build "
            "says why; seq deploy it again once fixed)",
        )
    return sorted(platform.hosting.runnable(org_id, kind))


def declared_replay(version: HostedVersion) -> dict[str, Any]:
    """A benchmark version's 3D replay as its code declares it, else as its registration did (a version read
    before SAPIEN and Isaac were kept in the declaration); {} when it declares none."""
    declaration = (version.checked or {}).get("declaration") or {}
    return dict(declaration.get("replay") or (version.declared or {}).get("replay") or {})


def replay_label(offered: evals.OfferedBenchmark) -> str | None:
    """The contract's `replay` of a benchmark's listing: "3d" when its evals record a 3D replay here (one
    Yardstick reads, or a catalogue benchmark's that declares one), else None."""
    if not (offered.target.recording or {}).get("replay"):
        return None
    if offered.catalog is not None and not _catalogue_declares_replay(offered.catalog.benchmark):
        return None
    return "3d"


@functools.cache
def _catalogue_declares_replay(benchmark: str) -> bool:
    try:
        return benchmark_spec(resolve_class("benchmark", benchmark)).replay is not None
    except Exception:
        return False  # a benchmark that cannot be read here records nothing either


def version_offered(hosted: Hosted, version: HostedVersion) -> evals.OfferedBenchmark | None:
    """One version of a registered benchmark as an eval of it reads it; None for a version whose build has
    not checked it (its declaration is what its registration said)."""
    if not (version.checked or {}).get("declaration"):
        return None
    return _from_hosted(hosted, version)


def _from_hosted(hosted: Hosted, version: HostedVersion) -> evals.OfferedBenchmark:
    declaration = (version.checked or {}).get("declaration") or {}
    replay = declared_replay(version)
    return evals.OfferedBenchmark(
        name=hosted.name,
        version=version.number,
        tasks=dict(declaration["tasks"]),
        seeds=tuple(declaration["seeds"]),
        max_seconds={task: float(limit) for task, limit in declaration["max_seconds"].items()},
        params=_params(declaration.get("params") or {}),
        target=BenchmarkTarget(hosted_ref(version.id), {}, _recording(replay.get("engine"))),
        templates=made_from(version.declared or {}),
        replay_engine=replay.get("engine"),
    )


def _recording(replay_engine: str | None) -> dict[str, Any]:
    """What an eval of a registered benchmark records of each episode: its video and trajectory, and its 3D
    replay when the benchmark declares one Yardstick records (`seq.Replay`: MuJoCo, or frames it hands)."""
    return {"video": True, "trajectory": True, "replay": replay_engine in RECORDED_REPLAYS}


def _params(declared: Mapping[str, Any]) -> dict[str, InferParam]:
    return {name: InferParam.model_validate(param) for name, param in declared.items()}


def _from_catalog(evaluation: CatalogEval) -> evals.OfferedBenchmark:
    seeds = tuple(dict.fromkeys(seed for task in evaluation.tasks for seed in task.seeds))
    return evals.OfferedBenchmark(
        name=evaluation.slug,
        version=1,
        tasks={t.benchmark_task: t.description for t in evaluation.tasks},
        seeds=seeds,
        max_seconds={t.benchmark_task: float(t.default_cap_sec) for t in evaluation.tasks},
        params={},
        target=BenchmarkTarget.of(evaluation),
        catalog=evaluation,
        task_ids={t.benchmark_task: t.task_id for t in evaluation.tasks},
    )


def offered_policy(platform: Platform, caller: Caller, name: str) -> evals.OfferedPolicy:
    """The policy an eval names: a deployment of the org's (its newest ready version, served in a box), else
    one the platform serves, its parameters those of its constructor that the platform leaves open (with a
    default of a plain type)."""
    org = org_for(caller, None)
    deployed = platform.hosting.ready(org.id, HostedKind.POLICY, name)
    if deployed is not None:
        hosted, version = deployed
        if hosted.stopped:
            raise Refusal(
                RefusalKind.CONFLICT, f"model: deployment {name!r} is stopped (seq policy start {name})"
            )
        declaration = (version.checked or {}).get("declaration") or {}
        settings = {k[len("params.") :]: v for k, v in hosted.settings.items() if k.startswith("params.")}
        return evals.OfferedPolicy(
            name=name,
            version=version.number,
            kind=TargetKind.HOSTED,
            spec=str(version.id),
            params=_params(declaration.get("params") or {}),
            defaults=settings,
            templates=made_from(version.declared or {}),
        )
    served = platform.catalog(caller).served_policies
    if name not in served:
        own = _runnable(platform, org.id, HostedKind.POLICY, name, "model")
        raise evals.unknown("model", name, sorted({*own, *served}))
    with platform.db.reading() as session:
        row = session.get(ServedPolicy, name)
    params = _open_params(row.reference, row.params) if row is not None else {}
    return evals.OfferedPolicy(name=name, version=1, kind=TargetKind.SERVED, spec=name, params=params)


def _open_params(reference: str, fixed: Mapping[str, Any]) -> dict[str, InferParam]:
    """A served policy's constructor keywords with plain defaults, less those its spec fixes."""
    try:
        cls = resolve_class("policy", reference)
    except ValueError:
        return {}
    kinds = {bool: "bool", int: "int", float: "float", str: "str"}
    found = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        kind = kinds.get(type(parameter.default))
        if kind is not None and name not in fixed and not name.startswith("_"):
            found[name] = InferParam(type=kind, default=parameter.default)  # type: ignore[arg-type]
    return found


def _quoted(plat: Platform, mode: str, resolved: evals.Resolved) -> tuple[Quote | None, float]:
    """The ledger's quote for the eval as it stands (None: this install charges nothing) and its price in
    dollars (credits are the install's dollars)."""
    quote = plat.ledger.quote(mode, resolved.plan.priced())
    return quote, credits_value(quote.total_units) if quote is not None else 0.0


def _within_cap(plat: Platform, mode: str, resolved: evals.Resolved, cap_usd: float) -> evals.Resolved:
    """The eval cut to the most episodes whose held cost (each at its task's cap) stays within `cap_usd`:
    an eval never spends past its cap, and stops there (`stop_reason: spend_cap`). Refused when not even one
    episode fits."""

    def cost(keep: int) -> float:
        return _quoted(plat, mode, resolved.first(keep))[1]

    low, high = 0, len(resolved.plan.episodes)  # cost(low) <= cap < cost(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if cost(middle) <= cap_usd else (low, middle)
    if low == 0:
        raise bad_request(
            f"spend_cap_usd: ${cap_usd:,.2f} covers no episode of this eval: one may cost up to"
            f" ${cost(1):,.2f}"
        )
    return resolved.first(low)
