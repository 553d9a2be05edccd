"""A request the platform refuses: a kind (what a program acts on), a sentence (what a person reads: it names
the field and the rule), and details (what is on offer, what was asked).

The core raises these in its own terms; each front door renders them in its contract's error body, with
its contract's codes, from one table (`positronic.errors`, `sequences.errors`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = ["Refusal", "RefusalKind", "bad_request", "forbidden", "not_found", "unauthenticated"]


class RefusalKind(StrEnum):
    BAD_REQUEST = "bad_request"  # the request breaks a rule: fixing it is the caller's
    UNAUTHENTICATED = "unauthenticated"  # no key, or one that is not live
    FORBIDDEN = "forbidden"  # a caller who may not do this
    NOT_FOUND = "not_found"  # nothing by that name that the caller can see
    CONFLICT = "conflict"  # a transaction key that already names something else
    EVAL_UNAVAILABLE = "eval_unavailable"  # an eval that takes no runs now
    QUOTA_EXCEEDED = "quota_exceeded"  # a quota spent
    INSUFFICIENT_CREDITS = "insufficient_credits"  # the balance cannot cover the run's quote
    TOO_LARGE = "too_large"  # a body or a bundle over its limit
    UPSTREAM_UNAVAILABLE = (
        "upstream_unavailable"  # a service the platform asks (an identity provider) is down
    )
    INTERNAL = "internal"  # the platform's own fault

    @property
    def retryable(self) -> bool:
        """Whether the same request, sent again later, may succeed."""
        return self in (RefusalKind.QUOTA_EXCEEDED, RefusalKind.UPSTREAM_UNAVAILABLE, RefusalKind.INTERNAL)


class Refusal(Exception):
    """A request refused, changing nothing. `details` are extra facts a contract may carry (the evals on
    offer, the quota that is spent); None values are left out."""

    def __init__(self, kind: RefusalKind, message: str, **details: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}


def bad_request(message: str, **details: Any) -> Refusal:
    return Refusal(RefusalKind.BAD_REQUEST, message, **details)


def not_found(message: str, **details: Any) -> Refusal:
    return Refusal(RefusalKind.NOT_FOUND, message, **details)


def forbidden(message: str, **details: Any) -> Refusal:
    return Refusal(RefusalKind.FORBIDDEN, message, **details)


def unauthenticated(message: str = "a valid API key is required: Authorization: Bearer <key>") -> Refusal:
    return Refusal(RefusalKind.UNAUTHENTICATED, message)
