"""Who is calling, for every router: the bearer key parsed once, its caller looked up once (cached by the
platform's `Authenticator`). A route that needs a caller depends on `Who`; one that serves anyone but reads
more for a caller, on `MaybeWho`. A missing or dead key is refused as `unauthenticated`, which the route's
door renders in its own error body."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from yardstick.core.accounts import Authenticator, Caller
from yardstick.core.keys import digest
from yardstick.core.planners import KEY_MARK as PLANNER_KEY_MARK
from yardstick.core.refusals import unauthenticated
from yardstick.core.robot_keys import ROBOT_KEY_MARK
from yardstick.http.services import platform_of


def bearer(request: Request) -> str | None:
    """The key of `Authorization: Bearer <key>`, or None."""
    header = request.headers.get("authorization", "")
    if header[:7].lower() != "bearer ":
        return None
    return header[7:].strip() or None


# The dependencies are `async`: FastAPI runs a plain `def` dependency in a thread of its pool, a trip that
# costs more than a remembered caller. Only a caller this process does not remember (a query, maybe a write)
# goes to a thread.


async def caller(request: Request) -> Caller:
    accounts = (await platform_of(request)).accounts
    key = bearer(request)
    if not key:
        raise unauthenticated()
    found, refresh_due = accounts.cached(key)
    if found is None:
        found = await _looked_up(accounts, key)
    elif refresh_due:
        _looking_up_for(accounts, key)  # read anew meanwhile; this request goes on with what is remembered
    if found is None:
        if key.startswith(ROBOT_KEY_MARK):
            raise unauthenticated(
                "a robot key reaches its deployment's robots' calls only (sequence_ai.connect, policy.label):"
                " the rest of the API takes the account's key"
            )
        if key.startswith(PLANNER_KEY_MARK):
            raise unauthenticated(
                "a planner key says into its planner only (sequence_ai.planner(name).observe): the rest of"
                " the API takes the account's key"
            )
        raise unauthenticated()
    # For the audit trail, which records the change once it is answered (`gateway.audit_trail`).
    request.state.yardstick_caller = found
    request.state.yardstick_key = key
    return found


# The lookups of keys under way, by event loop and key digest.
_looking_up: dict[tuple[int, str], asyncio.Future[Caller | None]] = {}


async def _looked_up(accounts: Authenticator, key: str) -> Caller | None:
    """The caller of `key` from the database, one lookup at a time for each key in an event loop: when a
    remembered caller expires under load, every request then in flight with that key waits for the one
    lookup instead of each asking the database at once (and each writing the key's last use, which
    PostgreSQL does one after another on the key's row: seconds, with fifty requests in flight)."""
    # Shielded: a request that goes away does not cancel the lookup the others wait for.
    return await asyncio.shield(_looking_up_for(accounts, key))


def _looking_up_for(accounts: Authenticator, key: str) -> asyncio.Future[Caller | None]:
    """The lookup of `key` under way in this event loop, started if there is none."""
    entry = (id(asyncio.get_running_loop()), digest(key))
    pending = _looking_up.get(entry)
    if pending is None:
        pending = asyncio.ensure_future(run_in_threadpool(accounts.look_up, key))
        _looking_up[entry] = pending
        pending.add_done_callback(lambda done: _finished_lookup(entry, done))
    return pending


def _finished_lookup(entry: tuple[int, str], done: asyncio.Future[Caller | None]) -> None:
    _looking_up.pop(entry, None)
    if not done.cancelled():
        # Retrieved, so a background refresh that failed (the database away) is not logged as lost: the
        # next request whose remembered caller has expired asks again, and is answered with the error.
        done.exception()


async def maybe_caller(request: Request) -> Caller | None:
    """The caller when a key is given (a key given and refused is still refused), else None."""
    return await caller(request) if bearer(request) is not None else None


def audit_target(request: Request, target: str) -> None:
    """Name what a change made, for the audit trail, where its path names nothing (a create)."""
    request.state.yardstick_target = target


def unaudited(request: Request) -> None:
    """Leave this request out of the audit trail: it was accepted and changed nothing (a dry run)."""
    request.state.yardstick_unaudited = True


Who = Annotated[Caller, Depends(caller)]
MaybeWho = Annotated[Caller | None, Depends(maybe_caller)]
