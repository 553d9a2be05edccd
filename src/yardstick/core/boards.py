"""Boards and the pages' reads: the ranking of an eval's finished runs by their primary score (a user's best
run once; baselines shown, not ranked), the run behind a page's token, and the latest public runs.

Who filed a run is shown as their alias and a tag: six hex characters derived from the install's secret,
the same on every board, that tell two users of one alias apart without naming either.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, and_, bindparam, or_, select
from sqlalchemy.orm import Session, load_only

from yardstick.core.accounts import Caller
from yardstick.core.refusals import not_found
from yardstick.store.db import Database
from yardstick.store.models import Baseline, Board, Eval, Run, RunEpisode, User
from yardstick.store.states import Audience, BoardVisibility, RunStatus


@dataclass(frozen=True)
class RunView:
    """What a run's page shows: the run, its eval, its episodes (in index order), the board it ranks on,
    and who filed it as a board shows them."""

    run: Run
    eval: Eval | None
    episodes: list[RunEpisode]
    board: Board | None
    tag: str
    display_name: str


@dataclass(frozen=True)
class BoardRow:
    rank: int | None
    display_name: str
    tag: str
    primary: float | None
    run_id: int
    submitted_at: dt.datetime
    baseline_publisher: str | None
    replay_token: str | None = None
    scores: dict[str, Any] = field(default_factory=dict)  # the run's, with the primary's interval


# What a board row reads of a run: a board of many runs reads none of their plans (documents of every
# episode) and other JSON columns, which would cost more to decode than the rest of the board.
_ROW_ONLY = load_only(
    Run.id, Run.user_id, Run.status, Run.scores, Run.received_at, Run.replay_token, raiseload=True
)


def primary_of(run: Run) -> float | None:
    value = (run.scores or {}).get("primary")
    return float(value) if isinstance(value, (int, float)) else None


def page_url(base_url: str, token: str) -> str:
    """A run's page (its replay); `data.json` beside it is the object the page renders from."""
    return f"{base_url.rstrip('/')}/v/{token}/"


# A board's reads, built once (a request builds none): the board and its eval by slug; its baselines; the
# finished runs it ranks (a public board's public runs, a tenant board's org runs).
_BOARD = select(Board, Eval).join(Eval, Eval.id == Board.eval_id).where(Board.slug == bindparam("slug"))
_BASELINES = (
    select(Baseline, Run)
    .options(_ROW_ONLY)
    .join(Run, Run.id == Baseline.submission_id)
    .where(Baseline.board_id == bindparam("board_id"))
)
_RANKED = (
    select(Run, User)
    .options(_ROW_ONLY)
    .join(User, User.id == Run.user_id)
    .where(Run.eval_id == bindparam("eval_id"), Run.status == RunStatus.FINISHED, Run.sampled.is_(False))
)
_RANKED_PUBLIC = _RANKED.where(Run.audience == Audience.PUBLIC)
_RANKED_ORG = _RANKED.where(Run.org_id == bindparam("org_id"), Run.audience == Audience.ORG)


# How old a board a process answers with may be. A board is what many clients and pages poll at once, the
# same for every caller who may read it, and it changes only when a run on its eval finishes (in a worker,
# another process) or an admin marks a baseline; so each process reads a board at most once in this long and
# answers everyone from that reading: a change shows on every board within it.
BOARD_FRESH_S = 1.0


@dataclass(frozen=True)
class _Reading:
    at: float  # time.monotonic()
    board: Board
    eval: Eval
    rows: list[BoardRow]

    @property
    def fresh(self) -> bool:
        return time.monotonic() - self.at <= BOARD_FRESH_S


class Boards:
    def __init__(self, db: Database, secret: bytes) -> None:
        self.db = db
        self._tag_secret = hashlib.sha256(b"board-tags" + secret).digest()
        self._readings: dict[str, _Reading] = {}  # by slug; only boards that exist, so few
        self._refreshing = threading.Lock()

    def boards(self, caller: Caller | None) -> list[tuple[Board, Eval]]:
        with self.db.reading() as session:
            rows = session.execute(
                select(Board, Eval).join(Eval, Eval.id == Board.eval_id).order_by(Board.slug)
            ).all()
        return [(board, ev) for board, ev in rows if _may_read(caller, board)]

    def board(self, caller: Caller | None, slug: str) -> tuple[Board, Eval, list[BoardRow]]:
        """The board, its eval and its rows as read at most `BOARD_FRESH_S` ago (and the time of one read
        more, while another thread reads it anew), if `caller` may read it."""
        reading = self._readings.get(slug)
        if reading is None:
            reading = self._read(slug)
        elif not reading.fresh and self._refreshing.acquire(blocking=False):
            # One thread reads a board that has gone stale; the others answer from the last reading meanwhile
            # rather than all reading it at once.
            try:
                reading = self._read(slug)
            finally:
                self._refreshing.release()
        if reading is None or not _may_read(caller, reading.board):
            raise not_found(f"board: no board {slug!r} that you can read")
        return reading.board, reading.eval, reading.rows

    def kept(self, caller: Caller | None, slug: str) -> tuple[Board, Eval, list[BoardRow]] | None:
        """The board as `board` answers it, if this process read it less than `BOARD_FRESH_S` ago and
        `caller` may read it: no I/O, so an async route may ask on the event loop. None means ask `board`."""
        reading = self._readings.get(slug)
        if reading is None or not reading.fresh or not _may_read(caller, reading.board):
            return None
        return reading.board, reading.eval, reading.rows

    def _read(self, slug: str) -> _Reading | None:
        at = time.monotonic()  # before the reads: the reading is at least as fresh as it says
        with self.db.reading() as session:
            found = session.execute(_BOARD, {"slug": slug}).one_or_none()
            if found is None:
                self._readings.pop(slug, None)
                return None
            board, ev = found
            reading = _Reading(at, board, ev, self._rows(session, board))
        self._readings[slug] = reading
        return reading

    def _rows(self, session: Session, board: Board) -> list[BoardRow]:
        public = board.visibility == BoardVisibility.PUBLIC
        ranked = session.execute(
            _RANKED_PUBLIC if public else _RANKED_ORG, {"eval_id": board.eval_id, "org_id": board.org_id}
        ).all()
        shown = session.execute(_BASELINES, {"board_id": board.id}).all()
        marked = {run.id for _, run in shown}
        # A user's best run once; a run of several policies is one entry a policy (`endpoints` of its scores),
        # each kept as that user's best of its name: their pooled score ranks nothing.
        best: dict[tuple[int, str | None], _Entry] = {}
        for run, user in ranked:
            if run.id in marked:
                continue
            for entry in _entries(run, user.alias or "anonymous", self.tag(user.id)):
                mine = best.get((user.id, entry.policy))
                if mine is None or entry.standing < mine.standing:
                    best[(user.id, entry.policy)] = entry
        entries = list(best.values())
        entries += [
            _Entry(
                r, b.display_name, self.publisher_tag(b.publisher), None, dict(r.scores or {}), b.publisher
            )
            for b, r in shown
            if r.status == RunStatus.FINISHED
        ]
        entries.sort(key=lambda entry: entry.standing)
        out: list[BoardRow] = []
        rank = 0
        for entry in entries:
            if entry.publisher is None:
                rank += 1
            out.append(
                BoardRow(
                    None if entry.publisher is not None else rank,
                    entry.name,
                    entry.tag,
                    _primary(entry.scores),
                    entry.run.id,
                    entry.run.received_at,
                    entry.publisher,
                    entry.run.replay_token,
                    entry.scores,
                )
            )
        return out

    def run_by_token(self, token: str) -> RunView | None:
        """A run by its page's token (the token is the credential: whoever holds the link may look)."""
        with self.db.reading() as session:
            run = session.execute(select(Run).where(Run.replay_token == token)).scalar_one_or_none()
            if run is None:
                return None
            catalog_eval = session.get(Eval, run.eval_id) if run.eval_id else None
            episodes = list(
                session.execute(
                    select(RunEpisode).where(RunEpisode.submission_id == run.id).order_by(RunEpisode.index)
                ).scalars()
            )
            board = None
            if catalog_eval is not None:
                board = (
                    session.execute(
                        select(Board).where(
                            Board.eval_id == catalog_eval.id,
                            (Board.visibility == BoardVisibility.PUBLIC)
                            if run.audience == Audience.PUBLIC
                            else (Board.org_id == run.org_id),
                        )
                    )
                    .scalars()
                    .first()
                )
            user = session.get(User, run.user_id)
        return RunView(
            run,
            catalog_eval,
            episodes,
            board,
            self.tag(run.user_id),
            (user.alias if user else None) or "anonymous",
        )

    def recent_public_runs(self, limit: int = 20) -> list[tuple[Run, Eval | None]]:
        """Finished runs on public boards, newest first: what the home page lists to anyone."""
        with self.db.reading() as session:
            rows = session.execute(
                select(Run, Eval)
                .outerjoin(Eval, Eval.id == Run.eval_id)
                .where(Run.audience == Audience.PUBLIC, Run.status == RunStatus.FINISHED)
                .order_by(Run.received_at.desc())
                .limit(limit)
            ).all()
        return [(r, e) for r, e in rows]

    def tag(self, user_id: int) -> str:
        """Six hex characters that tell two users of one alias apart, the same on every board."""
        return hashlib.sha256(self._tag_secret + user_id.to_bytes(8, "big")).hexdigest()[:6]

    def publisher_tag(self, publisher: str) -> str:
        """A baseline's tag: its publisher's (the same on every board), never that of whoever filed the run,
        who may rank on the board too. Apart from every user's by what is hashed."""
        return hashlib.sha256(self._tag_secret + b"publisher:" + publisher.encode()).hexdigest()[:6]

    def policy_name(self, endpoint: str, alias: str | None, user_id: int) -> str:
        """An endpoint's policy as the board views name it: its name and who filed it (`pi0 (ada#3f9a1c)`), so
        two users' endpoints named alike stay apart and one user's runs of a name add up."""
        return f"{endpoint} ({alias or 'anonymous'}#{self.tag(user_id)})"


def board_runs(board: Board, caller: Caller | None) -> Select[Run, str | None]:
    """The finished runs of a board's eval that its other views (pairwise, checkpoint curves) read for
    `caller`, with their filer's alias, blind samples included: a tenant board's, its org's runs; a public
    board's, the public runs and, for a member of orgs, their orgs' private runs on the eval too (a lab
    evaluating privately on a catalogue eval sees its own checkpoints and duels; nobody else does)."""
    query = (
        select(Run, User.alias)
        .join(User, User.id == Run.user_id)
        .where(Run.eval_id == board.eval_id, Run.status == RunStatus.FINISHED)
    )
    if board.visibility != BoardVisibility.PUBLIC:
        return query.where(Run.org_id == board.org_id, Run.audience == Audience.ORG)
    own = caller.org_ids if caller is not None else frozenset()
    return query.where(
        or_(Run.audience == Audience.PUBLIC, and_(Run.audience == Audience.ORG, Run.org_id.in_(own)))
    )


def _may_read(caller: Caller | None, board: Board) -> bool:
    return board.visibility == BoardVisibility.PUBLIC or (caller is not None and caller.may_see(board.org_id))


@dataclass(frozen=True)
class _Entry:
    """One row to be: a run, or one policy of a run of several (`policy`), or a baseline (`publisher`)."""

    run: Run
    name: str
    tag: str
    policy: str | None
    scores: dict[str, Any]
    publisher: str | None = None

    @property
    def standing(self) -> tuple[float, dt.datetime]:
        """Where it stands on a board, first least: the higher primary score (none: below any), and of a tie
        the earlier run."""
        primary = _primary(self.scores)
        return -(primary if primary is not None else -1.0), self.run.received_at


def _entries(run: Run, alias: str, tag: str) -> list[_Entry]:
    """A run's entries: itself, or each of its policies where it played several, named `alias/policy`."""
    scores = dict(run.scores or {})
    policies = scores.get("endpoints") or {}
    if len(policies) < 2:
        return [_Entry(run, alias, tag, None, scores)]
    return [
        _Entry(
            run,
            f"{alias}/{name}",
            tag,
            name,
            {"primary": part.get("value"), "low": part.get("low"), "high": part.get("high")},
        )
        for name, part in policies.items()
    ]


def _primary(scores: dict[str, Any]) -> float | None:
    value = scores.get("primary")
    return float(value) if isinstance(value, (int, float)) else None
