"""The platform under faults, as `yardstick server` runs it (its own process, its workers its children):
stopping it stops all it started; a worker that dies or wedges is replaced and the runs go on; the database's
connections cut, the artifact folder full, a policy server that hangs — nothing lost, nothing counted twice,
every run ends with a reason. Real processes, real signals, real PostgreSQL."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from platform_client.eval_plan import EvalPlan
from sqlalchemy import event, select

from conftest import PG_URL, fresh_database
from deadlines import until
from platform_harness import (
    TOYS,
    ServerProcess,
    free_port,
    running_platform,
    server_process,
    toy_plan,
    wait_for,
)
from yardstick.core.artifacts import LocalArtifactStore
from yardstick.core.install import open_install
from yardstick.core.settings import Settings
from yardstick.gateway.services import ledger_for
from yardstick.store.db import Database
from yardstick.store.models import Artifact, Run, RunEpisode, ServedPolicy, WorkerBeat
from yardstick.store.states import EpisodeState
from yardstick.worker.platform_worker import PlatformWorker
from yardstick.worker.processes import children, descendants

# Short enough that a wedged call is found quickly (its limit, then the worker's grace), long enough that a
# healthy call (the slow policies below take up to 1 s) never is.
CALL_LIMIT_S = 1.5


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _episodes(db: Database, submission_id: Any) -> list[RunEpisode]:
    with db.reading() as session:
        return list(
            session.execute(
                select(RunEpisode)
                .where(RunEpisode.submission_id == int(submission_id))
                .order_by(RunEpisode.index)
            ).scalars()
        )


def _until(what: Any, timeout: float = 60.0, every: float = 0.1) -> Any:
    return until(what, timeout, f"{what} to come true", every)


def _slow_plan(key: str, episodes: int = 2, spec: str = "slower") -> EvalPlan:
    return toy_plan(key, spec=spec, episodes=episodes)


def _add_slower_policy(settings: Settings, delay: float) -> None:
    db = Database(settings.database)
    with db.writing() as session:
        session.add(ServedPolicy(name="slower", reference=f"{TOYS}:SlowRows", params={"delay": delay}))
    db.close()


@pytest.fixture
def fault_server(tmp_path: Path, database_url: str) -> Iterator[ServerProcess]:
    # The test's own policy servers listen on this machine: the administrator allows them.
    allowed = ("--allow-remote", "127.0.0.1")
    with server_process(tmp_path, database_url, call_timeout_s=CALL_LIMIT_S, extra=allowed) as served:
        yield served


def test_sigterm_stops_every_process_the_server_started_and_a_restart_plays_every_episode_once(
    fault_server: ServerProcess,
) -> None:
    served = fault_server
    _add_slower_policy(served.settings, 0.1)
    server = served.start()
    alice = served.client()
    created = alice.create_submission(_slow_plan("stopped", episodes=4))
    _until(lambda: alice.get_submission(created.submission_id).episodes.done >= 2)
    started = descendants(server.pid)
    assert served.workers(), started

    assert served.stop(signal.SIGTERM) == 0
    _until(lambda: not any(alive(pid) for pid in started), timeout=5)
    db = Database(served.settings.database)
    # The batch in hand, the episode in play included, went back to the queue: nothing is left leased.
    assert {e.state for e in _episodes(db, created.submission_id)} <= {EpisodeState.DONE, EpisodeState.QUEUED}

    restarted = served.start()
    view = wait_for(alice, created.submission_id)
    assert view.status.name == "finished" and view.episodes.done == 8
    [worker] = served.workers()  # exactly one worker, and none of the first server's left
    assert not any(alive(pid) for pid in started) and worker in descendants(restarted.pid)
    episodes = _episodes(db, created.submission_id)
    # Every episode played once: each done with one result, none counted as a second attempt.
    assert [e.state for e in episodes] == [EpisodeState.DONE] * 8
    assert [e.attempt for e in episodes] == [1] * 8
    assert served.stop(signal.SIGINT) == 0
    db.close()


def test_a_server_with_several_http_processes_serves_from_all_and_sigterm_stops_them_all_leaving_no_child(
    tmp_path: Path, database_url: str
) -> None:
    with server_process(tmp_path, database_url, extra=("--http-workers", "3")) as served:
        server = served.start()
        # Three HTTP processes and the one queue worker: the children the server spawned.
        _until(lambda: len(served.workers()) == 4)
        alice = served.client()
        created = alice.create_submission(toy_plan("several", episodes=1))
        assert wait_for(alice, created.submission_id).status.name == "finished"
        me = f"{served.url}/v1/users.me"
        for _ in range(20):  # each on a new connection: the kernel hands them to any of the processes
            assert httpx.get(me, headers=_bearer(served.keys["alice"])).status_code == 200
        started = descendants(server.pid)
        assert served.stop(signal.SIGTERM) == 0
        _until(lambda: not any(alive(pid) for pid in started), timeout=10)
        assert not children(server.pid)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_worker_beats_while_it_plays_and_one_killed_is_replaced_and_the_run_finishes_by_itself(
    fault_server: ServerProcess,
) -> None:
    served = fault_server
    _add_slower_policy(served.settings, 1.0)  # an episode of "ten" takes 5 s, a batch of them 10 s
    served.start()
    alice = served.client()
    db = Database(served.settings.database)

    def beat() -> Any:
        with db.reading() as session:
            return session.execute(select(WorkerBeat.seen_at).order_by(WorkerBeat.seen_at.desc())).scalar()

    created = alice.create_submission(_slow_plan("beats"))
    _until(lambda: alice.get_submission(created.submission_id).status.name == "running")
    first = beat()
    # The worker beats again while its first batch (10 s) still plays: its main thread is inside it all along.
    _until(lambda: beat() > first)
    assert alice.get_submission(created.submission_id).episodes.done < 4

    [doomed] = served.workers()
    os.kill(doomed, signal.SIGKILL)
    view = wait_for(alice, created.submission_id, timeout=90)  # no one restarts anything
    assert view.status.name == "finished" and view.episodes.done == 4
    [successor] = served.workers()
    assert successor != doomed
    episodes = _episodes(db, created.submission_id)
    assert [e.state for e in episodes] == [EpisodeState.DONE] * 4
    db.close()


def test_a_call_wedged_past_the_alarm_fails_its_run_with_its_timeout_and_the_worker_is_replaced(
    fault_server: ServerProcess,
) -> None:
    served = fault_server
    served.start()
    alice = served.client()
    [first] = served.workers()
    wedged = alice.create_submission(toy_plan("wedged", spec="wedge", episodes=1))
    view = wait_for(alice, wedged.submission_id, timeout=60)
    assert view.status.name == "errored"
    assert view.reason_code.name == "latency_budget_exceeded", view.reason
    assert "did not yield to the alarm" in (view.reason or "")
    diagnostics = httpx.get(view.artifacts.diagnostics).json()
    assert (diagnostics["failure"], diagnostics["charged"]) == ("policy_timeout", True)
    _until(lambda: [pid for pid in served.workers() if pid != first])
    assert not alive(first)
    later = wait_for(alice, alice.create_submission(toy_plan("after-wedge", episodes=1)).submission_id)
    assert later.status.name == "finished"


def test_postgresql_connections_terminated_mid_run_lose_nothing_and_count_nothing_twice(
    tmp_path: Path,
) -> None:
    with fresh_database("postgresql", tmp_path) as url:
        name = f"ys-faults-{secrets.token_hex(4)}"
        tagged = f"{url}&application_name={name}"
        with server_process(tmp_path, tagged, call_timeout_s=CALL_LIMIT_S) as served:
            _add_slower_policy(served.settings, 0.1)
            served.start()
            alice = served.client()
            created = alice.create_submission(_slow_plan("cut", episodes=4))
            terminated = 0
            with psycopg.connect(PG_URL, autocommit=True) as admin:
                for _ in range(8):
                    time.sleep(0.5)
                    # Only this test's connections (the server's and its worker's), never anyone else's.
                    rows = admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                        (name,),
                    ).fetchall()
                    terminated += len(rows)
            assert terminated > 0
            view = _until(lambda: _ended(alice, created.submission_id), timeout=120, every=0.5)
            assert view.status.name == "finished" and view.episodes.done == 8, view.reason
            db = Database(tagged)
            episodes = _episodes(db, created.submission_id)
            assert [e.state for e in episodes] == [EpisodeState.DONE] * 8
            db.close()
            assert served.stop() == 0


# Statements a worker runs while it plays a batch: its read of the served policy it is to start, and the
# landing of an episode it played (`EpisodeQueue.complete`).
CUT_AT = {
    "starting an endpoint": ("FROM policy_specs",),
    "landing an episode": ("UPDATE episodes", "RETURNING episodes.submission_id"),
}


@pytest.mark.parametrize("moment", CUT_AT)
def test_a_connection_cut_while_a_worker_plays_hands_its_batch_back_and_the_run_finishes(
    tmp_path: Path, moment: str
) -> None:
    """A pooled connection is pinged only after a second idle (`store.db`), so one the database cut within
    that second fails at its next statement. Cut as the worker started an endpoint, that failed the run as
    the worker's own fault; cut as it landed an episode, the episode (and the rest of the batch, if its
    release failed too) stayed leased until the lease ran out. Now the worker hands all it holds back,
    uncounted, once the database answers, and plays it: with a lease of ten minutes the run still finishes."""
    with (
        fresh_database("postgresql", tmp_path) as url,
        running_platform(tmp_path, url, workers=0, lease_s=600) as platform,
    ):
        _add_slower_policy(platform.settings, 0.01)
        alice = platform.client("alice")
        created = alice.create_submission(_slow_plan("cut-while-playing"))
        worker = PlatformWorker(platform.settings, ledger_for(platform.settings))
        cut: list[int] = []

        @event.listens_for(worker.db.engine, "before_cursor_execute")
        def cut_once_there(connection: Any, cursor: Any, statement: str, *_: Any) -> None:
            if all(part in statement for part in CUT_AT[moment]) and not cut:
                cut.append(connection.connection.dbapi_connection.info.backend_pid)
                with psycopg.connect(PG_URL, autocommit=True) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(%s, 10000)", (cut[0],)
                    )  # and wait for it to end

        playing = threading.Thread(target=worker.run, daemon=True)
        playing.start()
        try:
            view = platform.wait(alice, created.submission_id, timeout=60)
        finally:
            worker.stop()
            playing.join(30)
        assert cut, f"the worker never ran a statement with {CUT_AT[moment]}"
        assert view.status.name == "finished", view.reason
        episodes = _episodes(platform.platform.db, created.submission_id)
        assert [(e.state, e.attempt) for e in episodes] == [(EpisodeState.DONE, 1)] * len(episodes)


def _ended(client: Any, submission_id: Any) -> Any:
    with contextlib.suppress(Exception):  # the gateway's own connections are being cut too
        view = client.get_submission(submission_id)
        if view.status.name in ("finished", "errored", "cancelled"):
            return view
    return None


@contextlib.contextmanager
def _small_filesystem(folder: Path, size: str) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=False
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small filesystem here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path) -> Path:
    """Fill `folder`'s filesystem to the last byte; the file that does it."""
    filler = folder / "filler"
    out = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(out, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(out)
    return filler


def test_a_full_artifact_folder_errors_the_run_as_the_platforms_fault_refunded_and_serves_no_part_file(
    fault_server: ServerProcess,
) -> None:
    served = fault_server
    _add_slower_policy(served.settings, 0.1)
    with _small_filesystem(served.settings.artifact_root, "4m") as artifacts:
        served.start()
        alice = served.client()
        used = alice.me().quota_for("submissions.day").used  # type: ignore[union-attr]
        created = alice.create_submission(_slow_plan("full", episodes=4))
        _until(lambda: alice.get_submission(created.submission_id).episodes.done >= 1)
        filler = _fill(artifacts)
        view = wait_for(alice, created.submission_id)
        assert view.status.name == "errored" and view.reason_code.name == "internal_error", view.reason
        assert "could not be stored" in (view.reason or "")
        assert alice.me().quota_for("submissions.day").used == used  # type: ignore[union-attr]
        # What the run recorded is whole; nothing half-written is left where a link could reach it.
        db = Database(served.settings.database)
        with db.reading() as session:
            recorded = session.execute(
                select(Artifact.key, Artifact.size).where(
                    Artifact.submission_id == int(created.submission_id)
                )
            ).all()
        db.close()
        assert recorded  # the episodes that landed before the folder filled
        store = LocalArtifactStore(artifacts)
        for key, size in recorded:
            assert store.path(int(created.submission_id), key).stat().st_size == size
        if view.artifacts is not None:
            for url in filter(None, (view.artifacts.result, view.artifacts.diagnostics)):
                assert httpx.get(url).json()["failure"] == "storage_failed"
        assert list((artifacts / ".tmp").glob("*")) == []
        filler.unlink()
        later = wait_for(alice, alice.create_submission(toy_plan("room-again", episodes=1)).submission_id)
        assert later.status.name == "finished"
        assert served.stop() == 0


def test_a_policy_server_that_hangs_fails_its_run_with_a_reason_and_the_worker_goes_on(
    fault_server: ServerProcess,
) -> None:
    served = fault_server
    port = free_port()
    policy = subprocess.Popen(
        [sys.executable, "-m", "yardstick.cli", "policy", "serve", f"{TOYS}:SlowRows", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until(lambda: _healthy(port))
        served.start()
        alice = served.client()
        plan = EvalPlan.model_validate(
            {
                "request_type": {"type": "private_eval", "org": "acme"},
                "eval": "toys.tally",
                "endpoints": [
                    {
                        "name": "remote",
                        "wire": "websocket",
                        "address": {"host": "127.0.0.1", "port": port, "path": "/api/v1/session"},
                    }
                ],
                "episodes_per_endpoint": 4,
                "transaction_key": "hung",
            }
        )
        created = alice.create_submission(plan)
        _until(lambda: alice.get_submission(created.submission_id).episodes.done >= 1)
        policy.send_signal(signal.SIGSTOP)  # hung: the process is there, the socket open, nothing answers
        view = wait_for(alice, created.submission_id, timeout=60)
        assert view.status.name == "errored" and view.reason_code.name == "latency_budget_exceeded", (
            view.reason
        )
        later = wait_for(alice, alice.create_submission(toy_plan("after-hang", episodes=1)).submission_id)
        assert later.status.name == "finished"
    finally:
        policy.send_signal(signal.SIGCONT)
        policy.kill()
        policy.wait(timeout=10)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_worker_sigkilled_during_a_sequences_eval_leaves_the_same_report_each_episode_counted_once(
    fault_server: ServerProcess,
) -> None:
    """An eval through the Sequences door is a run on the same durable queue: its worker SIGKILLed mid-eval,
    the successor plays what was left, and the report is the one an undisturbed eval gives."""
    from yardstick.sequences.eval_report import run_id_of

    served = fault_server
    _add_slower_policy(served.settings, 0.3)
    served.start()
    headers = {"Authorization": f"Bearer {served.keys['alice']}"}

    def start() -> str:
        answer = httpx.post(
            f"{served.url}/v1/eval",
            json={"model": "slower", "benchmark": "toys.tally", "trials": 4},
            headers=headers,
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["eval_id"])

    def read(eval_id: str, part: str = "") -> Any:
        return httpx.get(f"{served.url}/v1/eval/{eval_id}{part}", headers=headers, timeout=30)

    def ended(eval_id: str) -> Any:
        report = read(eval_id).json()
        return report if report["status"] in ("completed", "failed", "canceled") else None

    def rows(eval_id: str) -> list[tuple[str, ...]]:
        table = read(eval_id, "/episodes.csv").text.splitlines()
        head = table[0].split(",")
        wanted = [head.index(c) for c in ("task", "seed", "repeat", "success", "steps", "error")]
        return sorted(tuple(line.split(",")[i] for i in wanted) for line in table[1:])

    killed = start()
    _until(lambda: read(killed, "/details").json()["progress"]["done"] >= 1, timeout=60)
    [doomed] = served.workers()
    os.kill(doomed, signal.SIGKILL)
    after_kill = _until(lambda: ended(killed), timeout=120, every=0.3)
    assert after_kill["status"] == "completed", after_kill
    [successor] = served.workers()
    assert successor != doomed

    reference = start()
    undisturbed = _until(lambda: ended(reference), timeout=120, every=0.3)
    assert after_kill["metrics"] == undisturbed["metrics"] and not after_kill.get("incomplete")
    assert rows(killed) == rows(reference) and len(rows(killed)) == 8

    db = Database(served.settings.database)
    run_id = run_id_of(killed)
    assert run_id is not None
    episodes = _episodes(db, run_id)
    # Each episode done once, with one result: the one the killed worker held was played again, not twice.
    assert [e.state for e in episodes] == [EpisodeState.DONE] * 8
    assert all(e.result is not None for e in episodes)
    with db.reading() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.episodes_done == run.episodes_total == 8
    db.close()


def test_a_stop_signal_that_lands_inside_the_workers_wait_on_its_stop_stops_it(tmp_path: Path) -> None:
    """A signal is handled between bytecodes, also at the start of the main thread's `stopping.wait()`,
    where that thread holds the lock `Event.set()` takes. A handler that set the event there waited on its
    own thread for good: a harness worker whose parent had gone lived on, hung, adopted by init. The handler
    only asks; the worker stops at its next look."""
    settings = Settings(data_dir=tmp_path)
    open_install(settings).close()
    worker = PlatformWorker(settings, ledger_for(settings))

    def signal_inside_the_wait() -> None:
        with worker.stopping._cond:  # type: ignore[attr-defined]  # held as at the start of Event.wait
            worker.interrupt()

    handler = threading.Thread(target=signal_inside_the_wait, daemon=True)
    handler.start()
    handler.join(5)
    assert not handler.is_alive(), "the signal handler hung on the lock its own thread holds"
    running = threading.Thread(target=worker.run, daemon=True)
    running.start()
    running.join(10)
    assert not running.is_alive() and worker.stopping.is_set()
