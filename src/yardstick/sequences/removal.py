"""Deleting an org's registered benchmarks and deployments, as `seq benchmark rm` and `seq policy rm` ask:
what a delete would touch (their `--dry-run`), and the delete itself. A delete frees the name at once and
keeps the versions for the evals that ran them; a build in flight is stopped."""

from __future__ import annotations

from typing import Any

from yardstick.core.accounts import Caller
from yardstick.core.platform import Platform
from yardstick.core.refusals import Listed, Refusal, RefusalKind
from yardstick.core.runs import hosted_ref, org_for
from yardstick.sequences import eval_report
from yardstick.sequences.models import build_status
from yardstick.store.states import BuildStatus, HostedKind

__all__ = ["deletion", "remove_benchmark", "remove_deployment"]


def remove_benchmark(plat: Platform, who: Caller, name: str, *, dry_run: bool, force: bool) -> dict[str, Any]:
    """Refused while an eval runs or waits on the benchmark, unless `force` (which cancels them first). With
    `dry_run`, only what the delete would touch, and nothing changes."""
    org = org_for(who, None).id
    _, versions = plat.hosting.versions(org, HostedKind.BENCHMARK, name)
    newest = versions[0]
    running = plat.runs.active_on(org, [hosted_ref(v.id) for v in versions])
    evals_running = [eval_report.eval_id(run.id) for run in running]
    building = newest.status == BuildStatus.BUILDING
    if dry_run:
        return {
            "benchmark": name,
            "version": newest.number,
            "status": build_status(newest),
            "build_in_flight": building,
            "evals_running": evals_running,
        }
    if running and not force:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"name: eval {', '.join(evals_running)} runs or waits on benchmark {name}: cancel it first, or"
            " delete the benchmark anyway with --force (which cancels it)",
            listed=[Listed("evals_running", tuple(evals_running))],
        )
    for run in running:
        plat.runs.cancel(who, run.id)
    if building:
        plat.hosting.cancel(org, HostedKind.BENCHMARK, name)
    plat.hosting.remove(org, HostedKind.BENCHMARK, name)
    return {"deleted": name, "evals_canceled": evals_running, "build_canceled": building}


def deletion(plat: Platform, who: Caller, name: str) -> dict[str, Any]:
    """What deleting a deployment would touch: its versions, a build in flight, the evals that ran it (their
    reports stay). No robot connects to a Yardstick deployment, no worker serves one between evals and it
    keeps no keys or stored copies of its own: those are none, not unknown."""
    org = org_for(who, None).id
    _, versions = plat.hosting.versions(org, HostedKind.POLICY, name)
    return {
        "deployment": name,
        "robots": 0,
        "workers": 0,
        "keys": [],
        "versions": [v.number for v in reversed(versions)],
        "build_in_flight": versions[0].status == BuildStatus.BUILDING,
        "storage": {},
        "evals": plat.runs.played_by(org, [str(v.id) for v in versions]),
    }


def remove_deployment(plat: Platform, who: Caller, name: str) -> dict[str, Any]:
    """An eval playing the deployment plays on; no robot is connected to disconnect (`--force` changes
    nothing here)."""
    org = org_for(who, None).id
    _, versions = plat.hosting.versions(org, HostedKind.POLICY, name)
    if versions[0].status == BuildStatus.BUILDING:
        plat.hosting.cancel(org, HostedKind.POLICY, name)
    plat.hosting.remove(org, HostedKind.POLICY, name)
    return {"deleted": name, "workers_stopped": 0}
