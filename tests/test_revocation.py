"""What a revocation promises: a key revoked by the admin CLI — another process, straight in the database —
stops working in a running gateway within `AUTH_CACHE_S` (a second), as one revoked through the API stops
at once in the gateway that revoked it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, event

from deadlines import until
from platform_harness import running_platform, server_process
from yardstick.core import keys
from yardstick.core.accounts import AUTH_CACHE_S, AUTH_REFRESH_AFTER_S


class HeldKeyReads:
    """The first reads of API keys on a database, each held until the test releases it: `began[i]` is set as
    the i-th is held, `released[i]` lets it go."""

    def __init__(self, count: int) -> None:
        self.began = [threading.Event() for _ in range(count)]
        self.released = [threading.Event() for _ in range(count)]
        self._held = 0

    def __call__(self, conn: object, cursor: object, statement: str, *rest: object) -> None:
        if "FROM api_keys" in statement and self._held < len(self.began):
            self._held += 1
            self.began[self._held - 1].set()
            self.released[self._held - 1].wait(10)


@contextmanager
def key_reads_held(engine: Engine, moment: str, count: int = 1) -> Iterator[HeldKeyReads]:
    """Hold the next `count` reads of API keys on `engine` at `moment` (`before_cursor_execute`: before the
    key is read; `after_cursor_execute`: read, not yet answered), all released at the end."""
    held = HeldKeyReads(count)
    event.listen(engine, moment, held)
    try:
        yield held
    finally:
        for hold in held.released:
            hold.set()
        event.remove(engine, moment, held)


def test_a_key_revoked_by_the_admin_cli_stops_working_in_a_running_gateway_within_a_second(
    tmp_path: Path, database_url: str
) -> None:
    assert AUTH_CACHE_S <= 1.0
    with running_platform(tmp_path, database_url, workers=0) as platform:
        key = platform.keys["alice"]
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{platform.url}/v1/users.me", headers=headers).status_code == 200  # cached now
        settings = platform.settings
        subprocess.run(
            [
                sys.executable,
                "-m",
                "yardstick.cli",
                "admin",
                "key",
                "revoke",
                key[: keys.PREFIX_LEN],
                "--data-dir",
                str(settings.data_dir),
                "--database",
                settings.database,
            ],
            check=True,
            capture_output=True,
        )
        until(
            lambda: httpx.get(f"{platform.url}/v1/users.me", headers=headers).status_code != 200,
            AUTH_CACHE_S + 0.5,
            "the revoked key to stop working",
        )
        assert httpx.get(f"{platform.url}/v1/users.me", headers=headers).status_code == 401
        # Another user's key, never revoked, goes on working.
        bob = {"Authorization": f"Bearer {platform.keys['bob']}"}
        assert httpx.get(f"{platform.url}/v1/users.me", headers=bob).status_code == 200


def test_a_key_revoked_through_the_api_stops_at_once_in_every_http_process_of_the_server(
    tmp_path: Path, database_url: str
) -> None:
    """With `--http-workers`, a revocation through the API in one HTTP process holds at once in the others,
    whose caches held the key (each request on a new connection, which the kernel hands to any of them)."""
    with server_process(tmp_path, database_url, extra=("--http-workers", "3", "--no-worker")) as served:
        served.start()
        key = served.keys["alice"]
        headers = {"Authorization": f"Bearer {key}"}
        for _ in range(30):
            assert httpx.get(f"{served.url}/v1/users.me", headers=headers).status_code == 200
        revoked = httpx.post(
            f"{served.url}/v1/keys.revoke", json={"prefix": key[: keys.PREFIX_LEN]}, headers=headers
        )
        assert revoked.status_code == 200, revoked.text
        for _ in range(30):
            assert httpx.get(f"{served.url}/v1/users.me", headers=headers).status_code == 401
        bob = {"Authorization": f"Bearer {served.keys['bob']}"}
        assert httpx.get(f"{served.url}/v1/users.me", headers=bob).status_code == 200
        assert served.stop() == 0


def test_requests_that_arrive_together_with_a_key_not_remembered_look_it_up_once(
    tmp_path: Path, database_url: str
) -> None:
    """Under load, a remembered caller expires while dozens of requests with its key are in flight: they wait
    for one lookup (PostgreSQL took seconds when each asked, and wrote the key's last use, at once)."""
    with running_platform(tmp_path, database_url, workers=0) as platform:
        assert any(_looked_up_once(platform, attempt) for attempt in range(TRIES)), SLOW


def _looked_up_once(platform: Any, attempt: int) -> bool:
    """One play of the burst: 30 requests at once with a key this gateway has not read; False when the
    machine was too slow for it to tell (the burst outlasted `AUTH_REFRESH_AFTER_S`, past which one renewal
    in the background is the promise, not a fault)."""
    lookups: list[str] = []

    def counted(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if "FROM api_keys" in statement:
            lookups.append(statement)

    headers = {"Authorization": f"Bearer {_fresh_key(platform, attempt)}"}  # not asked for yet here

    async def together() -> list[int]:
        async with httpx.AsyncClient(base_url=platform.url, headers=headers, timeout=LOADED_S) as client:
            answers = await asyncio.gather(*(client.get("/v1/users.me") for _ in range(30)))
        return [answer.status_code for answer in answers]

    event.listen(platform.platform.db.engine, "before_cursor_execute", counted)
    try:
        began = time.monotonic()
        assert asyncio.run(together()) == [200] * 30
        took = time.monotonic() - began
    finally:
        event.remove(platform.platform.db.engine, "before_cursor_execute", counted)
    if len(lookups) == 1:
        return True
    assert took >= AUTH_REFRESH_AFTER_S, f"{len(lookups)} lookups for one burst of {took:.2f} s"
    return False


def test_a_remembered_caller_is_read_anew_in_the_background_while_its_requests_go_on(
    tmp_path: Path, database_url: str
) -> None:
    """Past `AUTH_REFRESH_AFTER_S` a request is answered from memory while one lookup renews the caller, so a
    busy key's requests never wait on its expiry. Each lookup is held in the database here: a request that
    waited on one would not be answered."""
    with running_platform(tmp_path, database_url, workers=0) as platform:
        assert any(_renewed_in_the_background(platform, attempt) for attempt in range(TRIES)), SLOW


# A scenario timed against the caller's memory (`AUTH_CACHE_S`) proves nothing when a loaded machine outran
# that second: it is played again with a new key, up to this many times, before the machine is called slow.
TRIES = 4
# Each request's and wait's deadline: generous for a loaded two-core machine (httpx's own is 5 s). A slow
# answer does not pass the test; it only makes the attempt one that tells nothing (SLOW).
LOADED_S = 60.0
SLOW = f"too slow a machine to tell, {TRIES} times: each reading expired before the scenario was over"


def _fresh_key(platform: Any, attempt: int) -> str:
    return str(platform.keys["bob"] if attempt == 0 else platform.user(f"bob{attempt}", "acme"))


def _renewed_in_the_background(platform: Any, attempt: int) -> bool:
    """One play of the renewal scenario; False when the machine was too slow for it to tell anything."""
    headers = {"Authorization": f"Bearer {_fresh_key(platform, attempt)}"}
    assert httpx.get(f"{platform.url}/v1/users.me", headers=headers).status_code == 200
    read_at = time.monotonic()
    with key_reads_held(platform.platform.db.engine, "before_cursor_execute", count=2) as held:
        time.sleep(AUTH_REFRESH_AFTER_S + 0.05)
        assert httpx.get(f"{platform.url}/v1/users.me", headers=headers, timeout=5).status_code == 200
        assert held.began[0].wait(5), "no lookup began in the background"
        if time.monotonic() - read_at >= AUTH_CACHE_S:
            return False  # its reading expired already: the holds are released on the way out
        held.released[0].set()
        # Past the first reading's expiry the renewed caller answers, while the next renewal is held.
        time.sleep(max(0.0, read_at + AUTH_CACHE_S + 0.05 - time.monotonic()))
        assert httpx.get(f"{platform.url}/v1/users.me", headers=headers, timeout=5).status_code == 200
    return True


def test_a_lookup_that_read_a_key_before_its_revocation_does_not_keep_it_alive(
    tmp_path: Path, database_url: str
) -> None:
    """`yardstick logout` revokes the key it calls with, and its call may begin the key's background renewal,
    which can read the key before the revocation commits and finish after it. The key must stop at once all
    the same, for a request that waits on that lookup and every one after (it worked a second more: a CI
    failure)."""
    with running_platform(tmp_path, database_url, workers=0) as platform:
        assert any(_revoked_while_renewing(platform, attempt) for attempt in range(TRIES)), SLOW


def _revoked_while_renewing(platform: Any, attempt: int) -> bool:
    """One play of the revocation scenario; False when the machine was too slow for it to tell anything."""
    key = _fresh_key(platform, attempt)
    headers = {"Authorization": f"Bearer {key}"}

    def me() -> int:
        return httpx.get(f"{platform.url}/v1/users.me", headers=headers, timeout=LOADED_S).status_code

    assert me() == 200
    read_at = time.monotonic()
    with key_reads_held(platform.platform.db.engine, "after_cursor_execute") as held:
        time.sleep(AUTH_REFRESH_AFTER_S + 0.05)
        assert me() == 200
        assert held.began[0].wait(LOADED_S), "no renewal began in the background"
        revoked = httpx.post(
            f"{platform.url}/v1/keys.revoke",
            json={"prefix": key[: keys.PREFIX_LEN]},
            headers=headers,
            timeout=LOADED_S,
        )
        assert revoked.status_code == 200, revoked.text
        answers: list[int] = []

        waiting = threading.Thread(target=lambda: answers.append(me()))
        waiting.start()
        time.sleep(0.1)  # that request now waits on the held lookup
        held.released[0].set()
        waiting.join(LOADED_S)
        assert answers == [401]
        assert me() == 401
        return time.monotonic() - read_at < AUTH_CACHE_S
