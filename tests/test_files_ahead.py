"""A recording's file made on the files' thread while the episode plays, filled (or removed) at its end."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fork_helpers import holds_in_a_forked_child
from yardstick.engine.files_ahead import FILES, FileAhead
from yardstick.engine.recording import EpisodeRecorder, Recording

DEADLINE_S = 30.0


def made(file: FileAhead) -> int:
    """The file descriptor the files' thread opened (waiting for it, with a deadline)."""
    return file._opened.result(timeout=DEADLINE_S)


def test_a_file_and_its_missing_folders_are_made_ahead_and_whole_only_once_written(tmp_path: Path) -> None:
    target = tmp_path / "episodes" / "000007" / "replay.seqreplay"
    file = FileAhead(target)
    made(file)
    partial = target.with_name(target.name + ".partial")
    assert partial.is_file() and not target.exists()  # under its own name only once whole
    assert file.write(b"x" * 100_000) == target
    assert target.read_bytes() == b"x" * 100_000 and not partial.exists()
    with pytest.raises(RuntimeError, match="written or abandoned already"):
        file.write(b"again")
    file.abandon()  # nothing once written
    assert target.read_bytes() == b"x" * 100_000


def test_an_abandoned_file_is_removed_whether_or_not_the_thread_had_made_it(tmp_path: Path) -> None:
    early = FileAhead(tmp_path / "a" / "early.seqreplay")
    early.abandon()  # perhaps before the thread made it: removed once made
    late = FileAhead(tmp_path / "b" / "late.seqreplay")
    made(late)
    late.abandon()
    # The thread runs one task at a time, in order: once a later task ran, both removals have.
    FILES.submit(lambda: None).result(timeout=DEADLINE_S)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []
    with pytest.raises(RuntimeError, match="written or abandoned already"):
        late.write(b"too late")


def test_what_failed_in_making_the_file_is_raised_by_its_write(tmp_path: Path) -> None:
    (tmp_path / "episodes").write_text("a file where the folder goes")
    file = FileAhead(tmp_path / "episodes" / "000001" / "replay.seqreplay")
    with pytest.raises(NotADirectoryError):
        file.write(b"data")


def test_a_forked_process_makes_its_files_on_a_thread_of_its_own(tmp_path: Path) -> None:
    FileAhead(tmp_path / "parent.seqreplay").write(b"parent")  # the parent's thread made

    def child() -> bool:
        forgot = not FILES.started
        FileAhead(tmp_path / "child.seqreplay").write(b"child")
        return forgot and FILES.started

    assert holds_in_a_forked_child(child, DEADLINE_S)
    assert (tmp_path / "child.seqreplay").read_bytes() == b"child"


def test_a_replay_that_fails_mid_episode_leaves_no_file_behind(tmp_path: Path) -> None:
    calls = threading.Event()

    def state() -> object:
        calls.set()
        return "not a simulator"

    recorder = EpisodeRecorder.open(Recording(replay=True, folder=str(tmp_path)), 0, 50.0, state=state)
    recorder.frame(0, 0.0, {})
    assert calls.is_set() and recorder.close() == []
    assert recorder.error is not None and "replay" in recorder.error
    FILES.submit(lambda: None).result(timeout=DEADLINE_S)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
