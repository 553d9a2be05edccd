"""How a run ends: scored and finished when its last episode lands, or failed with the kind of failure that
ended it, its `result.json` written either way. Writes are conditional on the run still being active, so two
workers racing to end one run end it once; who pays is decided here, from the failure's kind, and settled
in the transaction that ends the run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select, update

from yardstick.core import admission
from yardstick.core.artifacts import ArtifactStore
from yardstick.core.ledger import Ledger
from yardstick.engine.failures import FailureKind, Party
from yardstick.scoring import summarize
from yardstick.scoring.sequential import anytime_summary
from yardstick.store.db import Database
from yardstick.store.models import Run, RunEpisode, Task, utcnow
from yardstick.store.queue import record_artifacts, stop_episodes
from yardstick.store.states import ACTIVE_RUNS, PLAYED_EPISODES, RunStatus

__all__ = ["ATTEMPT", "LOGS", "Lifecycle", "charged", "episode_key", "summarize_run"]

ATTEMPT = "attempts/1/"
# A run's log files: what its boxes printed, a file a batch (JSON lines: ts, side, machine_name, arm, line).
LOGS = "logs/"
# What a run's policy printed (its container's or its box's stdout and stderr), one text: the contract's
# `policy_log`, its last POLICY_LOG_BYTES.
POLICY_LOG = "policy_log.txt"
POLICY_LOG_BYTES = 1 << 20


def charged(kind: FailureKind) -> bool:
    """Whether a run that failed this way is charged to its caller (its quota, and the credits of what it
    played) rather than given back. The policy's failures are the caller's; a benchmark's are the
    platform's, since the catalogue's benchmarks are the platform's own."""
    return kind.party is Party.POLICY


def _write(
    store: ArtifactStore, run_id: int, key: str, data: Any, content_type: str = "application/json"
) -> tuple[str, int, str]:
    """Put one object in the store (JSON unless it is bytes); what `record_artifacts` records of it."""
    raw = data if isinstance(data, bytes) else json.dumps(data, indent=2, default=str).encode()
    return key, store.put(run_id, key, raw, content_type), content_type


def _decisions(stopping: dict[str, Any]) -> dict[str, Any]:
    """What a stopped run's scores say of its rule: the rule, whether it was met, each gate's verdict."""
    state = stopping.get("state") or {}
    return {
        "until": stopping["until"],
        "alpha": stopping["alpha"],
        "decided": bool(stopping.get("decided")),
        "episodes": {task: trace["episodes"] for task, trace in (state.get("tasks") or {}).items()},
        "gates": state.get("gates") or [],
    }


def episode_key(index: int) -> str:
    return f"{ATTEMPT}episodes/{index:06d}/record.json"


class Lifecycle:
    """Ends runs: `finish` one whose episodes all landed, `fail` one that cannot go on."""

    def __init__(self, db: Database, store: ArtifactStore, ledger: Ledger) -> None:
        self.db = db
        self.store = store
        self.ledger = ledger

    def finish(self, run_id: int, judged: Mapping[str, Any] | None = None) -> bool:
        """Score a run whose episodes all landed, write `result.json`, and mark it finished (once). `judged`
        are scores a front door worked out by its contract's own rule (a rig plan's, from the operator's
        labels): laid over the success rate's, which stays beside them."""
        with self.db.reading() as session:
            run = session.get(Run, run_id)
            if run is None or run.status not in ACTIVE_RUNS:
                return False
            episodes = list(
                session.execute(
                    select(RunEpisode).where(RunEpisode.submission_id == run_id).order_by(RunEpisode.index)
                ).scalars()
            )
            described = (
                {
                    t.task_id: t.description
                    for t in session.execute(select(Task).where(Task.eval_id == run.eval_id)).scalars()
                }
                if run.eval_id
                else {}
            )
        overall, per_endpoint = summarize_run(episodes, described)
        stopping = run.stopping
        if stopping is not None and stopping.get("state"):
            # Stopped by a rule: its anytime-valid intervals, not fixed-n ones read when the data chose.
            anytime_summary(overall, stopping["state"])
            for part in per_endpoint.values():
                anytime_summary(part, stopping["state"])
        success = overall["overall"].get("success", {})
        scores = {
            "primary": success.get("value"),
            "low": success.get("low"),
            "high": success.get("high"),
            "per_task": {
                t: s["metrics"].get("success", {}).get("value") for t, s in overall["tasks"].items()
            },
            **({"stopping": _decisions(stopping)} if stopping is not None else {}),
            **(judged or {}),
        }
        if len(per_endpoint) > 1 and "endpoints" not in scores:
            # Each policy of a run of several is ranked on its own (`core.boards`), never by the pooled score;
            # a run scored by its own rule (`judged`) states each endpoint's score itself.
            scores["endpoints"] = {
                name: {key: part["overall"].get("success", {}).get(key) for key in ("value", "low", "high")}
                for name, part in per_endpoint.items()
            }
        result = {
            "submission_id": f"{run_id:x}",
            "status": RunStatus.FINISHED,
            "scores": scores,
            "attempt_location": ATTEMPT,
            "episodes": len(episodes),
            "summary": overall,
            "endpoints": per_endpoint,
            **({"stopping": stopping} if stopping is not None else {}),
        }
        try:
            written = _write(self.store, run_id, "result.json", result)
        except OSError as exc:
            return self.fail(run_id, FailureKind.STORAGE_FAILED, f"result.json could not be stored: {exc}")
        with self.db.writing() as session:
            record_artifacts(session, run_id, [written, *self._policy_log(run_id)])
        with self.db.writing() as session:
            ended = session.execute(
                update(Run)
                .where(Run.id == run_id, Run.status.in_(ACTIVE_RUNS))
                .values(status=RunStatus.FINISHED, scores=scores, ended_at=utcnow())
            )
            if not ended.rowcount:  # type: ignore[attr-defined]
                return False
            # In the transaction that ended it, so only the one finish that won settles its credits.
            self.ledger.settle(session, run_id, charged=True)
            return True

    def fail(
        self, run_id: int, kind: FailureKind, reason: str, diagnostics: dict[str, Any] | None = None
    ) -> bool:
        """End a run that failed. A failure the caller is not `charged` for gives the quota back and
        releases its credits; one it is charged for costs the quota and the credits of the episodes it
        played. Its `diagnostics.json` and `result.json` are recorded in the transaction that ends it, so no
        reader sees it errored without them."""
        pays = charged(kind)
        with self.db.writing() as session:
            # Locked (PostgreSQL; the level an UPDATE takes), so two workers failing one run end it once.
            run = session.get(Run, run_id, with_for_update={"key_share": True}, populate_existing=True)
            if run is None or run.status not in ACTIVE_RUNS:
                return False
            run.status, run.failure, run.reason = RunStatus.ERRORED, kind, reason[:2000]
            run.ended_at = utcnow()
            if not pays:
                admission.refund(session, run)
            stop_episodes(session, run_id)
            self.ledger.settle(session, run_id, charged=pays)
            about = {"failure": kind, "charged": pays, "reason": reason}
            documents = {
                "diagnostics.json": {**about, **(diagnostics or {})},
                "result.json": {
                    "submission_id": f"{run_id:x}",
                    "status": RunStatus.ERRORED,
                    **about,
                    "attempt_location": ATTEMPT,
                },
            }
            written = self._policy_log(run_id)
            for key, document in documents.items():
                try:
                    written.append(_write(self.store, run_id, key, document))
                except OSError:
                    # The store is full or failing (perhaps why the run failed): the run still ends, its
                    # reason in its row; a document that could not be written is not listed.
                    continue
            record_artifacts(session, run_id, written)
        return True

    def _policy_log(self, run_id: int) -> list[tuple[str, int, str]]:
        """The lines the run's policy printed, kept by side in `logs/` as they came, as one text (none
        where it printed nothing, or the store cannot give them: the log is a help, never the run's fate)."""
        lines: list[str] = []
        try:
            for key, _ in sorted(self.store.keys(run_id, LOGS)):
                with self.store.open(run_id, key) as kept:
                    for raw in kept.read().decode("utf-8", "replace").splitlines():
                        row = json.loads(raw) if raw.strip() else {}
                        if row.get("side") == "policy":
                            lines.append(str(row.get("line", "")))
            if not lines:
                return []
            text = ("\n".join(lines) + "\n").encode()[-POLICY_LOG_BYTES:]
            return [_write(self.store, run_id, POLICY_LOG, text, "text/plain; charset=utf-8")]
        except (OSError, ValueError):
            return []


def summarize_run(
    episodes: list[RunEpisode], descriptions: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's summary over every finished episode, and one per endpoint (for a run of several)."""
    landed = [e for e in episodes if e.state in PLAYED_EPISODES]
    rows = [_row(e) for e in landed]
    tasks = {e.task_id: descriptions.get(e.task_id, "") for e in episodes}
    overall = summarize(rows, tasks).to_dict()
    per_endpoint = {
        name: summarize([r for r, e in zip(rows, landed, strict=True) if e.endpoint == name], tasks).to_dict()
        for name in dict.fromkeys(e.endpoint for e in episodes)
    }
    return overall, per_endpoint


def _row(episode: RunEpisode) -> dict[str, Any]:
    result = episode.result or {}
    return {
        "task": episode.task_id,
        "metrics": result.get("metrics", {}),
        "steps": result.get("steps", 0),
        "robot_seconds": result.get("robot_seconds", 0.0),
        "error": episode.error,
    }
