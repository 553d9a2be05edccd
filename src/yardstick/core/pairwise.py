"""A board's pairwise ranking: every policy that met another on the board's eval (two or more endpoints of one
finished run, on the same task and seed), ranked by a Bradley–Terry model (`scoring.pairwise`).

A policy is an endpoint's name as its filer wrote it, qualified by who filed it (alias#tag, as boards show
people), so two users' endpoints named alike stay apart and one user's runs of the same name add up. The
runs counted are those `boards.board_runs` reads (a public board's public runs and the caller's orgs' own,
a tenant board's org runs), blind samples included: a blind sample is what pairwise ranking is for.

The ranking is computed again only when the runs behind it change (a bootstrap of 200 fits is ~0.1 s for
thousands of games; a board polled by many would otherwise pay it on every read).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from yardstick.core.accounts import Caller
from yardstick.core.boards import Boards, board_runs
from yardstick.scoring.pairwise import Ranking, games_of, rank
from yardstick.store.db import Database
from yardstick.store.models import Board, Eval, Run, RunEpisode
from yardstick.store.states import EpisodeState

KEPT_RANKINGS = 64


@dataclass(frozen=True)
class PairwiseBoard:
    board: Board
    eval: Eval
    ranking: Ranking
    runs: int  # the runs its games came from

    def as_json(self) -> dict[str, Any]:
        ranking = self.ranking
        return {
            "board": self.board.slug,
            "eval": self.eval.slug,
            "method": ranking.method,
            "runs": self.runs,
            "games": ranking.games,
            "standings": [
                {
                    "rank": s.rank,
                    "policy": s.player,
                    "strength": s.strength,
                    "chance": s.chance,
                    "low": s.low,
                    "high": s.high,
                    "rank_low": s.rank_low,
                    "rank_high": s.rank_high,
                    "games": s.games,
                }
                for s in ranking.standings
            ],
            "head_to_head": [
                {"a": h.a, "b": h.b, "wins": h.wins, "ties": h.ties, "losses": h.losses}
                for h in ranking.head_to_head
            ],
            "next_pairs": [list(pair) for pair in ranking.next_pairs],
        }


class PairwiseBoards:
    def __init__(self, db: Database, boards: Boards) -> None:
        self.db = db
        self.boards = boards
        self._kept: dict[tuple[str, tuple[int, ...]], Ranking] = {}
        self._lock = threading.Lock()

    def read(self, caller: Caller | None, slug: str) -> PairwiseBoard:
        """The pairwise ranking of the board `slug`, if `caller` may read the board (else not found)."""
        board, ev, _ = self.boards.board(caller, slug)
        runs = self._runs(board, caller)
        # Keyed by the runs read: one board is read over different runs by callers of different orgs.
        key = (slug, tuple(sorted(run.id for run, _ in runs)))
        with self._lock:
            kept = self._kept.get(key)
        if kept is None:
            kept = rank(games_of(self._outcomes(runs)))
            with self._lock:
                if len(self._kept) >= KEPT_RANKINGS:
                    self._kept.clear()  # rankings of runs since superseded; the live ones come back at once
                self._kept[key] = kept
        return PairwiseBoard(board, ev, kept, len(runs))

    def _runs(self, board: Board, caller: Caller | None) -> list[tuple[Run, str | None]]:
        """The finished runs of more than one endpoint the board reads for `caller`, with their filer."""
        with self.db.reading() as session:
            rows = session.execute(board_runs(board, caller)).all()
        return [(run, alias) for run, alias in rows if len(run.endpoints or {}) >= 2]

    def _outcomes(self, runs: list[tuple[Run, str | None]]) -> Mapping[Hashable, Mapping[str, bool]]:
        """Each trial's success by policy: (run, task, trial) -> {"endpoint (alias#tag)": success}."""
        filer = {run.id: (alias, run.user_id) for run, alias in runs}
        if not filer:
            return {}
        with self.db.reading() as session:
            episodes = session.execute(
                select(
                    RunEpisode.submission_id,
                    RunEpisode.task_id,
                    RunEpisode.trial,
                    RunEpisode.endpoint,
                    RunEpisode.result,
                ).where(RunEpisode.submission_id.in_(filer), RunEpisode.state == EpisodeState.DONE)
            ).all()
        outcomes: dict[Hashable, dict[str, bool]] = {}
        for run_id, task, trial, endpoint, result in episodes:
            if not result or result.get("error"):
                continue  # an episode that did not play is no game
            player = self.boards.policy_name(endpoint, *filer[run_id])
            outcomes.setdefault((run_id, task, trial), {})[player] = bool(result.get("success"))
        return outcomes
