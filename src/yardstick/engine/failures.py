"""Why an episode failed, as a kind recorded where the failure happens, beside the sentence a person reads.

Nothing reads a failure's message to learn what happened: the engine, the wire and the workers each name
the kind when they raise, and whoever decides what follows (a charge or a refund, a contract's reason code)
reads the kind. Each kind says whose fault it is (`Party`), which is all the engine knows of blame: a front
door maps kinds to its contract's codes in one table, and the platform's core decides who pays.
"""

from __future__ import annotations

from enum import StrEnum


class Party(StrEnum):
    """Who a failure belongs to."""

    POLICY = "policy"
    BENCHMARK = "benchmark"
    PLATFORM = "platform"


class FailureKind(StrEnum):
    """What went wrong with an episode (or with building what plays it)."""

    # The policy's.
    POLICY_CRASH = "policy_crash"  # its infer raised
    POLICY_TIMEOUT = "policy_timeout"  # one of its calls ran past the call limit and was cut
    POLICY_SETUP_CRASH = "policy_setup_crash"  # its constructor or on_episode raised, or it could not load
    LATENCY_BUDGET = "latency_budget"  # a policy server did not answer within the reply budget
    SESSION_REFUSED = "session_refused"  # a policy server refused the session (or never opened one)
    SESSION_DROPPED = "session_dropped"  # a policy server dropped the session mid-episode
    MALFORMED_ANSWER = "malformed_answer"  # an answer that is no chunk of actions, or breaks the wire
    POLICY_OOM = "policy_oom"  # its container ran past its memory and was killed
    IMAGE_UNPULLABLE = "image_unpullable"  # its image cannot be pulled (none such, refused, another arch)
    IMAGE_TOO_LARGE = "image_too_large"  # its image is larger than the install plays
    # The benchmark's.
    BENCHMARK_CRASH = "benchmark_crash"  # reset or step raised, or answered something malformed
    BENCHMARK_TIMEOUT = "benchmark_timeout"  # reset or step ran past the call limit and was cut
    BENCHMARK_SETUP_CRASH = "benchmark_setup_crash"  # its constructor raised, or it could not load
    # The platform's.
    WORKER_LOST = "worker_lost"  # the process playing it died, or hung where no alarm reaches
    PLATFORM_LOST = "platform_lost"  # its leases ran out too often: the workers playing it were lost
    STORAGE_FAILED = "storage_failed"  # its results could not be stored (the artifact store full or failing)
    INSTALL_INCOMPLETE = "install_incomplete"  # the worker lacks what building it needs (a simulator's extra)
    IMAGE_FETCH_TIMEOUT = "image_fetch_timeout"  # a policy image's pull ran past the fetch deadline

    @property
    def party(self) -> Party:
        return _PARTY[self]


# Whose fault each kind is, by member: a kind left out fails at import (below), where a misspelt string in a
# set would have made a policy's fault the platform's, refunded, without a word.
_POLICY = frozenset(
    {
        FailureKind.POLICY_CRASH,
        FailureKind.POLICY_TIMEOUT,
        FailureKind.POLICY_SETUP_CRASH,
        FailureKind.LATENCY_BUDGET,
        FailureKind.SESSION_REFUSED,
        FailureKind.SESSION_DROPPED,
        FailureKind.MALFORMED_ANSWER,
        FailureKind.POLICY_OOM,
        FailureKind.IMAGE_UNPULLABLE,
        FailureKind.IMAGE_TOO_LARGE,
    }
)
_BENCHMARK = frozenset(
    {FailureKind.BENCHMARK_CRASH, FailureKind.BENCHMARK_TIMEOUT, FailureKind.BENCHMARK_SETUP_CRASH}
)
_PLATFORM = frozenset(
    {
        FailureKind.WORKER_LOST,
        FailureKind.PLATFORM_LOST,
        FailureKind.STORAGE_FAILED,
        FailureKind.INSTALL_INCOMPLETE,
        FailureKind.IMAGE_FETCH_TIMEOUT,
    }
)
_PARTY = {
    **dict.fromkeys(_POLICY, Party.POLICY),
    **dict.fromkeys(_BENCHMARK, Party.BENCHMARK),
    **dict.fromkeys(_PLATFORM, Party.PLATFORM),
}
if set(_PARTY) != set(FailureKind) or len(_POLICY) + len(_BENCHMARK) + len(_PLATFORM) != len(_PARTY):
    raise RuntimeError("every failure kind belongs to exactly one party")


class Failed(Exception):
    """A failure that knows its kind: what the engine's parts raise so the kind travels with the sentence."""

    def __init__(self, reason: str, kind: FailureKind) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
