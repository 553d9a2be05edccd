"""One deployment served to robots: the HTTPS server they act on, in front of the deployment's policy server.

What a robot reaches, and how it is let in: `/ping` answers anyone (the SDK asks it whether an act still
runs); every other call presents the worker's direct secret and the robot's session (`X-Seq-Session`), which
must hold a live seat on this worker (read from the database every `SEATS_EVERY_S`: a seat given back, run
out, or whose key was revoked is refused 401 within that time, and the SDK goes back to the gateway). Every
answer names the formats this worker reads (`X-Seq-Act-Formats`): msgpack bodies, observations posted as the
robot makes them, and acts that call the policy with nothing (its newest observation).

Each episode plays on a wire session of its own to the policy's server, so acts of several robots that
arrive together reach the policy together and a policy that batches still does.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from yardstick.core.captures import EpisodeFile
from yardstick.wire.address import RemoteEndpoint
from yardstick.wire.errors import PeerDisconnected, ProtocolError, RemoteError, WireError
from yardstick.wire.session import open_session
from yardstick.worker.act_server import seq_msgpack
from yardstick.worker.act_server.certs import Certificate
from yardstick.worker.act_server.episodes import Episode, Episodes, FramesMissing, TooManyFrames

__all__ = ["FORMATS", "ActServer"]

FORMATS_HEADER: Final = "X-Seq-Act-Formats"
FORMATS: Final = f"{seq_msgpack.FORMAT}, x-seq-observe/1, x-seq-call/1"
SESSION_HEADER: Final = "x-seq-session"
RID_HEADER: Final = "X-Seq-Request-Id"
SEATS_EVERY_S: Final = 0.5
ENDED_KEPT: Final = 4096  # episodes a worker remembers were ended, so that a late post opens no journal
# An act with no observation before it in its episode: a robot's first, or its first after the SDK moved it
# to another worker (the episode begins anew there, handed none of the old one's observations).
BEFORE_OBSERVING: Final = (
    "act() with no observation before it in this episode: the policy answers from the episode's newest"
    " observation, and a robot moved to another worker begins its episode anew there; hand it one with"
    " policy.observe(x), then act()"
)


def _error(status: int, code: str, detail: str, **details: Any) -> JSONResponse:
    body: dict[str, Any] = {"detail": detail, "code": code, "retryable": status in (429, 502, 503, 504)}
    if details:
        body["details"] = details
    return JSONResponse(body, status_code=status, headers={FORMATS_HEADER: FORMATS})


class ActServer:
    """`policy` is the deployment's policy server (its wire endpoint); `seated` says the sessions seated on
    this worker now; `capture` opens an episode's capture file (None: the deployment does not capture)."""

    def __init__(
        self,
        worker_id: int,
        policy: RemoteEndpoint,
        secret: str,
        certificate: Certificate,
        seated: Callable[[], frozenset[str]],
        *,
        host: str,
        request_timeout_s: float,
        capture: Callable[[str], EpisodeFile] | None = None,
        platform_secret: str = "",
    ) -> None:
        self.worker_id = worker_id
        self.policy = policy
        self._secret = secret
        self._platform_secret = platform_secret
        self._seated = seated
        self._seats: frozenset[str] = frozenset()
        self._seats_read = -float("inf")
        self._seats_lock = threading.Lock()
        self.request_timeout_s = request_timeout_s
        self.capture = capture
        self.episodes = Episodes()
        self.last_act = time.monotonic()
        self.failed: str | None = None  # why the policy's server can serve no more
        self._running: dict[str, float] = {}  # request id -> when its act began
        self._captured: dict[str, EpisodeFile] = {}
        self._captured_lock = threading.Lock()  # an episode's observe and act threads may both open its file
        # Episodes whose journal ended, newest last (at most ENDED_KEPT): a post still on its way when the
        # robot ended its episode must not open the journal again after its 'end'.
        self._ended: dict[str, None] = {}
        app = Starlette(
            routes=[
                Route("/ping", self._ping, methods=["GET"]),
                Route("/observe", self._observe, methods=["POST"]),
                Route("/act", self._act, methods=["POST"]),
                Route("/act/episode_end", self._episode_end, methods=["POST"]),
                Route("/robots", self._robots, methods=["GET"]),
                Route("/robots/plans", self._plan, methods=["POST"]),
            ]
        )
        config = uvicorn.Config(
            app,
            host=host,
            port=0,
            log_level="warning",
            lifespan="off",
            ssl_certfile=str(certificate.cert_file),
            ssl_keyfile=str(certificate.key_file),
            timeout_keep_alive=300,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"act-server-{worker_id}", daemon=True)
        self.fingerprint = certificate.fingerprint
        self.url = ""

    def start(self, timeout_s: float = 30.0) -> str:
        """Serve; the address robots reach once it listens."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the act server did not start within {timeout_s:g} s")
            time.sleep(0.02)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"https://{host}:{port}"
        return self.url

    def busy(self) -> bool:
        """Whether a robot has an episode open here (the worker is not idle, however long since an act)."""
        return bool(self.episodes.all())

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        for episode in self.episodes.all():
            self._finish(episode, clean=False)

    # --- who may call -----------------------------------------------------------------------------------

    def _refused(self, request: Request) -> JSONResponse | None:
        header = request.headers.get("authorization", "")
        presented = header[7:].strip() if header[:7].lower() == "bearer " else ""
        if not presented or not hmac.compare_digest(presented, self._secret):
            return _error(401, "unauthenticated", "this worker's direct secret was not presented")
        session = request.headers.get(SESSION_HEADER, "")
        if not self._holds_seat(session):
            return _error(
                401,
                "unauthenticated",
                "this robot holds no seat on this worker (released, run out, or its key revoked):"
                " connect again through the platform",
            )
        return None

    def _not_the_platform(self, request: Request) -> JSONResponse | None:
        """Refused unless the call presents the platform's own secret for this worker (a robot's direct
        secret reads no other robot's episode)."""
        header = request.headers.get("authorization", "")
        presented = header[7:].strip() if header[:7].lower() == "bearer " else ""
        if not self._platform_secret or not hmac.compare_digest(presented, self._platform_secret):
            return _error(401, "unauthenticated", "the platform's secret for this worker was not presented")
        return None

    def _holds_seat(self, session: str) -> bool:
        """Whether `session` holds a live seat here: a seat read within `SEATS_EVERY_S` is believed; one
        not among those read is looked up afresh (it may have been taken since the last read)."""
        seats = self._seats_now()
        return session in seats or session in self._seats_now(fresh=True)

    def _seats_now(self, fresh: bool = False) -> frozenset[str]:
        with self._seats_lock:
            if fresh or time.monotonic() - self._seats_read > SEATS_EVERY_S:
                self._seats = self._seated()
                self._seats_read = time.monotonic()
            return self._seats

    # --- routes -----------------------------------------------------------------------------------------

    async def _ping(self, request: Request) -> JSONResponse:
        asked = request.query_params.get("act")
        body: dict[str, Any] = {"ok": True}
        if asked:
            began = self._running.get(asked)
            body["act"] = (
                {"running": True, "for_s": round(time.monotonic() - began, 3)}
                if began is not None
                else {"running": False}
            )
        return JSONResponse(body, headers={FORMATS_HEADER: FORMATS})

    async def _observe(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            body = seq_msgpack.unpack(await request.body())
            episode_id = str(body["episode_id"])
            frames = [(int(f["seq"]), f["inputs"]) for f in body.get("frames") or []]
            skipped = [int(n) for n in body.get("skipped") or []]
        except (ValueError, KeyError, TypeError) as exc:
            return _error(
                400,
                "invalid_request",
                f"an observe body is {{episode_id, frames: [{{seq, inputs}}], skipped}}: {exc}",
            )
        session = request.headers.get(SESSION_HEADER, "")
        try:
            # On a thread of its own: the journal's write of a post's images is not the event loop's to wait
            # for (every robot's posts and acts are read there).
            episode, _ = await run_in_threadpool(
                self.episodes.observed, episode_id, session, frames, skipped, self._capture_observations
            )
        except TooManyFrames as exc:
            return _error(413, "payload_too_large", str(exc), reason="frames_over_limit")
        return self._answer(request, {"through": episode.through()})

    def _capture_observations(self, episode_id: str, fresh: list[tuple[int, Any]]) -> None:
        captured, now = self._capture_of(episode_id), time.time()
        for number, inputs in fresh:
            self._journal(captured, "observe", now, step=number, observation=inputs)

    @staticmethod
    def _journal(captured: EpisodeFile | None, kind: str, ts: float, **fields: Any) -> None:
        """A line of an episode's capture, where it has one: a journal that cannot be written (a full disk)
        costs the robot nothing, whichever call it was writing for."""
        if captured is not None:
            with contextlib.suppress(OSError):
                captured.write(kind, ts, **fields)

    async def _act(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if self.failed is not None:
            return _error(
                503, "unavailable", f"this worker can serve no more: {self.failed}", reason="draining"
            )
        raw = await request.body()
        try:
            if (request.headers.get("content-type") or "").startswith(seq_msgpack.MEDIA_TYPE):
                payload = seq_msgpack.unpack(raw)
            else:
                payload = json.loads(raw or b"{}")
            if not isinstance(payload, dict) or not isinstance(payload.get("episode_id"), str):
                raise ValueError("an act names its episode_id")
        except ValueError as exc:
            return _error(400, "invalid_request", f"the act's body: {exc}")
        rid = request.headers.get(RID_HEADER) or ""
        session = request.headers.get(SESSION_HEADER, "")
        self.last_act = time.monotonic()
        if rid:
            self._running[rid] = time.monotonic()
        try:
            return await run_in_threadpool(self._serve_act, request, payload, session)
        finally:
            self._running.pop(rid, None)
            self.last_act = time.monotonic()

    def _serve_act(self, request: Request, payload: Mapping[str, Any], session: str) -> Response:
        episode = self.episodes.of(str(payload["episode_id"]), session)
        with episode.lock:
            earlier: list[tuple[int, Any]] = []
            again = False
            if "inputs" in payload:  # an act that carries its observation (an SDK before observe())
                observation = payload["inputs"]
                number = episode.acts
            else:
                asked = payload.get("seq")
                if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
                    return _error(400, "invalid_request", BEFORE_OBSERVING, reason="no_observation")
                number = asked
                try:
                    handed = episode.handed
                    earlier, observation = self.episodes.take_before(episode, number)
                    again = handed >= number and episode.acts > 0  # nothing new since the last act
                except FramesMissing as missing:
                    return _error(
                        409, "conflict", str(missing), reason="frames_missing", **{"from": missing.first}
                    )
            began = time.perf_counter()
            try:
                outputs = self._infer(episode, payload, observation, number, earlier, again)
            except RemoteError as exc:
                return _error(500, "policy_error", f"the policy raised: {exc}")
            except TimeoutError:
                return _error(
                    504, "timeout", f"the policy did not answer within {self.request_timeout_s:g} s"
                )
            except (PeerDisconnected, ProtocolError, WireError, OSError) as exc:
                self._drop_wire(episode)
                self.failed = f"its policy server went away ({exc})"
                return _error(503, "unavailable", f"the policy's server stopped: {exc}", reason="draining")
            episode.acts += 1
            self._journal(self._capture_of(episode.id), "act", time.time(), step=number, outputs=outputs)
            handler_ms = (time.perf_counter() - began) * 1000.0
        return self._answer(request, {"outputs": outputs, "perf": {"handler_ms": round(handler_ms, 3)}})

    def _infer(
        self,
        episode: Episode,
        payload: Mapping[str, Any],
        observation: Any,
        number: int,
        earlier: list[tuple[int, Any]],
        again: bool,
    ) -> Any:
        if episode.wire is None:
            params = payload.get("params") if isinstance(payload.get("params"), dict) else {}
            episode.wire = open_session(
                self.policy, params=params, reply_timeout=self.request_timeout_s, startup_timeout=30.0
            )
        seed = payload.get("seed")
        about = {"task": "robot", "seed": seed if isinstance(seed, int) else 0, "trial": 0}
        episode.wire.ask(
            observation,
            seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
            episode=about,
            step=number - 1 if "inputs" not in payload else number,
            observed=earlier,
            again=again,
            plans=episode.take_plans(),
        )
        result, _ = episode.wire.answer()
        return result

    async def _robots(self, request: Request) -> Response:
        """The robots' open episodes as a planner reads them: each robot's session (its first 8), its
        episode, its newest observation and its step, and the plans it was handed."""
        refused = self._not_the_platform(request)
        if refused is not None:
            return refused
        robots = [
            {
                "session": episode.session[:8],
                "episode": episode.id,
                "step": max(episode.through() - 1, 0),
                "observation": episode.latest if episode.latest is not None else _newest(episode),
                "plans": list(episode.plans),
            }
            for episode in self.episodes.all()
        ]
        return Response(seq_msgpack.pack({"robots": robots}), media_type=seq_msgpack.MEDIA_TYPE)

    async def _plan(self, request: Request) -> Response:
        """One plan for the robot whose session begins `session`, appended to its open episode's
        `seq.plans` at its next act; 404 when it has none open here."""
        refused = self._not_the_platform(request)
        if refused is not None:
            return refused
        prefix = request.query_params.get("session") or ""
        try:
            value = seq_msgpack.unpack(await request.body()).get("value")
        except (ValueError, AttributeError) as exc:
            return _error(400, "invalid_request", f"a plan's body is {{value}}: {exc}")
        episode = self.episodes.of_session(prefix) if len(prefix) >= 8 else None
        if episode is None:
            return _error(404, "not_found", f"no robot {prefix!r} has an episode open on this worker")
        with episode.lock:
            entry = episode.planned(value)
        return JSONResponse({"episode": episode.id, "step": entry["step"]})

    async def _episode_end(self, request: Request) -> Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        try:
            episode_id = str(json.loads(await request.body() or b"{}")["episode_id"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "invalid_request", "an episode's end names its episode_id")
        episode = self.episodes.end(episode_id)
        if episode is not None:
            await run_in_threadpool(self._finish, episode, True)
        return self._answer(request, {"ended": episode is not None})

    # --- episodes' ends and captures --------------------------------------------------------------------

    def sweep(self) -> None:
        """End the episodes no robot touched for a while, and those of robots whose seat went."""
        for episode in self.episodes.idle():
            self._finish(episode, clean=False)
        seats = self._seats_now(fresh=True)
        for episode in self.episodes.drop_sessions(lambda session: session in seats):
            self._finish(episode, clean=False)

    def _finish(self, episode: Episode, clean: bool) -> None:
        with episode.lock:
            self._drop_wire(episode, end=clean)
            with self._captured_lock:
                captured = self._captured.pop(episode.id, None)
                if clean:  # the robot ended it (an episode dropped for its silence may yet go on)
                    self._ended[episode.id] = None
                    if len(self._ended) > ENDED_KEPT:
                        del self._ended[next(iter(self._ended))]
            if clean:
                self._journal(captured, "end", time.time(), acts=episode.acts)

    @staticmethod
    def _drop_wire(episode: Episode, end: bool = False) -> None:
        wire, episode.wire = episode.wire, None
        if wire is None:
            return
        try:
            if end:
                wire.end_episode()
        except (WireError, OSError, TimeoutError):
            pass
        finally:
            wire.close()

    def _capture_of(self, episode_id: str) -> EpisodeFile | None:
        if self.capture is None:
            return None
        with self._captured_lock:
            found = self._captured.get(episode_id)
            if found is None and episode_id not in self._ended:
                try:
                    found = self._captured[episode_id] = self.capture(episode_id)
                except ValueError:
                    return None
            return found

    @staticmethod
    def _answer(request: Request, body: dict[str, Any]) -> Response:
        headers = {FORMATS_HEADER: FORMATS}
        if seq_msgpack.MEDIA_TYPE in (request.headers.get("accept") or ""):
            return Response(seq_msgpack.pack(body), media_type=seq_msgpack.MEDIA_TYPE, headers=headers)
        try:
            return JSONResponse(seq_msgpack.plain(body), headers=headers)
        except TypeError as exc:
            return _error(500, "policy_error", f"the policy's answer cannot go as JSON: {exc}")


def _newest(episode: Episode) -> Any:
    """The newest observation an episode holds that no act has used yet (None: it holds none)."""
    frames = dict(episode.frames)  # a copy: the act threads take from it meanwhile
    return frames[max(frames)] if frames else None
