"""A policy across a wire, driven by the engine like any other.

Its rate and chunk come from the server's handshake (or, for an openpi or roboarena server that does not
say, from `--param policy.hz=…`, `policy.action_chunk_len=…`, `policy.action_chunk_exec_len=…`); other
`policy.` params are the session's parameters. Each episode is a session of its own. A connection is
reused for the next episode when the server can open the next session on it, and dialled again after it
drops; episodes that are playing when a server fails fail with a reason that says what happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yardstick.engine.failures import Failed, FailureKind
from yardstick.sdk.episode import Episode
from yardstick.sdk.errors import SpecError
from yardstick.sdk.specs import POLICY_FIELDS, PolicySpec, validated
from yardstick.wire.address import RemoteEndpoint
from yardstick.wire.errors import ConnectRefused, PeerDisconnected, ProtocolError, RemoteError, WireError
from yardstick.wire.session import ServerInfo, Session, open_session


class RemotePolicyError(Failed):
    """The policy server failed an episode: the message says how, the kind what it was (refused, dropped,
    timed out, raised, answered something malformed)."""


def remote_spec(info: ServerInfo, endpoint: RemoteEndpoint, overrides: Mapping[str, Any]) -> PolicySpec:
    """The declaration the engine plays a remote policy by: the server's word, then the run's overrides."""
    hz = overrides.get("hz", info.hz)
    if hz is None:
        raise SpecError(
            f"policy {endpoint.url}",
            "hz",
            "the server does not say its rate: give it with --param policy.hz=<steps a second>",
        )
    chunk = int(overrides.get("action_chunk_len", info.action_chunk_len or 1))
    replan = overrides.get("action_chunk_exec_len", info.action_chunk_exec_len)
    spec: PolicySpec = validated(
        PolicySpec,
        name=info.name,
        hz=float(hz),
        action_chunk_len=chunk,
        action_chunk_exec_len=min(int(replan), chunk) if replan else None,
        infer_keywords=frozenset({"seed", "episode"}),
        prefetch=info.prefetch,
    )
    return spec


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rate and chunk of a server that does not say them (the policy's fields), and everything else in
    `policy.` params, which goes to the session as its parameters."""
    playback = {k: v for k, v in params.items() if k in POLICY_FIELDS}
    session = {k: v for k, v in params.items() if k not in POLICY_FIELDS}
    return playback, session


def probe_spec(endpoint: RemoteEndpoint, params: Mapping[str, Any], *, startup_timeout: float) -> PolicySpec:
    """Open one session to read what the server declares, then end it."""
    playback, session_params = split_params(params)
    session = _open(endpoint, session_params, reply_timeout=30.0, startup_timeout=startup_timeout)
    try:
        return remote_spec(session.info, endpoint, playback)
    finally:
        session.close()


def _open(
    endpoint: RemoteEndpoint, params: Mapping[str, Any], *, reply_timeout: float, startup_timeout: float
) -> Session:
    try:
        return open_session(
            endpoint, params=params, reply_timeout=reply_timeout, startup_timeout=startup_timeout
        )
    except ConnectRefused as refused:
        raise RemotePolicyError(
            f"the policy server at {endpoint.url} refused the session ({refused.refusal.value}): {refused}",
            FailureKind.SESSION_REFUSED,
        ) from refused
    except (WireError, OSError) as exc:
        raise RemotePolicyError(
            f"could not open a session on {endpoint.url}: {exc}", FailureKind.SESSION_REFUSED
        ) from exc


class RemotePolicy:
    """The engine's PolicyDriver for a policy server. One session per playing episode (a vectorized
    benchmark plays several at once); idle connections wait for the next episode."""

    wants_seed = True
    asks_together = True

    def __init__(
        self,
        endpoint: RemoteEndpoint,
        params: Mapping[str, Any],
        *,
        reply_timeout: float = 30.0,
        startup_timeout: float = 60.0,
        reconnect_timeout: float = 10.0,
    ) -> None:
        self.endpoint = endpoint
        # Who failed, for failures' messages (made once, not on every call): a server on this machine's
        # socket is the platform's own, its path nothing a user can act on.
        self._server = (
            "the policy's server"
            if endpoint.wire == "websocket_unix"
            else f"the policy server at {endpoint.url}"
        )
        self._playback, self._session_params = split_params(params)
        self._reply_timeout = reply_timeout
        self._startup_timeout = startup_timeout
        first = self._open()
        # Once up, a server that goes away is waited for less long: every episode waiting pays it.
        self._startup_timeout = reconnect_timeout
        self.spec = remote_spec(first.info, endpoint, self._playback)
        self._idle: list[Session] = [first]
        self._playing: dict[str, Session] = {}

    def _open(self) -> Session:
        return _open(
            self.endpoint,
            self._session_params,
            reply_timeout=self._reply_timeout,
            startup_timeout=self._startup_timeout,
        )

    def start(self, episode: Episode) -> None:
        session = self._idle.pop() if self._idle else self._open()
        self._playing[episode.id] = session

    def infer(self, observations: list[Any], episodes: list[Episode], seeds: list[int]) -> list[Any]:
        # Send every request before reading any answer, so a server that batches sees them together. A
        # session that fails fails its own episode: its place holds the failure, the others' their answers.
        sessions = [self._playing[e.id] for e in episodes]
        answers: list[Any] = [None] * len(sessions)
        for at, (session, observation, episode, seed) in enumerate(
            zip(sessions, observations, episodes, seeds, strict=True)
        ):
            # The session tells the server about the episode with its first request only.
            about = _about(episode) if episode.inferences == 0 else None
            try:
                self._guarded(
                    episode,
                    lambda s=session, o=observation, d=seed, a=about, t=episode.step: s.ask(
                        o, seed=d, episode=a, step=t
                    ),
                )
            except RemotePolicyError as failure:
                answers[at] = failure
        for at, (session, episode) in enumerate(zip(sessions, episodes, strict=True)):
            if answers[at] is None:
                try:
                    answers[at] = self._guarded(episode, session.answer)[0]
                except RemotePolicyError as failure:
                    answers[at] = failure
        return answers

    def _guarded(self, episode: Episode, call: Any) -> Any:
        """`call()`, with a lost session dropped (the next episode dials anew) and every failure said in
        the words an episode's result carries."""
        server = self._server
        try:
            return call()
        except RemoteError as exc:
            raise RemotePolicyError(str(exc), FailureKind.POLICY_CRASH) from None
        except TimeoutError:
            self._drop(episode)
            raise RemotePolicyError(
                f"{server} did not answer within {self._reply_timeout:g} s, its limit on one answer",
                FailureKind.LATENCY_BUDGET,
            ) from None
        except PeerDisconnected as exc:
            self._drop(episode)
            raise RemotePolicyError(
                f"{server} dropped the session mid-episode: {exc}",
                FailureKind.SESSION_DROPPED,
            ) from None
        except ProtocolError as exc:
            self._drop(episode)
            raise RemotePolicyError(
                f"{server} answered something malformed: {exc}",
                FailureKind.MALFORMED_ANSWER,
            ) from None
        except (WireError, OSError) as exc:
            self._drop(episode)
            raise RemotePolicyError(
                f"the session with {server} failed: {exc}", FailureKind.SESSION_DROPPED
            ) from None

    def _drop(self, episode: Episode) -> None:
        session = self._playing.pop(episode.id, None)
        if session is not None:
            session.close()

    def finish(self, episode: Episode) -> None:
        session = self._playing.pop(episode.id, None)
        if session is None:
            return
        try:
            if session.end_episode():
                self._idle.append(session)
        except (WireError, OSError, TimeoutError):
            session.close()

    def close(self) -> None:
        for session in [*self._idle, *self._playing.values()]:
            session.close()
        self._idle.clear()
        self._playing.clear()


def _about(episode: Episode) -> dict[str, Any]:
    about: dict[str, Any] = {
        "task": episode.task,
        "description": episode.description,
        "seed": episode.seed,
        "trial": episode.trial,
    }
    if episode.action_space is not None:
        about["action_space"] = [list(episode.action_space[0]), list(episode.action_space[1])]
    return about
