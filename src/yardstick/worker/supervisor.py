"""The worker processes of a server (or of `yardstick worker`), and a server's HTTP processes
(`--http-workers`): started, watched, replaced when they die, and stopped — with whatever they started —
when the supervisor stops.

* A worker that dies (killed, crashed, or out by itself after a call that would not yield to the alarm) is
  replaced: at once the first time, then after a back-off that doubles, up to `BACKOFF_MAX_S`, while its
  successors keep dying young. Its leases are ended on the spot, so its episodes go back to the queue
  (their attempt counted) without waiting for the leases to run out.
* `stop` sends each worker SIGTERM (it hands back what it holds, the episode in play included), waits up
  to `grace_s`, then kills what is left, hands back the leases of what it killed, and kills every process
  the workers had started that outlived them.
* Each worker dies with its parent (`processes.die_with_parent`), so a supervisor killed outright leaves no
  worker behind either.
* It is its workers' orphans' reaper: the processes of a box whose worker was killed outright are adopted by
  it, and reaped as they end (`sandbox.reap_orphans`), so no defunct process is left under the server.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess

from yardstick.core.settings import Settings
from yardstick.store.db import Database
from yardstick.store.queue import EpisodeQueue
from yardstick.worker import processes
from yardstick.worker.boxes import groups, sandbox

log = logging.getLogger("yardstick.supervisor")

# A worker that lived this long died of something other than its start: its successor starts at once.
HEALTHY_S = 30.0
BACKOFF_MAX_S = 30.0
WATCH_EVERY_S = 0.25
# How often it reaps the boxes' processes it adopted (a walk of /proc).
REAP_EVERY_S = 2.0

# run_worker(settings, name, parent pid): a module-level function, so a spawned process can import it.
Target = Callable[[Settings, str, int], None]


@dataclass
class _Slot:
    """One worker's place: the process in it now, when it started, and when a dead one is replaced."""

    number: int
    name: str = ""
    process: BaseProcess | None = None
    started: float = 0.0
    backoff_s: float = 0.0
    restart_at: float = 0.0
    deaths: list[int | None] = field(default_factory=list)


class Supervisor:
    """`count` processes of `target`. `holds_leases`: they are queue workers, whose leases are ended when one
    dies or is killed (HTTP processes hold none); `role` names them in the log."""

    def __init__(
        self,
        settings: Settings,
        count: int,
        target: Target,
        *,
        holds_leases: bool = True,
        role: str = "worker",
    ) -> None:
        self.settings = settings
        self.target = target
        self.holds_leases = holds_leases
        self.role = role
        self.slots = [_Slot(number) for number in range(count)]
        self._context = mp.get_context("spawn")
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._queue: EpisodeQueue | None = None
        self._next_reap = 0.0

    @property
    def queue(self) -> EpisodeQueue:
        if self._queue is None:
            self._queue = EpisodeQueue(Database(self.settings.database), lease_s=self.settings.lease_s)
        return self._queue

    def start(self) -> None:
        processes.adopt_orphans()
        groups.remove_leftovers()  # the control groups of boxes whose worker was killed before
        with self._lock:
            for slot in self.slots:
                self._spawn(slot)
        self._watcher = threading.Thread(target=self._watch, name="yardstick-supervisor", daemon=True)
        self._watcher.start()

    def pids(self) -> list[int]:
        """The workers alive now."""
        with self._lock:
            return [s.process.pid for s in self.slots if s.process and s.process.is_alive() and s.process.pid]

    def _spawn(self, slot: _Slot) -> None:
        slot.name = f"{socket.gethostname()}-{os.getpid()}-w{slot.number}-{secrets.token_hex(3)}"
        slot.process = self._context.Process(
            target=self.target, args=(self.settings, slot.name, os.getpid()), name=slot.name, daemon=False
        )
        slot.process.start()
        slot.started = time.monotonic()

    def _watch(self) -> None:
        while not self._stopping.wait(WATCH_EVERY_S):
            with self._lock:
                if self._stopping.is_set():
                    return
                for slot in self.slots:
                    self._tend(slot)
            if time.monotonic() >= self._next_reap:
                self._next_reap = time.monotonic() + REAP_EVERY_S
                sandbox.reap_orphans()

    def _tend(self, slot: _Slot) -> None:
        now = time.monotonic()
        process = slot.process
        if process is not None and not process.is_alive():
            process.join(timeout=1)
            slot.deaths.append(process.exitcode)
            lived = now - slot.started
            slot.backoff_s = 0.0 if lived >= HEALTHY_S else min(max(2 * slot.backoff_s, 1.0), BACKOFF_MAX_S)
            if len(slot.deaths) == 1 and lived >= 1.0:
                slot.backoff_s = 0.0  # the first death of a worker that got going: replaced at once
            slot.restart_at = now + slot.backoff_s
            slot.process = None
            held = 0
            if self.holds_leases:
                try:
                    held = self.queue.expire(slot.name)
                except Exception:
                    log.exception("could not end the leases of worker %s", slot.name)
            log.warning(
                "%s %s (pid %s) exited with %s after %.0f s, holding %d episodes; replacing it in %.0f s",
                self.role,
                slot.name,
                process.pid,
                process.exitcode,
                lived,
                held,
                slot.backoff_s,
            )
        if slot.process is None and now >= slot.restart_at:
            self._spawn(slot)

    def join(self) -> None:
        """Wait until `stop` (from a signal handler or another thread)."""
        self._stopping.wait()

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop every worker, and everything they started, within about `grace_s`."""
        self._stopping.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=5)
        with self._lock:
            running = [s for s in self.slots if s.process is not None and s.process.is_alive()]
            started = {
                s.name: processes.descendants(s.process.pid) for s in running if s.process and s.process.pid
            }
            for slot in running:
                assert slot.process is not None
                slot.process.terminate()  # SIGTERM: hand back the batch, the episode in play included
            deadline = time.monotonic() + grace_s
            for slot in running:
                assert slot.process is not None
                slot.process.join(timeout=max(0.0, deadline - time.monotonic()))
            for slot in running:
                assert slot.process is not None
                if slot.process.is_alive():
                    log.warning("%s %s did not stop within %.0f s; killed", self.role, slot.name, grace_s)
                    slot.process.kill()
                    slot.process.join(timeout=5)
                    if not self.holds_leases:
                        continue
                    try:
                        self.queue.release_all(slot.name)
                    except Exception:
                        log.exception("could not hand back the leases of worker %s", slot.name)
            for pids in started.values():
                processes.kill_all(pids)
        if self._queue is not None:
            self._queue.db.close()
