"""The rig's calls to the platform (`positronic.own_routes`' rig paths), with its key and session token.

The rig dials out: nothing at the robot listens on the lab's network for the platform. Every call carries the
rig's key and the token this process named itself with, so the platform knows a restarted process from the
one it replaced (`core.rigs`).
"""

from __future__ import annotations

import io
import logging
import secrets
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from yardstick.positronic.own_routes import RIG_BEGIN, RIG_CLAIM, RIG_HELLO, RIG_LAND, RIG_SESSION_HEADER

TIMEOUT_S: Final = 60.0
# Waits between tries of a call whose connection dropped (a keep-alive the server closed, a platform that
# restarts): about half a minute in all, then the error stands. Every rig call may be asked twice: `hello`
# and `claim` read, `begin` of the episode already begun and `land` of the episode already landed answer
# as the first time did (`core.rigs`).
RETRY_WAITS_S: Final = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
DROPPED: Final = (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError, httpx.WriteError)

log = logging.getLogger(__name__)


class RigRefused(RuntimeError):
    """The platform refused a call: the message is its own."""


@dataclass(frozen=True)
class Playbook:
    """A run the rig plays: its episodes still to play (in order), the endpoints by token with where to dial
    each, whether it is a blind sample, and the episodes an earlier process left mid-play (now `System`)."""

    submission: str
    blind: bool
    endpoints: dict[str, dict[str, Any]]
    episodes: list[dict[str, Any]]
    dropped: list[int]


class PlatformLink:
    def __init__(self, url: str, key: str, *, session: str | None = None) -> None:
        self.session = session or secrets.token_hex(16)
        self.http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}", RIG_SESSION_HEADER: self.session},
            timeout=TIMEOUT_S,
        )

    def close(self) -> None:
        self.http.close()

    def _post(self, path: str, **kwargs: Any) -> httpx.Response:
        for wait in RETRY_WAITS_S:
            try:
                answer = self.http.post(path, **kwargs)
                break
            except DROPPED as dropped:
                log.warning("%s: the connection dropped (%s); trying again in %g s", path, dropped, wait)
                time.sleep(wait)
        else:
            answer = self.http.post(path, **kwargs)
        if answer.status_code >= 400:
            try:
                said = answer.json().get("message") or answer.text
            except ValueError:
                said = answer.text
            raise RigRefused(f"{path}: {answer.status_code} {said}")
        return answer

    def hello(self) -> dict[str, Any]:
        said: dict[str, Any] = self._post(RIG_HELLO).json()
        return said

    def claim(self) -> Playbook | None:
        answer = self._post(RIG_CLAIM)
        if answer.status_code == 204:
            return None
        body = answer.json()
        return Playbook(
            body["submission"], bool(body["blind"]), body["endpoints"], body["episodes"], body["dropped"]
        )

    def begin(self, submission: str, index: int) -> None:
        self._post(RIG_BEGIN, params={"submission": submission, "index": index})

    def land(self, submission: str, index: int, folder: Path) -> dict[str, Any]:
        said: dict[str, Any] = self._post(
            RIG_LAND,
            params={"submission": submission, "index": index},
            content=tar_of(folder),
            headers={"Content-Type": "application/x-tar"},
        ).json()
        return said


def tar_of(folder: Path) -> bytes:
    """The episode folder's files as one tar, flat: what `RIG_LAND` takes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(folder.iterdir()):
            if path.is_file():
                archive.add(path, arcname=path.name)
    return buffer.getvalue()
