"""Whether any worker is alive (it beat within `WORKER_ALIVE_S`), read without a query a request.

Beats only move forward, so the newest beat read proves the answer is yes until it is `WORKER_ALIVE_S` old:
that yes is remembered for exactly as long, and is never stale. A no is read again after `NO_WORKER_S`, so a
worker that just started is seen within that time (it takes longer than that to start)."""

from __future__ import annotations

import datetime as dt
import threading
import time

from sqlalchemy import func, select

from yardstick.store.db import Database
from yardstick.store.models import WorkerBeat, utcnow

# A worker that has not beaten this long is gone; a pending run with none says it waits for one.
WORKER_ALIVE_S = 30.0
NO_WORKER_S = 0.5


class Liveness:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._alive_until = -1.0  # monotonic time up to which a beat read proves a worker alive
        self._none_until = -1.0  # monotonic time up to which the last "none alive" holds

    def workers_alive(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if now < self._alive_until:
                return True
            if now < self._none_until:
                return False
        with self.db.reading() as session:
            newest = session.execute(select(func.max(WorkerBeat.seen_at))).scalar_one_or_none()
        age = _age_s(newest) if newest is not None else None
        with self._lock:
            if age is not None and age < WORKER_ALIVE_S:
                self._alive_until = now + (WORKER_ALIVE_S - age)
                return True
            self._none_until = now + NO_WORKER_S
            return False


def _age_s(seen_at: dt.datetime) -> float:
    if seen_at.tzinfo is None:  # SQLite hands back what it stored, without its zone: UTC
        seen_at = seen_at.replace(tzinfo=dt.UTC)
    return (utcnow() - seen_at).total_seconds()
