"""What a worker writes as a run goes: each episode's record, and at the end the run's scores and
`result.json`, or the reason it failed. Writes are conditional on the run still being active, so two workers
racing to end one run end it once."""

from __future__ import annotations

import json
from typing import Any

from platform_client.enums import ReasonCode
from sqlalchemy import select, update

from yardstick.scoring import summarize
from yardstick.service import billing
from yardstick.service.artifacts import ArtifactStore
from yardstick.store.db import Database
from yardstick.store.models import Episode, QuotaEvent, Submission, Task, utcnow
from yardstick.store.queue import ACTIVE, record_artifacts, stop_episodes

ATTEMPT = "attempts/1/"


def put_artifact(
    db: Database,
    store: ArtifactStore,
    submission_id: int,
    key: str,
    data: Any,
    content_type: str = "application/json",
) -> None:
    written = _write(store, submission_id, key, data, content_type)
    with db.writing() as session:
        record_artifacts(session, submission_id, [written])


def _write(
    store: ArtifactStore, submission_id: int, key: str, data: Any, content_type: str = "application/json"
) -> tuple[str, int, str]:
    """Put one object in the store (JSON unless it is bytes); what `record_artifacts` records of it."""
    raw = data if isinstance(data, bytes) else json.dumps(data, indent=2, default=str).encode()
    return key, store.put(submission_id, key, raw, content_type), content_type


def episode_key(index: int) -> str:
    return f"{ATTEMPT}episodes/{index:06d}/record.json"


def finish(db: Database, store: ArtifactStore, submission_id: int) -> bool:
    """Score a run whose episodes all landed, write `result.json`, and mark it finished (once)."""
    with db.reading() as session:
        submission = session.get(Submission, submission_id)
        if submission is None or submission.status not in ACTIVE:
            return False
        episodes = list(
            session.execute(
                select(Episode).where(Episode.submission_id == submission_id).order_by(Episode.index)
            ).scalars()
        )
        described = (
            {
                t.task_id: t.description
                for t in session.execute(select(Task).where(Task.eval_id == submission.eval_id)).scalars()
            }
            if submission.eval_id
            else {}
        )
    overall, per_endpoint = summarize_run(episodes, described)
    success = overall["overall"].get("success", {})
    scores = {
        "primary": success.get("value"),
        "low": success.get("low"),
        "high": success.get("high"),
        "per_task": {t: s["metrics"].get("success", {}).get("value") for t, s in overall["tasks"].items()},
    }
    result = {
        "submission_id": f"{submission_id:x}",
        "status": "finished",
        "scores": scores,
        "attempt_location": ATTEMPT,
        "episodes": len(episodes),
        "summary": overall,
        "endpoints": per_endpoint,
    }
    put_artifact(db, store, submission_id, "result.json", result)
    with db.writing() as session:
        ended = session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.status.in_(ACTIVE))
            .values(status="finished", scores=scores, ended_at=utcnow())
        )
        if not ended.rowcount:  # type: ignore[attr-defined]
            return False
        # In the transaction that ended it, so only the one finish that won settles its credits.
        billing.settle(session, submission_id, platform_fault=False)
        return True


def error(
    db: Database,
    store: ArtifactStore,
    submission_id: int,
    reason_code: ReasonCode,
    reason: str,
    diagnostics: dict[str, Any] | None = None,
) -> bool:
    """End a run that failed. A platform fault gives the quota back and releases its credits; a caller
    fault is charged (the quota, and the credits of the episodes it played). Its `diagnostics.json` and
    `result.json` are recorded in the transaction that ends it, so no reader sees it errored without them."""
    with db.writing() as session:
        # Locked (PostgreSQL; the level an UPDATE takes), so two workers failing one run end it once.
        submission = session.get(
            Submission, submission_id, with_for_update={"key_share": True}, populate_existing=True
        )
        if submission is None or submission.status not in ACTIVE:
            return False
        submission.status, submission.reason_code, submission.reason = (
            "errored",
            reason_code.name,
            reason[:2000],
        )
        submission.ended_at = utcnow()
        if reason_code.is_platform_fault:
            session.add(
                QuotaEvent(
                    org_id=submission.org_id,
                    user_id=submission.user_id,
                    submission_id=submission_id,
                    kind="refund",
                )
            )
        stop_episodes(session, submission_id)
        billing.settle(session, submission_id, platform_fault=reason_code.is_platform_fault)
        written = [
            _write(
                store,
                submission_id,
                "diagnostics.json",
                {"reason_code": reason_code.name, "reason": reason, **(diagnostics or {})},
            ),
            _write(
                store,
                submission_id,
                "result.json",
                {
                    "submission_id": f"{submission_id:x}",
                    "status": "errored",
                    "reason_code": reason_code.name,
                    "reason": reason,
                    "attempt_location": ATTEMPT,
                },
            ),
        ]
        record_artifacts(session, submission_id, written)
    return True


def summarize_run(
    episodes: list[Episode], descriptions: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's summary over every finished episode, and one per endpoint (for a run of several)."""
    landed = [e for e in episodes if e.state in ("done", "failed")]
    rows = [_row(e) for e in landed]
    tasks = {e.task_id: descriptions.get(e.task_id, "") for e in episodes}
    overall = summarize(rows, tasks).to_dict()
    per_endpoint = {
        name: summarize([r for r, e in zip(rows, landed, strict=True) if e.endpoint == name], tasks).to_dict()
        for name in dict.fromkeys(e.endpoint for e in episodes)
    }
    return overall, per_endpoint


def _row(episode: Episode) -> dict[str, Any]:
    result = episode.result or {}
    return {
        "task": episode.task_id,
        "metrics": result.get("metrics", {}),
        "steps": result.get("steps", 0),
        "robot_seconds": result.get("robot_seconds", 0.0),
        "error": episode.error,
    }
