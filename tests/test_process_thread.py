"""Work handed to one thread a process (the replay's scenes and files): in order, and a forked child's own."""

from __future__ import annotations

import threading

from fork_helpers import holds_in_a_forked_child
from yardstick.replay3d.process_thread import ProcessThread

DEADLINE_S = 30.0


def test_calls_run_in_the_order_handed_on_one_named_thread() -> None:
    thread = ProcessThread("yardstick-test-order")
    assert not thread.started  # nothing is started by being named
    ran: list[tuple[int, str]] = []
    futures = [thread.submit(lambda n=n: ran.append((n, threading.current_thread().name))) for n in range(20)]
    for future in futures:
        future.result(timeout=DEADLINE_S)
    assert [n for n, _ in ran] == list(range(20))
    names = {name for _, name in ran}
    assert len(names) == 1 and names.pop().startswith("yardstick-test-order")
    assert thread.submit(pow, 2, 10).result(timeout=DEADLINE_S) == 1024


def test_a_forked_child_makes_its_own_thread_even_with_the_lock_held_at_the_fork() -> None:
    thread = ProcessThread("yardstick-test-fork")
    parents = thread.submit(threading.get_ident).result(timeout=DEADLINE_S)
    # Another thread holds the guarding lock while the process forks: a child keeping that lock would hang.
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with thread._lock:
            holding.set()
            release.wait(DEADLINE_S)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(DEADLINE_S)

    def child() -> bool:
        forgot = not thread.started
        ident = thread.submit(threading.get_ident).result(timeout=DEADLINE_S)
        return forgot and thread.started and ident != threading.get_ident()

    try:
        assert holds_in_a_forked_child(child, DEADLINE_S)
    finally:
        release.set()
        holder.join(DEADLINE_S)
    assert thread.submit(threading.get_ident).result(timeout=DEADLINE_S) == parents  # the parent's goes on
