"""Run one connection's sessions against a policy host: the v3 session protocol, and the openpi and
roboarena dialects at the root."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Sequence
from typing import Any

from yardstick.sdk.calls import inference_seed
from yardstick.sdk.episode import Episode
from yardstick.wire import codec
from yardstick.wire import protocol as p
from yardstick.wire.errors import PeerDisconnected, ProtocolError
from yardstick.wire.server.connection import ServerConnection
from yardstick.wire.server.host import HostState, PolicyHost
from yardstick.wire.server.session import ServerSession, SessionRefused

log = logging.getLogger("yardstick.server")

# How often a client waiting for a policy that is still loading hears that it is.
STATUS_EVERY_S = 1.0


async def _until_ready(host: PolicyHost, conn: ServerConnection | None) -> None:
    """Wait for the policy to be built, telling `conn` (when given) that it is loading meanwhile."""
    while host.state is HostState.LOADING:
        if conn is not None:
            await conn.send(codec.encode({p.STATUS: p.Status.LOADING.value}))
        await asyncio.get_running_loop().run_in_executor(None, host.wait_ready, STATUS_EVERY_S)
    if host.state is HostState.FAILED:
        raise SessionRefused(f"the policy could not be built: {host.failure}")


async def run_session(
    conn: ServerConnection, host: PolicyHost, query: Sequence[tuple[str, str]], transport_meta: dict[str, Any]
) -> None:
    """Sessions of the v3 protocol, one after another on this connection while the client asks for the
    next; the episode in hand is released however the connection ends."""
    session: ServerSession | None = None
    try:
        session = ServerSession(host, query, transport_meta)
        await _until_ready(host, conn)
        await conn.send(session.open())
        while True:
            raw = await conn.receive()
            reply = session.handle(raw, time.perf_counter())
            message = reply.message if reply.message is not None else await _answer(reply.pending)
            await conn.send(message)
            if reply.then == "close":
                session = None
                await conn.close(1000)
                return
            if reply.then == "next":
                await conn.send(session.open())
    except SessionRefused as refused:
        log.info("session refused: %s", refused)
        try:
            await conn.send(codec.encode({p.STATUS: p.Status.ERROR.value, p.ERROR: str(refused)}))
            await conn.close(p.CLOSE_REFUSED, str(refused))
        except PeerDisconnected:
            pass
    except PeerDisconnected:
        pass
    finally:
        if session is not None and session.episode is not None:
            # A client that left without ending its session still frees the policy's hold on it.
            host.release(session.episode)


async def _answer(pending: Any) -> bytes:
    assert pending is not None
    # An answer made inline is ready now: taking it without a trip through the event loop saves a wakeup.
    result: bytes = pending.result() if pending.done() else await asyncio.wrap_future(pending)
    return result


# What a roboarena client reads in the first frame; ours describe any policy: images as the policy says.
def _announcement(host: PolicyHost) -> dict[str, Any]:
    sizes = host.spec.image_sizes
    first = next(iter(sizes.values()), None)
    wrist = [k for k in sizes if "wrist" in k]
    return {
        **host.meta(),
        "image_resolution": list(first) if first else None,
        "needs_wrist_camera": bool(wrist),
        "n_external_cameras": len(sizes) - len(wrist),
        "needs_stereo_camera": False,
        "needs_session_id": False,
        "action_space": "any",
    }


async def run_dialect(conn: ServerConnection, host: PolicyHost) -> None:
    """The openpi dialect: the metadata frame, then one observation in, one `{"actions": chunk}` out.
    A request carrying `endpoint` speaks roboarena's: `infer` answers the chunk itself, `reset` starts a
    new episode. A policy that raises ends the connection: the traceback as text, then close 1011."""
    try:
        await _until_ready(host, None)
    except SessionRefused as refused:
        await conn.send_text(str(refused))
        await conn.close(p.CLOSE_INTERNAL_ERROR, "the policy could not be built")
        return
    episode = _fresh_episode(host)
    begun = False
    try:
        await conn.send(codec.encode(_announcement(host)))
        while True:
            request = codec.decode(await conn.receive(), writable=True)
            roboarena = isinstance(request, dict) and "endpoint" in request
            if roboarena:
                request = dict(request)
                endpoint = request.pop("endpoint")
                if endpoint == "reset":
                    await asyncio.wrap_future(host.release(episode))
                    episode, begun = _fresh_episode(host), False
                    await conn.send(codec.encode({"status": "reset successful"}))
                    continue
                if endpoint != "infer":
                    raise ProtocolError(f"endpoint {endpoint!r}: a roboarena request is 'infer' or 'reset'")
            if not begun:
                prompt = request.get("prompt") if isinstance(request, dict) else None
                if isinstance(prompt, str):
                    episode.description = prompt  # the dialects' only word of the task
                host.begin(episode)
                begun = True
            started = time.perf_counter()
            seed = inference_seed(episode.seed, episode.inferences) if host.wants_seed else 0
            answer = host.infer_now(episode, request, seed)
            if answer is None:
                answer = await asyncio.wrap_future(host.infer(episode, request, seed))
            if roboarena:
                await conn.send(codec.encode(answer.chunk))
            else:
                took = (time.perf_counter() - started) * 1000
                await conn.send(
                    codec.encode(
                        {
                            "actions": answer.chunk,
                            "server_timing": {"infer_ms": answer.infer_ms, "served_ms": took},
                        }
                    )
                )
    except PeerDisconnected:
        pass
    except Exception as exc:
        try:
            await conn.send_text("".join(traceback.format_exception(exc)))
            await conn.close(p.CLOSE_INTERNAL_ERROR, f"{type(exc).__name__}")
        except PeerDisconnected:
            pass
    finally:
        host.release(episode)


def _fresh_episode(host: PolicyHost) -> Episode:
    return Episode(id="", task="", description="", seed=0, trial=0, params=dict(host.spec.session_params))
