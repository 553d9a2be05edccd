"""The builders' pool: a free thread takes the job of the owner running fewest, and no owner holds every
thread while another's job waits."""

from __future__ import annotations

import threading
import time

from deadlines import give_up_at, patience
from yardstick.worker.fair import FairPool


def test_one_owners_slow_jobs_cannot_hold_every_thread() -> None:
    pool = FairPool(2, "test")
    release = threading.Event()
    started: list[str] = []
    lock = threading.Lock()

    def job(name: str, wait: bool) -> None:
        with lock:
            started.append(name)
        if wait:
            release.wait(30)

    try:
        for n in range(3):
            pool.submit("rival", lambda n=n: job(f"rival-{n}", True))
        deadline = give_up_at(10)
        while pool.running("rival") < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # were the rule wrong, a second rival job would take the free thread now
        assert pool.running("rival") == 1
        done = threading.Event()
        pool.submit("lab", lambda: (job("lab", False), done.set()))
        assert done.wait(10)  # the lab's job ran while the rival's first still held its thread
        assert started == ["rival-0", "lab"]
    finally:
        release.set()
        pool.shutdown()


def test_an_owner_alone_uses_what_it_may_and_jobs_run_oldest_first() -> None:
    pool = FairPool(3, "test")
    order: list[int] = []
    finished = threading.Semaphore(0)
    lock = threading.Lock()

    def job(n: int) -> None:
        with lock:
            order.append(n)
        finished.release()

    try:
        for n in range(6):
            pool.submit("lab", lambda n=n: job(n))
        for _ in range(6):
            assert finished.acquire(timeout=10)
        assert sorted(order) == list(range(6)) and order[:2] == [0, 1]
        failing = threading.Event()
        pool.submit("lab", lambda: (failing.set(), 1 / 0))
        assert failing.wait(10)
        pool.submit("lab", lambda: job(6))
        assert finished.acquire(timeout=patience(10))  # a job that raised took no thread with it
    finally:
        pool.shutdown()
