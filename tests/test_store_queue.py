"""The leased episode queue on SQLite and PostgreSQL: no episode leased twice, none lost, none counted
twice, and leases that run out give their episodes back."""

from __future__ import annotations

import threading
import time

import pytest

from yardstick.store.db import Database
from yardstick.store.models import Org, Run, RunEpisode, User
from yardstick.store.queue import EpisodeQueue


@pytest.fixture
def db(migrated_db: Database) -> Database:
    return migrated_db


def submission(db: Database, episodes: int, of: int | None = None) -> int:
    """A submission of `episodes` queued episodes: of a new org, or of the org of submission `of`."""
    with db.writing() as session:
        user = User(login=f"user-{time.perf_counter_ns()}")
        session.add(user)
        if of is None:
            org = Org(slug=f"org-{time.perf_counter_ns()}")
            session.add(org)
            session.flush()
            org_id = org.id
        else:
            found = session.get(Run, of)
            assert found is not None
            org_id = found.org_id
        session.flush()
        sub = Run(
            org_id=org_id, user_id=user.id, plan_digest="x", plan={}, resolved={}, episodes_total=episodes
        )
        session.add(sub)
        session.flush()
        session.add_all(
            RunEpisode(
                submission_id=sub.id,
                index=i,
                task_pos=0,
                task_id="reach-v3",
                benchmark_task="reach-v3",
                endpoint="a",
                trial=i,
                seed=i,
            )
            for i in range(episodes)
        )
        return sub.id


def test_leases_take_the_oldest_submission_in_index_order_and_start_it(db: Database) -> None:
    first = submission(db, 5)
    second = submission(db, 3, of=first)
    queue = EpisodeQueue(db)
    batch = queue.lease("w1", 3)
    assert [e.submission_id for e in batch] == [first] * 3 and [e.index for e in batch] == [0, 1, 2]
    assert queue.lease("w2", 10)[0].index == 3  # the rest of the oldest first
    assert [e.submission_id for e in queue.lease("w2", 10)] == [second] * 3
    with db.reading() as session:
        assert session.get(Run, first).status == "running"  # type: ignore[union-attr]


def test_a_free_worker_takes_the_org_playing_least_so_one_orgs_eval_cannot_hold_every_worker(
    db: Database,
) -> None:
    big = submission(db, 40)
    later = submission(db, 40, of=big)
    other = submission(db, 6)  # filed last, by another org
    queue = EpisodeQueue(db)
    assert {e.submission_id for e in queue.lease("w1", 4)} == {big}
    # The big eval's org holds a worker: the next takes the other org's, filed after both of its.
    assert {e.submission_id for e in queue.lease("w2", 4)} == {other}
    # Both orgs hold one: the oldest submission goes on.
    assert {e.submission_id for e in queue.lease("w3", 4)} == {big}
    assert {e.submission_id for e in queue.lease("w4", 4)} == {other}
    queue.release_all("w2")
    queue.release_all("w4")
    assert {e.submission_id for e in queue.lease("w5", 6)} == {other}
    assert later not in {e.submission_id for e in queue.lease("w6", 4)}  # its org's oldest first


def test_concurrent_workers_never_lease_the_same_episode(db: Database) -> None:
    submission(db, 60)
    queue = EpisodeQueue(db)
    taken: dict[str, list[int]] = {}

    def work(owner: str) -> None:
        mine: list[int] = []
        while batch := queue.lease(owner, 4):
            mine.extend(e.id for e in batch)
        taken[owner] = mine

    threads = [threading.Thread(target=work, args=(f"w{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [i for ids in taken.values() for i in ids]
    assert len(everything) == 60 and len(set(everything)) == 60


def test_an_expired_lease_puts_episodes_back_and_the_late_result_is_discarded(db: Database) -> None:
    submission(db, 2)
    queue = EpisodeQueue(db, lease_s=0.2)
    [lost, _] = queue.lease("dead", 2)
    time.sleep(0.3)
    again = queue.lease("alive", 2)
    assert sorted(e.index for e in again) == [0, 1] and all(e.attempt == 2 for e in again)
    assert queue.complete("dead", lost.id, {"success": True}).accepted is False
    assert queue.complete("alive", again[0].id, {"success": True}).accepted is True


def test_exactly_one_completion_is_the_last(db: Database) -> None:
    sub = submission(db, 3)
    queue = EpisodeQueue(db)
    batch = queue.lease("w", 3)
    outcomes = [queue.complete("w", e.id, {"n": e.index}) for e in batch]
    assert [c.last for c in outcomes] == [False, False, True]
    assert queue.complete("w", batch[0].id, {}).accepted is False  # already done: not counted twice
    with db.reading() as session:
        assert session.get(Run, sub).episodes_done == 3  # type: ignore[union-attr]


def test_a_run_whose_last_episode_landed_but_was_never_finished_is_found_after_a_grace(db: Database) -> None:
    """The worker that lands a run's last episode finishes it in a second transaction; cut between the two
    (its connection terminated, the process killed), the run would stay active for ever. The sweep finds it,
    once the landing worker has had its time."""
    sub = submission(db, 2)
    other = submission(db, 2)
    queue = EpisodeQueue(db)
    batch = queue.lease("w", 2)
    assert [queue.complete("w", e.id, {"n": e.index}).last for e in batch] == [False, True]
    half = queue.lease("w", 2)
    queue.complete("w", half[0].id, {"n": 0})  # `other`: one episode still leased
    assert sub not in queue.unfinished()  # within the grace: its worker may be finishing it now
    assert queue.unfinished(grace_s=0) == [sub]
    with db.writing() as session:
        run = session.get(Run, sub)
        assert run is not None
        run.status = "finished"
    assert queue.unfinished(grace_s=0) == []
    assert other not in queue.unfinished(grace_s=0)


def test_renewal_keeps_a_lease_and_release_hands_it_back(db: Database) -> None:
    submission(db, 2)
    queue = EpisodeQueue(db, lease_s=0.3)
    batch = queue.lease("w", 2)
    for _ in range(3):
        time.sleep(0.15)
        assert queue.renew("w", [e.id for e in batch]) == 2
    assert queue.lease("other", 2) == []  # still held
    queue.release("w", [e.id for e in batch])
    again = queue.lease("other", 2)
    assert len(again) == 2 and all(e.attempt == 1 for e in again)  # a hand-back is not an attempt


def test_an_episode_lost_too_often_fails_as_the_platforms_fault(db: Database) -> None:
    sub = submission(db, 1)
    queue = EpisodeQueue(db, lease_s=0.05, max_attempts=2)
    for _ in range(2):
        assert queue.lease("crashy", 1)
        time.sleep(0.1)
    assert queue.lease("next", 1) == []
    assert queue.abandoned() == [(sub, "its worker was lost 2 times running it")]


def test_a_stopped_submission_leaves_the_queue(db: Database) -> None:
    sub = submission(db, 4)
    queue = EpisodeQueue(db)
    queue.lease("w", 1)
    queue.stop_submission(sub)
    assert queue.lease("w2", 4) == []
