"""The client side of a policy session: dial (riding out a server that is still starting), shake hands,
ask for chunks, end episodes.

`V3Session` speaks the session protocol (`protocol.py`); `DialectSession` speaks openpi's (a metadata
frame, then one observation in and one `{"actions": ...}` out) or roboarena's (the same at the root, with
`endpoint: infer | reset`). Both present one interface to the engine: `info` (what the server said of
itself), `infer`, `end_episode`, `close`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from yardstick.wire import codec
from yardstick.wire import protocol as p
from yardstick.wire.address import HostPort, RemoteEndpoint, UnixSocket
from yardstick.wire.dialers import dialer
from yardstick.wire.errors import ConnectRefusal, ConnectRefused, PeerDisconnected, ProtocolError, RemoteError
from yardstick.wire.transport import Connection

# A refused credential may be a backend still warming behind an edge: this many tries, then give up.
FORBIDDEN_TRIES = 3
# The longest one dial may take; a server that is not up yet is dialled again until the start-up deadline.
OPEN_TIMEOUT_S = 10.0


@dataclass
class ServerInfo:
    """What a server says of the policy it serves. `hz`/`chunk` are None where it does not say (a stock
    openpi or roboarena server): the endpoint must state them."""

    hz: float | None
    action_chunk_len: int | None
    action_chunk_exec_len: int | None
    name: str
    next_session: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # Whether the policy's answers are asked ahead and swapped in after the chunk's rows (Yardstick's own
    # servers say so; every other server plays its answers at once).
    prefetch: bool = False
    # Whether it takes each observation a robot makes (a request's `observed`), not only those it answers.
    observes_each: bool = False


def headers_for(endpoint: RemoteEndpoint) -> dict[str, str] | None:
    if endpoint.token is None:
        return None
    kind = "Api-Key" if endpoint.wire == "openpi" else "Bearer"
    return {"Authorization": f"{kind} {endpoint.token}"}


def with_params(endpoint: RemoteEndpoint, params: Mapping[str, Any]) -> Any:
    """The endpoint's address with `params` added to its query (each value as a JSON literal)."""
    address = endpoint.address
    if not params or not isinstance(address, (HostPort, UnixSocket)):
        return address
    extra = urlencode({k: v if isinstance(v, str) else json.dumps(v) for k, v in params.items()})
    return replace(address, query=f"{address.query}&{extra}" if address.query else extra)


def dial_until(
    endpoint: RemoteEndpoint,
    address: Any,
    deadline: float,
    *,
    handshake: Callable[[Connection, float], dict[str, Any]],
) -> tuple[Connection, dict[str, Any]]:
    """Dial until a connection opens and `handshake(conn, deadline)` accepts it, retrying a server that is
    not up yet (COLD, SILENT) with backoff until `deadline` (time.monotonic), a refused credential a few
    times, and nothing FINAL. Returns the connection and what the handshake returned."""
    wire = dialer(endpoint.wire, ca_file=endpoint.ca_file)
    headers = headers_for(endpoint)
    delay, forbidden = 0.1, 0
    while True:
        left = deadline - time.monotonic()
        conn: Connection | None = None
        try:
            conn = wire.dial(address, headers, max(0.05, min(OPEN_TIMEOUT_S, left)))
            return conn, handshake(conn, deadline)
        except ConnectRefused as refused:
            if conn is not None:
                conn.close()
            if refused.refusal is ConnectRefusal.FINAL:
                raise
            if refused.refusal is ConnectRefusal.FORBIDDEN:
                forbidden += 1
                if forbidden >= FORBIDDEN_TRIES:
                    raise
            if time.monotonic() + delay > deadline:
                raise ConnectRefused(
                    refused.refusal, f"{refused} (still refused when the start-up deadline passed)"
                ) from refused
        except PeerDisconnected as dropped:
            # A server that accepted and dropped us while starting: as cold as a refusal.
            if conn is not None:
                conn.close()
            if time.monotonic() + delay > deadline:
                raise ConnectRefused(
                    ConnectRefusal.COLD, f"{dropped} (at start-up, until the deadline)"
                ) from dropped
        time.sleep(delay)
        delay = min(delay * 2, 2.0)


def _frame(conn: Connection, deadline: float) -> dict[str, Any]:
    try:
        message = codec.decode(conn.recv(timeout=max(0.05, deadline - time.monotonic())))
    except TimeoutError:
        raise ConnectRefused(
            ConnectRefusal.COLD, "the server said nothing before the start-up deadline"
        ) from None
    if not isinstance(message, dict):
        raise ProtocolError(f"the server answered {type(message).__name__} where a map was due")
    return message


def _ready(conn: Connection, deadline: float) -> dict[str, Any]:
    """Read status frames (waiting, loading) until `ready`; an `error` status is a FINAL refusal."""
    while True:
        frame = _frame(conn, deadline)
        status = frame.get(p.STATUS)
        if status == p.Status.READY:
            if not isinstance(frame.get(p.SESSION_ID), str):
                raise ProtocolError("a ready frame without a session_id")
            return frame
        if status == p.Status.ERROR:
            raise ConnectRefused(
                ConnectRefusal.FINAL, f"the server refused the session: {frame.get(p.ERROR)}"
            )
        if status not in (p.Status.WAITING, p.Status.LOADING):
            raise ProtocolError(f"a status frame says {status!r}; expected waiting, loading or ready")


def _info_from_meta(meta: Mapping[str, Any], fallback_name: str) -> ServerInfo:
    found = meta.get(p.YARDSTICK_META)
    ours: dict[str, Any] = found if isinstance(found, dict) else {}
    hz = meta.get(p.ACTION_FPS, ours.get("hz"))
    horizon = meta.get(p.ACTION_HORIZON_SEC)
    chunk = ours.get("action_chunk_len")
    if chunk is None and isinstance(hz, (int, float)) and isinstance(horizon, (int, float)) and hz > 0:
        chunk = max(1, round(horizon * hz))
    return ServerInfo(
        hz=float(hz) if isinstance(hz, (int, float)) else None,
        action_chunk_len=int(chunk) if chunk else None,
        action_chunk_exec_len=ours.get("action_chunk_exec_len"),
        name=str(ours.get("name") or fallback_name),
        next_session=bool(ours.get(p.NEXT_SESSION)),
        meta=dict(meta),
        prefetch=ours.get("prefetch") is True,
        observes_each=ours.get(p.OBSERVES_EACH) is True,
    )


class V3Session:
    """One connection of the v3 session protocol; one protocol session per episode."""

    def __init__(
        self,
        endpoint: RemoteEndpoint,
        *,
        params: Mapping[str, Any] | None = None,
        reply_timeout: float = 30.0,
        startup_timeout: float = 60.0,
    ) -> None:
        self.endpoint = endpoint
        self.reply_timeout = reply_timeout
        self._address = with_params(endpoint, params or {})
        deadline = time.monotonic() + startup_timeout
        self._conn, ready = dial_until(endpoint, self._address, deadline, handshake=_ready)
        self.session_id: str = ready[p.SESSION_ID]
        self.info = _info_from_meta(ready.get(p.META) or {}, endpoint.url)
        self._told = False

    def infer(
        self, observation: Any, *, seed: int | None = None, episode: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """The chunk the policy answers, and the server's timing. RemoteError when the policy raised (the
        session goes on); PeerDisconnected, TimeoutError or ProtocolError when the session is lost."""
        self.ask(observation, seed=seed, episode=episode)
        return self.answer()

    def ask(
        self,
        observation: Any,
        *,
        seed: int | None = None,
        episode: Mapping[str, Any] | None = None,
        step: int | None = None,
        observed: Sequence[tuple[int, Any]] = (),
        again: bool = False,
        plans: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Send one request; `answer` reads its reply. The episode is told with its first request;
        `observed` (step, observation) pairs made before this one go to a server that observes each,
        `again` tells it this one was handed before, and `plans` are what a planner wrote since."""
        request: dict[str, Any] = {p.SESSION_ID: self.session_id, p.OBSERVATION: observation}
        if seed is not None:
            request[p.SEED] = seed
        if step is not None:
            request[p.STEP] = step
        if observed and self.info.observes_each:
            request[p.OBSERVED] = [[number, seen] for number, seen in observed]
        if again and self.info.observes_each:
            request[p.AGAIN] = True
        if plans:
            request[p.PLANS] = [dict(entry) for entry in plans]
        if episode is not None and not self._told:
            request[p.EPISODE] = dict(episode)
            self._told = True
        self._conn.send(codec.encode(request))

    def answer(self) -> tuple[Any, dict[str, Any]]:
        reply = self._reply()
        if p.ERROR in reply:
            raise RemoteError(f"the policy raised on the server: {reply[p.ERROR]}")
        if p.RESULT not in reply:
            raise ProtocolError(f"a reply without result or error (keys {sorted(reply)})")
        timing = reply.get(p.TIMING)
        return reply[p.RESULT], dict(timing) if isinstance(timing, dict) else {}

    def end_episode(self) -> bool:
        """End this protocol session. True when the server opened the next on this connection; False when
        the connection is closed (the next episode dials anew)."""
        again = self.info.next_session
        request = {p.SESSION_ID: self.session_id, p.END_SESSION: True}
        if again:
            request[p.NEXT_SESSION] = True
        self._conn.send(codec.encode(request))
        ack = self._reply()
        if ack.get(p.END_SESSION) is not True:
            raise ProtocolError("the end of a session was not acknowledged")
        if not again:
            self.close()
            return False
        ready = _ready(self._conn, time.monotonic() + self.reply_timeout)
        self.session_id = ready[p.SESSION_ID]
        self._told = False
        return True

    def _reply(self) -> dict[str, Any]:
        message = codec.decode(self._conn.recv(timeout=self.reply_timeout))
        if not isinstance(message, dict):
            raise ProtocolError(f"a reply is a map, not {type(message).__name__}")
        if message.get(p.STATUS) == p.Status.ERROR:
            raise PeerDisconnected(f"the server ended the session: {message.get(p.ERROR)}")
        return message

    def close(self) -> None:
        self._conn.close()


class DialectSession:
    """openpi's dialect (or roboarena's, `roboarena=True`) on a server's root."""

    def __init__(
        self, endpoint: RemoteEndpoint, *, reply_timeout: float = 30.0, startup_timeout: float = 60.0
    ) -> None:
        self.endpoint = endpoint
        self.reply_timeout = reply_timeout
        self.roboarena = endpoint.wire == "roboarena"
        deadline = time.monotonic() + startup_timeout
        self._conn, announced = dial_until(endpoint, endpoint.address, deadline, handshake=_frame)
        self.info = _info_from_meta(
            {p.YARDSTICK_META: announced, p.ACTION_FPS: announced.get("hz")}, endpoint.url
        )
        self.info.next_session = self.roboarena  # roboarena resets on the connection; openpi re-dials
        self._prompt: str | None = None  # the episode's instruction, which each observation carries

    def infer(
        self, observation: Any, *, seed: int | None = None, episode: Mapping[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self.ask(observation)
        return self.answer()

    def ask(
        self,
        observation: Any,
        *,
        seed: int | None = None,
        episode: Mapping[str, Any] | None = None,
        step: int | None = None,
        observed: Sequence[tuple[int, Any]] = (),  # a dialect's server answers the newest alone
        again: bool = False,
        plans: Sequence[Mapping[str, Any]] = (),  # and has no episode state to hand them to
    ) -> None:
        if episode is not None:
            told = episode.get("description") or episode.get("task")
            self._prompt = str(told) if told else None
        if self.roboarena and not isinstance(observation, dict):
            raise ProtocolError("a roboarena observation is a map (the request adds its endpoint to it)")
        if isinstance(observation, dict) and self._prompt is not None and "prompt" not in observation:
            # The dialects' servers keep no episode: each observation names its task, as `prompt`.
            observation = {**observation, "prompt": self._prompt}
        if self.roboarena:
            observation = {**observation, "endpoint": "infer"}
        self._conn.send(codec.encode(observation))

    def answer(self) -> tuple[Any, dict[str, Any]]:
        reply = codec.decode(self._conn.recv(timeout=self.reply_timeout))
        if self.roboarena:
            return reply, {}
        if not isinstance(reply, dict) or "actions" not in reply:
            raise ProtocolError("an openpi reply is a map with 'actions'")
        timing = reply.get("server_timing")
        return reply["actions"], dict(timing) if isinstance(timing, dict) else {}

    def end_episode(self) -> bool:
        self._prompt = None
        if not self.roboarena:
            self.close()
            return False
        self._conn.send(codec.encode({"endpoint": "reset"}))
        # A reference roboarena server acknowledges a reset in text, which reads as a RemoteError here.
        with contextlib.suppress(RemoteError):
            self._conn.recv(timeout=self.reply_timeout)
        return True

    def close(self) -> None:
        self._conn.close()


Session = V3Session | DialectSession


def open_session(
    endpoint: RemoteEndpoint,
    *,
    params: Mapping[str, Any] | None = None,
    reply_timeout: float = 30.0,
    startup_timeout: float = 60.0,
) -> Session:
    if endpoint.wire in ("openpi", "roboarena"):
        return DialectSession(endpoint, reply_timeout=reply_timeout, startup_timeout=startup_timeout)
    return V3Session(endpoint, params=params, reply_timeout=reply_timeout, startup_timeout=startup_timeout)
