"""One session of the protocol, whatever carries it: the transport feeds it messages and sends what it
answers. Answers that need the policy come back as futures, so an asyncio transport awaits them and a
threaded one blocks on them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from yardstick import __version__
from yardstick.sdk.calls import inference_seed
from yardstick.sdk.episode import Episode
from yardstick.wire import codec
from yardstick.wire import protocol as p
from yardstick.wire.errors import ProtocolError
from yardstick.wire.server.host import Answer, PolicyHost


class SessionRefused(Exception):
    """The session cannot open or go on (bad parameters, a foreign session id, a malformed message): the
    transport sends the error status and closes with 1008."""


def session_params(
    host: PolicyHost, query: Sequence[tuple[str, str]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The parameters a session asked for (each value a JSON literal, else text) and the values it runs
    with. Unknown and repeated names are refused."""
    requested: dict[str, Any] = {}
    for name, raw in query:
        if name in requested:
            raise SessionRefused(f"session parameter {name!r} is given twice")
        try:
            requested[name] = json.loads(raw)
        except json.JSONDecodeError:
            requested[name] = raw
    declared = host.spec.session_params
    unknown = sorted(set(requested) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise SessionRefused(f"unknown session parameters {unknown}: this policy takes {known}")
    return requested, {**declared, **requested}


@dataclass
class Reply:
    """What to send: `message` now, or `pending` once the policy answers. `then` says what follows:
    "go on", "close" (the session ended) or "next" (a new session opened on this connection)."""

    message: bytes | None = None
    pending: Future[bytes] | None = None
    then: str = "go on"


class ServerSession:
    def __init__(
        self, host: PolicyHost, query: Sequence[tuple[str, str]], transport_meta: dict[str, Any]
    ) -> None:
        self.host = host
        self.requested, self.effective = session_params(host, query)
        self._transport_meta = transport_meta
        self.session_id = ""
        self.episode: Episode | None = None
        self._begun = False

    def open(self) -> bytes:
        """The ready frame of a new session."""
        self.session_id = uuid.uuid4().hex
        self.episode = Episode(
            id=self.session_id, task="", description="", seed=0, trial=0, params=dict(self.effective)
        )
        self._begun = False
        spec = self.host.spec
        meta = {
            **self._transport_meta,
            p.ACTION_FPS: spec.hz,
            p.ACTION_HORIZON_SEC: spec.action_chunk_len / spec.hz,
            p.IMAGE_SIZES: {k: list(v) for k, v in spec.image_sizes.items()},
            p.CHECKPOINT_ID: _checkpoint(self.host),
            p.SESSION_PARAMS: self.requested,
            p.EFFECTIVE_PARAMS: self.effective,
            p.YARDSTICK_META: {**self.host.meta(), "version": __version__, p.NEXT_SESSION: True},
        }
        return codec.encode(
            {
                p.STATUS: p.Status.READY.value,
                p.PROTOCOL_VERSION_KEY: p.PROTOCOL_VERSION,
                p.SESSION_ID: self.session_id,
                p.META: meta,
            }
        )

    def handle(self, raw: bytes, arrived: float) -> Reply:
        """Answer one request. `arrived` is its perf_counter time, for the timing the reply reports."""
        try:
            request = codec.decode(raw, writable=True)
        except ProtocolError as exc:
            raise SessionRefused(f"a request that does not decode: {exc}") from None
        if not isinstance(request, dict):
            raise SessionRefused(f"a request is a map, not {type(request).__name__}")
        if request.get(p.SESSION_ID) != self.session_id:
            raise SessionRefused("the session id does not belong to this connection")
        episode = self.episode
        assert episode is not None
        if request.get(p.END_SESSION) is True:
            again = request.get(p.NEXT_SESSION) is True
            ack = codec.encode({p.SESSION_ID: self.session_id, p.END_SESSION: True})
            # The episode is over whether or not the policy let go of it cleanly: acknowledge either way.
            return Reply(
                pending=_chain(self.host.release(episode), lambda _: ack, lambda _: ack),
                then="next" if again else "close",
            )
        if p.OBSERVATION not in request:
            raise SessionRefused("a request carries an observation, or end_session: true")
        decoded = time.perf_counter()
        if not self._begun:
            self._tell(episode, request.get(p.EPISODE))
        seed = request.get(p.SEED)
        if not isinstance(seed, int) or isinstance(seed, bool):
            seed = inference_seed(episode.seed, episode.inferences) if self.host.wants_seed else 0
        step = request.get(p.STEP)
        if isinstance(step, int) and not isinstance(step, bool) and step >= 0:
            episode.step = step
        episode.earlier = _earlier(request.get(p.OBSERVED))
        episode.again = request.get(p.AGAIN) is True
        _plans_into(episode, request.get(p.PLANS))
        observation = request[p.OBSERVATION]
        try:
            # A quick policy with nothing queued answers here, without a trip to the slot thread.
            now = self.host.infer_now(episode, observation, seed)
        except Exception as exc:
            return Reply(message=_failed(exc))
        if now is not None:
            return Reply(message=_settled_now(lambda: _result(now, arrived, decoded)))
        answered = self.host.infer(episode, observation, seed)
        return Reply(pending=_chain(answered, lambda answer: _result(answer, arrived, decoded), _failed))

    def _tell(self, episode: Episode, about: Any) -> None:
        """What the client says of the episode (our clients do), then the policy's on-episode hook."""
        if isinstance(about, dict):
            episode.task = str(about.get("task", ""))
            episode.description = str(about.get("description", ""))
            episode.seed = int(about.get("seed", 0))
            episode.trial = int(about.get("trial", 0))
            space = about.get("action_space")
            if isinstance(space, (list, tuple)) and len(space) == 2:
                episode.action_space = (list(space[0]), list(space[1]))
        self._begun = True
        # The hook runs on the slot before this episode's first inference: the queue keeps the order.
        self.host.begin(episode)


def _result(answer: Answer, arrived: float, decoded: float) -> bytes:
    served = (time.perf_counter() - arrived) * 1000
    timing = {
        p.SERVED_MS: served,
        p.DECODE_MS: (decoded - arrived) * 1000,
        p.QUEUED_MS: answer.queued_ms,
        p.INFER_MS: answer.infer_ms,
        p.MODEL_MS: answer.infer_ms,
    }
    return codec.encode({p.RESULT: answer.chunk, p.TIMING: timing})


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _checkpoint(host: PolicyHost) -> str:
    weights = host.spec.weights
    if isinstance(weights, str):
        return weights
    if isinstance(weights, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(weights.items()))
    return host.reference


def _failed(exc: BaseException) -> bytes:
    return codec.encode({p.ERROR: _describe(exc)})


def _settled(
    finished: Future[Any], then: Callable[[Any], bytes], on_error: Callable[[BaseException], bytes]
) -> bytes:
    """The message for a resolved future: `then(result)`, or `on_error(exception)`."""
    try:
        exc = finished.exception()
        return on_error(exc) if exc is not None else then(finished.result())
    except Exception as failure:  # encoding the answer failed: the policy answered something unsendable
        return _failed(failure)


def _settled_now(make: Callable[[], bytes]) -> bytes:
    try:
        return make()
    except Exception as failure:  # the policy answered something that cannot be sent
        return _failed(failure)


def _chain(
    source: Future[Any], then: Callable[[Any], bytes], on_error: Callable[[BaseException], bytes]
) -> Future[bytes]:
    """A future of the message for `source`, made in the slot thread as it resolves: encoding there keeps
    the answer's buffers the policy's alone until they are packed."""
    out: Future[bytes] = Future()
    source.add_done_callback(lambda finished: out.set_result(_settled(finished, then, on_error)))
    return out


def _earlier(observed: Any) -> list[tuple[int, Any]]:
    """A request's `observed`, as (step, observation) pairs; a malformed one refused by name."""
    if observed is None:
        return []
    pairs = observed if isinstance(observed, list) else None
    if pairs is None or not all(_numbered(pair) for pair in pairs):
        raise SessionRefused("observed: a list of [step, observation] pairs")
    return [(int(pair[0]), pair[1]) for pair in pairs]


def _numbered(pair: Any) -> bool:
    """[step, observation], the step a whole number."""
    if not isinstance(pair, list) or len(pair) != 2:
        return False
    return isinstance(pair[0], int) and not isinstance(pair[0], bool)


# The most plans an episode keeps in `state["seq.plans"]`: the newest, as the contract keeps a planner's.
KEPT_PLANS = 256


def _plans_into(episode: Episode, plans: Any) -> None:
    """What a planner wrote for the robot, appended to the episode's `state["seq.plans"]` (a policy reads
    the newest as `episode.state["seq.plans"][-1]["value"]`)."""
    if not isinstance(plans, list) or not plans:
        return
    kept = episode.state.setdefault("seq.plans", [])
    kept.extend(dict(entry) for entry in plans if isinstance(entry, dict))
    del kept[:-KEPT_PLANS]
