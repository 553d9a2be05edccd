"""Work handed to one thread a process (the replay's scenes and files): in order, and a forked child's own."""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_a_process_forked_beside_a_running_grpc_server_starts_no_grpc_threads() -> None:
    """A box's child is forked from a process that may serve or dial gRPC; gRPC's fork handlers started its
    threads again in the child, which then hung between fork and exec."""
    script = (
        "import yardstick, grpc, os, time\n"
        "from concurrent import futures\n"
        "server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))\n"
        "port = server.add_insecure_port('127.0.0.1:0'); server.start()\n"
        "grpc.channel_ready_future(grpc.insecure_channel(f'127.0.0.1:{port}')).result(timeout=60)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(0.5)\n"
        "    os.write(1, str(len(os.listdir(f'/proc/{os.getpid()}/task'))).encode())\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1", f"the forked child ran {done.stdout} threads"
