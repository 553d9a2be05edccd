"""The platform end to end: a real gateway on a free port, real workers in their own processes, the real
`positronic-platform-client==0.37.1` driving it — on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_client.boards import BoardRef
from platform_client.errors import PlatformError
from platform_client.eval_plan import EvalPlan
from platform_client.requests import CancelRequest

from deadlines import give_up_at, until
from platform_harness import Harness, running_platform, toy_plan


def test_the_contracts_client_runs_a_plan_end_to_end(tmp_path: Path, database_url: str) -> None:
    with running_platform(tmp_path, database_url, open_competitions=True) as platform:
        client = platform.client("alice")
        assert client.auth_config().workos is None
        me = client.me()
        assert me.tenant == "acme" and me.organizations == ["acme"]
        assert [q.key for q in me.quota] == ["submissions.day", "submissions.concurrent"]
        assert {e.id for e in client.catalog_evals().evals} >= {"metaworld.mt10", "toys.tally", "toys.acme"}

        plan = toy_plan("run-1", competition=True)
        dry = client.resolve_plan(plan)
        assert dry.episodes_total == 4 and dry.rig_shape.name == "sim"
        created = client.create_submission(plan)
        assert created.resolved == dry  # the same key draws the same plan
        assert client.create_submission(plan).submission_id == created.submission_id  # idempotent
        view = platform.wait(client, created.submission_id)
        assert view.status.name == "finished" and view.episodes.done == 4
        assert view.scores.primary == pytest.approx(
            0.5
        )  # Tally succeeds on even seeds; 2 of each task's 4 trials
        assert client.me().quota_for("submissions.day").used == 1  # type: ignore[union-attr]

        keys: list[str] = []
        after = None
        while True:
            page = client.list_artifacts(created.submission_id, limit=2, after=after)
            keys += [a.key for a in page.artifacts]
            if page.next is None:
                break
            after = page.next
        assert keys == sorted(keys) and "result.json" in keys
        assert sum(k.startswith("attempts/1/episodes/") for k in keys) == 4
        episodes = client.list_artifacts(created.submission_id, prefix="attempts/1/episodes/")
        assert len(episodes.artifacts) == 4
        result = httpx.get(view.artifacts.result).json()
        assert (
            result["scores"]["primary"] == pytest.approx(0.5) and result["attempt_location"] == "attempts/1/"
        )

        board = client.rankings(board=BoardRef("toys.tally"))
        [row] = board.rankings
        assert row.rank == 1 and row.display_name == "alice" and len(row.tag) == 6
        assert row.submission_id == created.submission_id
        assert [s.id for s in client.list_submissions().submissions] == [created.submission_id]


def _row_of(platform: Harness, run_id: int) -> Any:
    from yardstick.store.models import Run

    with platform.platform.db.reading() as session:
        return session.get(Run, run_id)


def _scores_of(platform: Harness, submission_id: Any) -> list[tuple[int, bool, int]]:
    from sqlalchemy import select

    from yardstick.store.models import RunEpisode

    with platform.platform.db.reading() as session:
        rows = (
            session.execute(
                select(RunEpisode)
                .where(RunEpisode.submission_id == int(submission_id))
                .order_by(RunEpisode.index)
            )
            .scalars()
            .all()
        )
        return [(e.index, bool(e.result["success"]), int(e.result["steps"])) for e in rows if e.result]


def test_a_worker_killed_mid_run_loses_nothing_and_counts_nothing_twice(
    tmp_path: Path, database_url: str
) -> None:
    with running_platform(tmp_path, database_url, workers=0, lease_s=1.5) as platform:
        client = platform.client("alice")
        doomed = platform.start_worker()
        killed = client.create_submission(toy_plan("killed", spec="slow", episodes=4))
        deadline = give_up_at(60)
        while client.get_submission(killed.submission_id).episodes.done < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.kill(doomed.pid, signal.SIGKILL)  # mid-batch: its lease still holds the rest
        doomed.join()
        platform.start_worker()
        after_kill = platform.wait(client, killed.submission_id)
        clean_run = client.create_submission(toy_plan("clean", spec="slow", episodes=4))
        clean = platform.wait(client, clean_run.submission_id)
        assert after_kill.status.name == clean.status.name == "finished"
        assert after_kill.scores == clean.scores and after_kill.episodes.done == 8
        assert _scores_of(platform, killed.submission_id) == _scores_of(platform, clean_run.submission_id)


def test_an_ended_run_is_read_from_the_database_once(tmp_path: Path, database_url: str) -> None:
    """Clients poll a submission until it ends, and pages and scripts read it long after: a run that ended
    never changes, so the gateway reads it and its record links once. While it is active, every read is
    read afresh; a finished run's links are signed afresh on every read (they expire)."""
    from sqlalchemy import event

    with running_platform(tmp_path, database_url) as platform:
        client = platform.client("alice")
        run_reads: list[str] = []

        def counted(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
            if "FROM submissions" in statement or "FROM artifacts" in statement:
                run_reads.append(statement)

        event.listen(platform.platform.db.engine, "before_cursor_execute", counted)
        created = client.create_submission(toy_plan("read-once", spec="slow", episodes=2))
        run_reads.clear()
        for _ in range(2):
            assert client.get_submission(created.submission_id).status.name in (
                "blocked",
                "pending",
                "running",
            )
        assert len(run_reads) >= 2  # each read of an active run asks the database
        ended = platform.wait(client, created.submission_id)
        assert ended.status.name == "finished"
        run_reads.clear()
        again = [client.get_submission(created.submission_id) for _ in range(3)]
        assert run_reads == []
        assert all(
            view.model_dump(exclude={"artifacts"}) == ended.model_dump(exclude={"artifacts"})
            for view in again
        )
        assert (
            httpx.get(again[-1].artifacts.result).json()["scores"]
            == httpx.get(ended.artifacts.result).json()["scores"]
        )
        gina = platform.client("gina")  # kept or not, a run is shown only to whom may see it
        assert _refusal(lambda: gina.get_submission(created.submission_id)).code.name == "not_found"


def test_a_board_polled_while_a_run_plays_shows_it_within_a_second_of_its_end(
    tmp_path: Path, database_url: str
) -> None:
    """Each process reads a board at most once a second and answers every caller from that reading
    (`core.boards.BOARD_FRESH_S`): a board polled all through a run shows the run within that second of its
    end, and never a run that has not finished."""
    from yardstick.core.boards import BOARD_FRESH_S

    with running_platform(tmp_path, database_url, open_competitions=True) as platform:
        client = platform.client("alice")
        board = BoardRef("toys.tally")
        created = client.create_submission(toy_plan("fresh", spec="slow", competition=True))
        while True:  # read all along: the reading stays warm
            shown = client.rankings(board=board).rankings
            # The status is read after the board: a run the board showed had finished before this read.
            if client.get_submission(created.submission_id).status.name in ("finished", "errored"):
                break
            assert shown == [], "the board showed a run that had not finished"
            time.sleep(0.05)
        until(
            lambda: [
                r for r in client.rankings(board=board).rankings if r.submission_id == created.submission_id
            ],
            BOARD_FRESH_S + 0.5,
            "the board to show the finished run",
        )


def test_a_run_left_unfinished_after_its_last_episode_landed_is_finished_by_a_worker(
    tmp_path: Path, database_url: str
) -> None:
    """A worker lands a run's last episode and finishes the run in a second transaction; a connection cut (or
    a kill) between the two left the run running for ever with every episode done. A worker's sweep
    finishes it, with the scores its episodes give."""
    import datetime as dt

    from sqlalchemy import update

    from yardstick.store.models import Run, RunEpisode
    from yardstick.store.states import RunStatus

    with running_platform(tmp_path, database_url, workers=0) as platform:
        client = platform.client("alice")
        worker = platform.start_worker()
        created = client.create_submission(toy_plan("stranded", episodes=3))
        run_id = int(created.submission_id)
        # Watched in the database, not through the gateway: a gateway keeps a run it read as ended (ended runs
        # never change), and this test makes an ended run unended, which nothing else does.
        deadline = give_up_at(60)
        while (played := _row_of(platform, run_id)).status != RunStatus.FINISHED:
            assert time.monotonic() < deadline, f"the run is still {played.status}"
            time.sleep(0.05)
        platform.stop_workers()
        worker.join()
        long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
        with platform.platform.db.writing() as session:  # as if its finish never ran
            session.execute(
                update(Run)
                .where(Run.id == run_id)
                .values(status=RunStatus.RUNNING, scores=None, ended_at=None)
            )
            session.execute(
                update(RunEpisode).where(RunEpisode.submission_id == run_id).values(finished_at=long_ago)
            )
        assert client.get_submission(created.submission_id).status.name == "running"
        platform.start_worker()
        again = platform.wait(client, created.submission_id, timeout=60)
        assert again.status.name == "finished" and again.scores.primary == played.scores["primary"]


def test_concurrent_creates_never_pass_the_days_quota(tmp_path: Path, database_url: str) -> None:
    with running_platform(tmp_path, database_url, workers=0, per_day=3) as platform:
        outcomes: list[Any] = []

        def create(k: int) -> None:
            try:
                outcomes.append(platform.client("alice").create_submission(toy_plan(f"q{k}")))
            except PlatformError as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=create, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [o for o in outcomes if isinstance(o, PlatformError)]
        assert len(outcomes) - len(refused) == 3
        assert all(o.code.name == "quota_exceeded" and o.http_status == 429 for o in refused)
        assert {o.quota.key for o in refused} == {"submissions.day"}  # type: ignore[union-attr]
        assert platform.client("alice").me().quota_for("submissions.day").used == 3  # type: ignore[union-attr]


def _refusal(call: Any) -> PlatformError:
    with pytest.raises(PlatformError) as refused:
        call()
    return refused.value


def test_every_refusal_comes_in_the_envelope(tmp_path: Path) -> None:
    with running_platform(tmp_path, None, workers=0) as platform:
        alice = platform.client("alice")
        url = platform.url
        raw = httpx.get(f"{url}/v1/users.me")
        assert raw.status_code == 401 and raw.json()["error"]["code"] == "unauthorized"
        wrong = httpx.get(f"{url}/v1/users.me", headers={"Authorization": "Bearer ys_not-a-key-at-all"})
        assert wrong.status_code == 401

        unknown = _refusal(
            lambda: alice.create_submission(
                EvalPlan.model_validate(
                    {
                        "request_type": {"type": "private_eval", "org": "acme"},
                        "eval": "no.such.eval",
                        "endpoints": [{"name": "p", "kind": "served", "wire": "websocket", "spec": "rows"}],
                    }
                )
            )
        )
        assert unknown.code.name == "not_found" and "toys.tally" in (unknown.evals or [])

        malformed = httpx.post(
            f"{url}/v1/submissions.create",
            headers={"Authorization": f"Bearer {platform.keys['alice']}"},
            json={
                "request_type": {"type": "private_eval", "org": "acme"},
                "eval": "toys.tally",
                "endpoints": [],
                "bogus_field": 1,
            },
        )
        assert malformed.status_code == 422
        body = malformed.json()["error"]
        assert body["code"] == "bad_request" and "bogus_field" in body["message"]

        # An image from a registry this install does not pull from is filed and ended at once, the
        # caller's fault with the contract's reason (not an error envelope: the contract says so).
        image = alice.create_submission(
            EvalPlan.model_validate(
                {
                    "request_type": {"type": "private_eval", "org": "acme"},
                    "eval": "toys.tally",
                    "endpoints": [
                        {"name": "p", "kind": "image", "wire": "websocket", "image": "registry.example/p:1"}
                    ],
                }
            )
        )
        assert image.status.name == "errored" and image.reason_code is not None
        assert image.reason_code.name == "image_unpullable" and image.policy_image_digest is None

        alice.create_submission(toy_plan("once"))
        conflict = _refusal(lambda: alice.create_submission(toy_plan("once", episodes=3)))
        assert conflict.code.name == "transaction_conflict" and conflict.http_status == 409

        not_hex = httpx.get(
            f"{url}/v1/submissions.get",
            params={"id": "xyz"},
            headers={"Authorization": f"Bearer {platform.keys['alice']}"},
        )
        assert not_hex.status_code == 400 and not_hex.json()["error"]["code"] == "bad_request"

        gina = platform.client("gina")
        tasks = _refusal(gina.catalog_tasks)
        assert tasks.code.name == "forbidden"
        composed = _refusal(
            lambda: gina.create_submission(
                EvalPlan.model_validate(
                    {
                        "request_type": {"type": "private_eval", "org": "globex"},
                        "rig_shape": "sim",
                        "tasks": ["three"],
                        "endpoints": [{"name": "p", "kind": "served", "wire": "websocket", "spec": "rows"}],
                        "episodes_per_endpoint": 1,
                    }
                )
            )
        )
        assert composed.code.name == "forbidden"
        other_org = _refusal(lambda: gina.create_submission(toy_plan("x", org="acme")))
        assert other_org.code.name == "forbidden"

        pending = alice.create_submission(toy_plan("unfinished"))
        early = _refusal(lambda: alice.list_artifacts(pending.submission_id))
        assert early.code.name == "bad_request"
        assert alice.cancel_submission(CancelRequest(id=pending.submission_id)).refunded is True
        twice = _refusal(lambda: alice.cancel_submission(CancelRequest(id=pending.submission_id)))
        assert twice.code.name == "bad_request"
        board = _refusal(lambda: alice.rankings(board=BoardRef("no-such-board")))
        assert board.code.name == "not_found"
        assert httpx.get(f"{url}/openapi.json").json()["info"]["title"] == "Yardstick"


def test_one_org_never_sees_another_orgs_runs_artifacts_or_tenant_board(
    tmp_path: Path, database_url: str
) -> None:
    with running_platform(tmp_path, database_url) as platform:
        alice, gina = platform.client("alice"), platform.client("gina")
        created = alice.create_submission(toy_plan("private", episodes=1))
        platform.wait(alice, created.submission_id)
        assert (
            platform.client("bob").get_submission(created.submission_id).status.name == "finished"
        )  # same org
        for call in (
            lambda: gina.get_submission(created.submission_id),
            lambda: gina.list_artifacts(created.submission_id),
            lambda: gina.cancel_submission(CancelRequest(id=created.submission_id)),
        ):
            assert _refusal(call).code.name == "not_found"
        assert gina.list_submissions().submissions == []
        assert "toys.acme" in {b.board for b in alice.list_boards().boards}
        assert "toys.acme" not in {b.board for b in gina.list_boards().boards}
        assert _refusal(lambda: gina.rankings(board=BoardRef("toys.acme"))).code.name == "not_found"
        anonymous = httpx.get(f"{platform.url}/v1/rankings.list").json()
        assert "toys.acme" not in {b["board"] for b in anonymous["boards"]}


def test_tampered_or_expired_artifact_links_are_refused(tmp_path: Path) -> None:
    with running_platform(tmp_path, None) as platform:
        alice = platform.client("alice")
        created = alice.create_submission(toy_plan("links", episodes=1))
        view = platform.wait(alice, created.submission_id)
        good = view.artifacts.result
        assert httpx.get(good).status_code == 200
        for bad in (
            good.replace("sig=", "sig=0"),
            good.replace("result.json", "diagnostics.json"),
            good.replace("expires=", "expires=1"),
        ):
            refused = httpx.get(bad)
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        stale = platform.platform.signer.sign(
            int(created.submission_id), "result.json", now=time.time() - 7200, base_url=platform.url + "/"
        )
        expired = httpx.get(stale)
        assert expired.status_code == 403 and "expired" in expired.json()["error"]["message"]


def test_a_policy_fault_errors_the_run_charged_and_a_platform_fault_refunds(tmp_path: Path) -> None:
    with running_platform(tmp_path, None, workers=0, lease_s=0.5, max_attempts=1) as platform:
        alice = platform.client("alice")
        lost = alice.create_submission(toy_plan("lost", episodes=1))
        ghost = platform.platform.queue.lease("ghost-worker", 10)  # a worker that dies holding the batch
        assert ghost
        time.sleep(0.8)
        platform.start_worker()
        refunded = platform.wait(alice, lost.submission_id)
        assert refunded.status.name == "errored" and refunded.reason_code.name == "runner_unresponsive"
        crash = platform.wait(alice, alice.create_submission(toy_plan("crash", spec="crash")).submission_id)
        assert crash.status.name == "errored" and crash.reason_code.name == "policy_inference_crash"
        assert "boom at step 5" in (crash.reason or "")
        assert crash.artifacts is not None and httpx.get(crash.artifacts.diagnostics or "").status_code == 200
        # The lost run was given back; the crashed one is charged.
        assert alice.me().quota_for("submissions.day").used == 1  # type: ignore[union-attr]


def test_a_remote_endpoint_is_dialled_over_the_wire(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import toys
    from yardstick.wire.server.host import PolicyHost
    from yardstick.wire.server.serve import PolicyServer, ServeOptions

    host = PolicyHost(toys.Rows, model_id="rows", reference="toys:Rows")
    with (
        PolicyServer({"rows": host}, ServeOptions(port=0, grpc_port=0)) as policy_server,
        running_platform(tmp_path, None, allow_remote=("127.0.0.1",)) as platform,
    ):
        alice = platform.client("alice")
        plan = EvalPlan.model_validate(
            {
                "request_type": {"type": "private_eval", "org": "acme"},
                "eval": "toys.tally",
                "endpoints": [
                    {
                        "name": "ws",
                        "wire": "websocket",
                        "address": {
                            "host": "127.0.0.1",
                            "port": policy_server.port,
                            "path": "/api/v1/session",
                        },
                    },
                    {
                        "name": "rpc",
                        "wire": "grpc",
                        "address": {
                            "host": "127.0.0.1",
                            "port": policy_server.grpc_port,
                            "path": "/api/v1/session",
                        },
                    },
                ],
                "episodes_per_endpoint": 2,
                "transaction_key": "remote",
            }
        )
        view = platform.wait(alice, alice.create_submission(plan).submission_id)
        assert view.status.name == "finished" and view.episodes.done == 8
        result = httpx.get(view.artifacts.result).json()
        assert set(result["endpoints"]) == {"ws", "rpc"}
        assert result["endpoints"]["ws"]["overall"] == result["endpoints"]["rpc"]["overall"]


def test_a_run_of_two_policies_ranks_each_on_the_tenant_board_and_a_baseline_shows_its_publisher(
    tmp_path: Path, database_url: str
) -> None:
    """Canvas: Rows succeeds on every seed, the sampler on even seeds only. Alice's duel of the two is two
    rows of the board (each its own score), not one of the pair's pooled 75%; bob's run made a baseline
    shows its publisher's tag, not bob's; a sampled run is no baseline."""
    from platform_harness import TOYS
    from yardstick.core import admin

    with running_platform(tmp_path, database_url) as platform:
        with platform.platform.db.writing() as session:
            admin.create_eval(
                session,
                "acme.canvas",
                f"{TOYS}:Canvas",
                choice=admin.EvalTasks(["left"], trials=4),
                org_slug="acme",
            )
        alice, bob = platform.client("alice"), platform.client("bob")

        def canvas(key: str, *specs: str, **more: Any) -> EvalPlan:
            return EvalPlan.model_validate(
                {
                    "request_type": {"type": "private_eval", "org": "acme"},
                    "eval": "acme.canvas",
                    "endpoints": [
                        {"name": s, "kind": "served", "wire": "websocket", "spec": s} for s in specs
                    ],
                    "transaction_key": key,
                    **more,
                }
            )

        filed = [
            (alice, alice.create_submission(canvas("duel", "rows", "sampler"))),
            (bob, bob.create_submission(canvas("reference", "rows"))),
            (bob, bob.create_submission(canvas("bobs", "sampler"))),
            (bob, bob.create_submission(canvas("sampled", "rows", sample={"count": 2, "seed": 1}))),
        ]
        ids = []
        for client, created in filed:
            assert platform.wait(client, created.submission_id).status.name == "finished"
            ids.append(int(created.submission_id))
        duel, reference, bobs, sampled = ids
        with (
            platform.platform.db.writing() as session,
            pytest.raises(admin.AdminError, match="sample of 2 of the eval's episodes"),
        ):
            admin.add_baseline(session, "acme.canvas", sampled, publisher="Physical Labs", name="pi-zero")
        with platform.platform.db.writing() as session:
            admin.add_baseline(session, "acme.canvas", reference, publisher="Physical Labs", name="pi-zero")
        deadline = time.monotonic() + 30  # a board is read at most once a second (`BOARD_FRESH_S`)
        while True:
            rows = alice.rankings(board=BoardRef("acme.canvas")).rankings
            if any(r.baseline for r in rows):
                break
            assert time.monotonic() < deadline, "the baseline never showed on the board"
            time.sleep(0.05)
    shown = [(r.rank, r.display_name, int(r.submission_id), r.scores.primary) for r in rows]
    assert shown == [  # ties: the earlier run first
        (1, "alice/rows", duel, pytest.approx(1.0)),
        (None, "pi-zero", reference, pytest.approx(1.0)),
        (2, "alice/sampler", duel, pytest.approx(0.5)),
        (3, "bob", bobs, pytest.approx(0.5)),
    ]
    tags = {r.display_name: r.tag for r in rows}
    assert tags["alice/rows"] == tags["alice/sampler"] != tags["bob"]
    assert tags["pi-zero"] not in (tags["bob"], tags["alice/rows"])  # the publisher's, not bob's who filed it


def test_a_cancel_cuts_the_episode_in_play_and_the_worker_takes_the_next_run(
    tmp_path: Path, database_url: str
) -> None:
    """The only worker plays a policy that hangs (an hour's sleep, well inside a call limit of fifteen
    minutes); the run is cancelled while another waits: the hanging episode is cut and the waiting run
    plays at once, not when the hang runs out."""
    from platform_harness import TOYS
    from yardstick.core import admin
    from yardstick.store.models import RunEpisode, ServedPolicy
    from yardstick.store.states import EpisodeState

    with running_platform(tmp_path, database_url, call_timeout_s=900.0) as platform:
        with platform.platform.db.writing() as session:
            admin.create_eval(session, "toys.ten", f"{TOYS}:Tally", choice=admin.EvalTasks(["ten"], trials=1))
            session.add(ServedPolicy(name="hang", reference=f"{TOYS}:HangOnTen", params={}))
        alice = platform.client("alice")
        hanging = alice.create_submission(
            EvalPlan.model_validate(
                {
                    "request_type": {"type": "private_eval", "org": "acme"},
                    "eval": "toys.ten",
                    "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": "hang"}],
                    "transaction_key": "hangs",
                }
            )
        )

        def in_play() -> bool:
            with platform.platform.db.reading() as session:
                episode = (
                    session.query(RunEpisode)
                    .filter(RunEpisode.submission_id == int(hanging.submission_id))
                    .one()
                )
                return episode.state == EpisodeState.LEASED

        deadline = time.monotonic() + 120
        while not in_play():
            assert time.monotonic() < deadline, "the hanging run never started"
            time.sleep(0.05)
        waiting = alice.create_submission(toy_plan("waits", episodes=1))
        alice.cancel_submission(CancelRequest(id=hanging.submission_id))
        ended = platform.wait(alice, waiting.submission_id, timeout=90.0)  # the hang lasts fifteen minutes
        assert ended.status.name == "finished"
        assert alice.get_submission(hanging.submission_id).status.name == "cancelled"
        assert all(w.is_alive() for w in platform.workers)  # the cut ended the episode, not the worker
