"""A Sequences deployment as its org's members see it on its page: the version that serves, the workers
serving its robots now, the robots seated on them, and every episode its robots played while it captured,
with the robot's label of each. Read for a signed-in member of the deployment's org only: to anyone else
there is no such deployment (its name is not confirmed either)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from yardstick.core.captures import CAPTURE_SETTING, CapturedEpisode
from yardstick.core.platform import Platform
from yardstick.store.models import ActWorker, Hosted, Membership, Org, RobotKey
from yardstick.store.states import HostedKind

__all__ = ["ConnectedRobot", "DeploymentView", "LabelledEpisode", "ServingWorker", "deployment_view"]

# The most episodes a page lists (newest first); the rest are read through `seq policy data export`.
SHOWN_EPISODES = 500


@dataclass(frozen=True)
class ServingWorker:
    id: int
    address: str | None  # where robots reach it; None while it starts
    since: dt.datetime
    beat_at: dt.datetime | None


@dataclass(frozen=True)
class ConnectedRobot:
    session: str  # the SDK session's first characters: enough to tell robots apart, too few to act as one
    key: str  # "robot key …abcd" or "an account's key"
    worker_id: int | None
    since: dt.datetime
    kept_until: dt.datetime


@dataclass(frozen=True)
class LabelledEpisode:
    captured: CapturedEpisode
    label: dict[str, Any] | None  # {"success": bool, "notes": str}, or None when the robot gave none

    @property
    def began(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.captured.began, dt.UTC)

    @property
    def seconds(self) -> float:
        return self.captured.last - self.captured.began


@dataclass(frozen=True)
class DeploymentView:
    org: str
    name: str
    version: int | None  # the version that serves; None when none passed its build
    stopped: bool
    capturing: bool
    workers: list[ServingWorker]
    robots: list[ConnectedRobot]
    episodes: list[LabelledEpisode]
    total_episodes: int

    @property
    def labelled(self) -> int:
        return sum(1 for e in self.episodes if e.label is not None)

    @property
    def successes(self) -> int:
        return sum(1 for e in self.episodes if e.label is not None and e.label.get("success"))


def deployment_view(platform: Platform, user_id: int, org_slug: str, name: str) -> DeploymentView | None:
    """The deployment `name` of org `org_slug` for member `user_id`; None when there is none they may see."""
    with platform.db.reading() as session:
        found = session.execute(
            select(Hosted)
            .join(Org, Org.id == Hosted.org_id)
            .join(Membership, Membership.org_id == Org.id)
            .where(
                Org.slug == org_slug,
                Membership.user_id == user_id,
                Hosted.kind == HostedKind.POLICY,
                Hosted.name == name,
                Hosted.removed_at.is_(None),
            )
        ).scalar_one_or_none()
        if found is None:
            return None
        hosted: Hosted = found
        workers = [
            ServingWorker(w.id, _address(w.url), w.created_at, w.beat_at)
            for w in session.execute(
                select(ActWorker)
                .where(ActWorker.hosted_id == hosted.id, ActWorker.ended_at.is_(None))
                .order_by(ActWorker.id)
            ).scalars()
        ]
        seats = platform.act_plane.seats(hosted.id)
        keys = {
            k.id: k.last_four
            for k in session.execute(
                select(RobotKey).where(RobotKey.id.in_([s.robot_key_id for s in seats if s.robot_key_id]))
            ).scalars()
        }
    ready = platform.hosting.ready(hosted.org_id, HostedKind.POLICY, name)
    robots = [
        ConnectedRobot(
            session=seat.session[:8],
            key=f"robot key …{keys[seat.robot_key_id]}" if seat.robot_key_id in keys else "an account's key",
            worker_id=seat.worker_id,
            since=seat.created_at,
            kept_until=seat.kept_until,
        )
        for seat in sorted(seats, key=lambda s: s.created_at)
    ]
    captured = platform.captures.summaries(hosted.id)
    labels = platform.captures.labels(hosted.id)
    episodes = [LabelledEpisode(e, _label(labels.get(e.episode_id))) for e in captured[:SHOWN_EPISODES]]
    return DeploymentView(
        org=org_slug,
        name=hosted.name,
        version=ready[1].number if ready is not None else None,
        stopped=hosted.stopped,
        capturing=hosted.settings.get(CAPTURE_SETTING) == "on",
        workers=workers,
        robots=robots,
        episodes=episodes,
        total_episodes=len(captured),
    )


def _address(url: str | None) -> str | None:
    return None if url is None else url.split("://", 1)[-1].rstrip("/")


def _label(found: dict[str, Any] | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {"success": bool(found.get("success")), "notes": str(found.get("notes") or "")}
