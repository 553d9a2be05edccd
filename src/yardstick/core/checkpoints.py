"""Checkpoint curves: one policy's success across its training checkpoints on a board's eval, and the runs
that regressed.

A checkpoint is named in the endpoint's name after an "@" (`pi0@20000`, `pi0@final`): the policy is the
name before it, qualified by who filed the run (alias#tag, as boards show people). Checkpoints are ordered by
number where every one of a policy's is a number, else by when their runs were filed. A run regressed when
it is worse than the best earlier checkpoint on the trials both played (same task, trial and seed), by
McNemar's exact test at 5% (`scoring.compare.exact_paired_p`): a drop the seeds explain away is not flagged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, select

from yardstick.core.accounts import Caller
from yardstick.core.boards import Boards, board_runs
from yardstick.core.lifecycle import summarize_run
from yardstick.scoring.compare import exact_paired_p
from yardstick.store.db import Database
from yardstick.store.models import Board, Eval, Run, RunEpisode, User
from yardstick.store.states import RunStatus

SEPARATOR = "@"
REGRESSION_P = 0.05

Trial = tuple[str, int, int]  # task, trial, seed


@dataclass(frozen=True)
class Regression:
    against: str  # the earlier checkpoint it is worse than
    a_only: int  # trials only the earlier one succeeded at
    b_only: int  # trials only this one did
    pairs: int
    p_value: float


@dataclass
class Point:
    checkpoint: str
    run_id: int
    endpoint: str
    filed: dt.datetime
    replay_token: str | None
    value: float | None
    low: float | None
    high: float | None
    episodes: int
    outcomes: dict[Trial, bool] = field(default_factory=dict, repr=False)
    regression: Regression | None = None

    def as_json(self) -> dict[str, Any]:
        regression = self.regression
        return {
            "checkpoint": self.checkpoint,
            "run": f"{self.run_id:x}",
            "endpoint": self.endpoint,
            "success": self.value,
            "low": self.low,
            "high": self.high,
            "episodes": self.episodes,
            "regression": None
            if regression is None
            else {
                "against": regression.against,
                "earlier_only": regression.a_only,
                "this_only": regression.b_only,
                "pairs": regression.pairs,
                "p_value": regression.p_value,
            },
        }


@dataclass(frozen=True)
class Curve:
    policy: str
    points: list[Point]

    def as_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "points": [p.as_json() for p in self.points]}


def split_checkpoint(endpoint: str) -> tuple[str, str | None]:
    """`pi0@20000` -> ("pi0", "20000"); a name without "@" has no checkpoint."""
    name, found, checkpoint = endpoint.rpartition(SEPARATOR)
    return (name, checkpoint) if found and name and checkpoint else (endpoint, None)


def flag_regressions(points: list[Point]) -> None:
    """Mark each point worse than the best earlier one on their common trials (exact paired test)."""
    for position, point in enumerate(points):
        earlier = [p for p in points[:position] if p.value is not None]
        if not earlier or point.value is None:
            continue
        best = max(earlier, key=lambda p: p.value or 0.0)
        common = sorted(set(best.outcomes) & set(point.outcomes))
        a_only = sum(1 for t in common if best.outcomes[t] and not point.outcomes[t])
        b_only = sum(1 for t in common if point.outcomes[t] and not best.outcomes[t])
        p_value = exact_paired_p(a_only, b_only)
        if a_only > b_only and p_value < REGRESSION_P:
            point.regression = Regression(best.checkpoint, a_only, b_only, len(common), p_value)


def _ordered(points: Sequence[Point]) -> list[Point]:
    numeric = all(_number(p.checkpoint) is not None for p in points)
    if numeric:
        return sorted(points, key=lambda p: (_number(p.checkpoint) or 0.0, p.filed))
    return sorted(points, key=lambda p: p.filed)


def _number(text: str) -> float | None:
    """A checkpoint's step: 20000, 20_000 or 20k; None for a label (`final`)."""
    cleaned = text.replace("_", "").lower()
    scale = 1000.0 if cleaned.endswith("k") else 1.0
    try:
        return float(cleaned.removesuffix("k")) * scale
    except ValueError:
        return None


class CheckpointCurves:
    def __init__(self, db: Database, boards: Boards) -> None:
        self.db = db
        self.boards = boards

    def read(self, caller: Caller | None, slug: str) -> tuple[Board, Eval, list[Curve]]:
        """Every policy with checkpoints on the runs the board reads for `caller` (`boards.board_runs`), each
        its curve."""
        board, ev, _ = self.boards.board(caller, slug)
        return board, ev, self._curves(board_runs(board, caller))

    def of_run(self, run: Run) -> list[Point]:
        """The points of a run's endpoints on their policies' curves (on the run's eval, in its audience),
        each with its regression if it has one: what `eval status` shows of a run."""
        if run.eval_id is None:
            return []
        # A policy is its filer's: only their finished runs on the eval can share a curve with this one.
        mine = (
            select(Run, User.alias)
            .join(User, User.id == Run.user_id)
            .where(Run.eval_id == run.eval_id, Run.status == RunStatus.FINISHED, Run.user_id == run.user_id)
        )
        return [p for c in self._curves(mine) for p in c.points if p.run_id == run.id]

    def _curves(self, query: Select[Run, str | None]) -> list[Curve]:
        with self.db.reading() as session:
            runs = [
                (run, alias)
                for run, alias in session.execute(query).all()
                if any(split_checkpoint(name)[1] for name in run.endpoints or {})
            ]
            episodes: dict[int, list[RunEpisode]] = {run.id: [] for run, _ in runs}
            if episodes:
                for episode in session.execute(
                    select(RunEpisode).where(RunEpisode.submission_id.in_(episodes))
                ).scalars():
                    episodes[episode.submission_id].append(episode)
        by_policy: dict[str, list[Point]] = {}
        for run, alias in runs:
            _, per_endpoint = summarize_run(episodes[run.id], {})
            for endpoint in run.endpoints or {}:
                name, checkpoint = split_checkpoint(endpoint)
                if checkpoint is None:
                    continue
                overall = (per_endpoint.get(endpoint) or {}).get("overall", {}).get("success") or {}
                mine = [e for e in episodes[run.id] if e.endpoint == endpoint and e.result and not e.error]
                policy = self.boards.policy_name(name, alias, run.user_id)
                by_policy.setdefault(policy, []).append(
                    Point(
                        checkpoint=checkpoint,
                        run_id=run.id,
                        endpoint=endpoint,
                        filed=run.received_at,
                        replay_token=run.replay_token,
                        value=overall.get("value"),
                        low=overall.get("low"),
                        high=overall.get("high"),
                        episodes=len(mine),
                        outcomes={
                            (e.task_id, e.trial, e.seed): bool((e.result or {}).get("success")) for e in mine
                        },
                    )
                )
        curves = []
        for policy, points in sorted(by_policy.items()):
            ordered = _ordered(points)
            flag_regressions(ordered)
            curves.append(Curve(policy, ordered))
        return curves
