"""A recording's file made while its episode plays and filled when the episode ends: `FileAhead`.

A new folder and a new file each cost the kernel an inode, and that cost is the calling thread's CPU: 30-60 µs
on this machine's ext4 when it has been quiet, 150-250 µs for a minute after many files were deleted (ext4
finds room among what it freed). For a 3D replay that was as much as the rest of its recording together, on
the episode's thread, though the episode needs neither until it ends. So both are made on a thread of their
own (`yardstick-files`, one a process) as the episode starts: the folder if it is missing, and the file
opened under its `.partial` name. At the end the episode's thread writes the bytes into that file and renames
it (~15 µs); a file under its own name is whole, as everywhere in a recording.

The thread holds the interpreter's lock for a few lines around two system calls, which release it. It is a
`ProcessThread`: a forked process makes its own when first asked.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future
from pathlib import Path

from yardstick.replay3d.format import PARTIAL
from yardstick.replay3d.process_thread import ProcessThread

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC

FILES = ProcessThread("yardstick-files")


def _opened(partial: str) -> int:
    """`partial` created and open for writing, its folder made first where it is missing."""
    try:
        return os.open(partial, _FLAGS, 0o666)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        return os.open(partial, _FLAGS, 0o666)


def _removed(opened: Future[int], partial: str) -> None:
    """The file `opened` made, closed and removed (nothing, when making it failed)."""
    if opened.cancelled() or opened.exception() is not None:
        return
    with contextlib.suppress(OSError):
        os.close(opened.result())
    with contextlib.suppress(OSError):
        os.unlink(partial)


class FileAhead:
    """The file `target`, made on the files' thread from now on; `write` fills it once, or `abandon` removes
    it. What failed in making it (a full disk, a folder that cannot be made) is raised by `write`."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self._partial = os.fspath(target) + PARTIAL
        self._opened = FILES.submit(_opened, self._partial)
        self._done = False

    def write(self, data: bytes) -> Path:
        """`data` as the file's whole content, under its own name once written."""
        if self._done:
            raise RuntimeError(f"{self.target}: written or abandoned already")
        self._done = True
        handle = self._opened.result()
        try:
            try:
                left = memoryview(data)
                while left:
                    left = left[os.write(handle, left) :]
            finally:
                os.close(handle)
            os.rename(self._partial, self.target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._partial)
            raise
        return self.target

    def abandon(self) -> None:
        """No file after all: the one made is removed, now or once the thread has made it. Idempotent, and
        nothing once written."""
        if not self._done:
            self._done = True
            partial = self._partial
            self._opened.add_done_callback(lambda opened: _removed(opened, partial))
