"""A run as the Positronic contract shows it: the `submissions.get` variant of its status, its list row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from platform_client.enums import SubmissionStatus
from platform_client.ids import SubmissionId, UserId
from platform_client.responses import (
    ArtifactRefs,
    BlockedSubmissionView,
    CancelledSubmissionView,
    EpisodeCounts,
    ErroredSubmissionView,
    FinishedSubmissionView,
    PendingSubmissionView,
    PlanOutcome,
    ReplayLink,
    ResolvedPlan,
    RunningSubmissionView,
    RunSummary,
    Scores,
    SubmissionListRow,
)
from pydantic import BaseModel

from yardstick.core.boards import page_url
from yardstick.core.ended import has_ended
from yardstick.core.lifecycle import POLICY_LOG
from yardstick.core.platform import Platform
from yardstick.positronic.errors import reason_code
from yardstick.store.models import Run
from yardstick.store.states import RunStatus

NO_WORKER = (
    "no worker is running: start one with `yardstick worker` (or a `yardstick server` without --no-worker)"
)


def counts(run: Run) -> EpisodeCounts:
    return EpisodeCounts(
        total=run.episodes_total,
        done=run.episodes_done,
        outstanding=max(run.episodes_total - run.episodes_done, 0),
    )


# Where a rig plan's episode folders land, under the run's prefix.
RIG_EPISODES = "attempts/1/episodes/"

# A run's own records, which `submissions.get` links to.
RECORDS = ("result.json", "diagnostics.json", POLICY_LOG)


@dataclass(frozen=True)
class Settled:
    """What `submissions.get` shows of a run that ended, beside its row: its plan as resolved, checked
    against the contract's model (most of what the view costs), and which of its records it wrote. Neither
    changes again (`core.ended`), so each process works them out once."""

    resolved: ResolvedPlan
    records: tuple[str, ...]


def _settled_key(run: Run) -> tuple[str, int]:
    return ("positronic.settled", run.id)


def status_view(platform: Platform, run: Run, base_url: str) -> BaseModel:
    """The `submissions.get` variant of the run's status. A pending run with no worker alive is blocked
    on one. May read the database."""
    if not has_ended(run.status):
        return _view(platform, run, base_url, None)

    def settle() -> Settled:
        return Settled(ResolvedPlan.model_validate(run.resolved), platform.links.written(run.id, RECORDS))

    return _view(platform, run, base_url, platform.ended.kept(_settled_key(run), settle))


def kept_view(platform: Platform, run: Run, base_url: str) -> BaseModel | None:
    """The view of an ended run this process has worked out before, without reading anything (so an async
    route may build it on the event loop); None: ask `status_view`."""
    settled: Settled | None = platform.ended.get(_settled_key(run))
    return _view(platform, run, base_url, settled) if settled is not None and has_ended(run.status) else None


def _view(platform: Platform, run: Run, base_url: str, settled: Settled | None) -> BaseModel:
    episodes = counts(run)
    resolved = settled.resolved if settled is not None else ResolvedPlan.model_validate(run.resolved)
    common: dict[str, Any] = {"id": SubmissionId(run.id), "episodes": episodes, "resolved": resolved}
    attempts = [
        RunSummary(run_tag="attempt-1", started_at=run.started_at, ended_at=run.ended_at, episodes=episodes)
    ]
    if run.status == RunStatus.PENDING:
        blocked = waits_on(platform, run)
        if blocked is not None:
            return BlockedSubmissionView(**common, reason=blocked)
        position = (
            platform.runs.queue_position(run.id)
            if run.rig_shape is None
            else platform.rigs.queue_position(run)
        )
        return PendingSubmissionView(
            **common,
            alias=run.alias,
            received_at=run.received_at,
            queued_at=run.received_at,
            queue_position=position,
        )
    if run.status == RunStatus.RUNNING:
        return RunningSubmissionView(
            **common,
            runs=attempts,
            running_since=run.started_at or run.received_at,
            stage="episodes",
            stage_detail=f"{run.episodes_done} of {run.episodes_total}",
        )
    if run.status == RunStatus.FINISHED:
        refs = _refs(platform, run, settled, base_url)
        # A run is marked finished only after its result.json landed (lifecycle.finish).
        assert refs is not None, f"finished submission {run.id:x} has no result.json"
        outcome = (run.scores or {}).get("outcome")
        return FinishedSubmissionView(
            **common,
            runs=attempts,
            scores=Scores(primary=(run.scores or {}).get("primary")),
            artifacts=refs if run.rig_shape is None else rig_refs(platform, run, refs),
            replay=ReplayLink(url=page_url(base_url, run.replay_token)) if run.replay_token else None,
            outcome=PlanOutcome.model_validate(outcome) if outcome is not None else None,
        )
    if run.status == RunStatus.ERRORED:
        return ErroredSubmissionView(
            **common,
            runs=attempts,
            reason=run.reason,
            artifacts=_refs(platform, run, settled, base_url),
            reason_code=reason_code(run.failure),
        )
    return CancelledSubmissionView(**common, cancelled_at=run.cancelled_at)


def waits_on(platform: Platform, run: Run) -> str | None:
    """What a pending run is blocked on, or None: a worker for a simulation, a rig of its shape online for a
    rig plan."""
    if run.rig_shape is None:
        return None if platform.runs.workers_alive() else NO_WORKER
    if platform.rigs.online(run.org_id, run.rig_shape):
        return None
    return (
        f"no {run.rig_shape} rig of your organisation is online: start one at the robot with "
        f"`yardstick rig run --shape {run.rig_shape}` and the rig's key"
    )


def rig_refs(platform: Platform, run: Run, refs: ArtifactRefs) -> ArtifactRefs:
    """A rig plan's `artifacts`: `result` names the prefix its episodes landed under where the org reads its
    store itself (a bucket); where the store is the server's own folder, whose path is nothing the caller
    may read or be told, the signed link to the run's result, as a simulation's."""
    location = platform.artifacts.location(run.id, RIG_EPISODES)
    return refs if location.startswith("file:") else ArtifactRefs(result=location)


def list_row(run: Run, *, blocked: bool) -> SubmissionListRow:
    """A run in `submissions.list`; `blocked` as `submissions.get` would say it (pending, no worker)."""
    return SubmissionListRow(
        id=SubmissionId(run.id),
        user_id=UserId(run.user_id),
        alias=run.alias,
        eval=run.plan.get("eval"),
        status=SubmissionStatus.blocked
        if blocked and run.status == RunStatus.PENDING
        else SubmissionStatus[run.status],
        reason_code=reason_code(run.failure),
        episodes=counts(run),
        received_at=run.received_at,
    )


def _refs(platform: Platform, run: Run, settled: Settled | None, base_url: str) -> ArtifactRefs | None:
    """Links to the run's own records; None where it wrote none (the contract leaves `artifacts` out)."""
    written = settled.records if settled is not None else platform.links.written(run.id, RECORDS)
    urls = platform.links.signed(run.id, written, base_url)
    if "result.json" not in urls:
        return None
    return ArtifactRefs(
        result=urls["result.json"], diagnostics=urls.get("diagnostics.json"), policy_log=urls.get(POLICY_LOG)
    )
