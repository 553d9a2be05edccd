"""A request the platform refuses: a kind (what a program acts on), a sentence (what a person reads: it names
the field and the rule), and typed details: each problem's field and rule, the names on offer (or in the
way), the quota that is spent, the credits short, the field of a refused upload.

The core raises these in its own terms; each front door renders them in its contract's error body, with
its contract's codes, from one table (`positronic.errors`, `sequences.errors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # admission raises refusals: its quota is only named here
    from yardstick.core.admission import Quota

__all__ = [
    "Feature",
    "Listed",
    "Problem",
    "Refusal",
    "RefusalKind",
    "Shortfall",
    "bad_request",
    "forbidden",
    "not_found",
    "unauthenticated",
]


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
    NOT_OFFERED = "not_offered"  # a feature of a contract this install does not serve, named

    @property
    def retryable(self) -> bool:
        """Whether the same request, sent again later, may succeed."""
        return self in (RefusalKind.QUOTA_EXCEEDED, RefusalKind.UPSTREAM_UNAVAILABLE, RefusalKind.INTERNAL)


@dataclass(frozen=True)
class Problem:
    """One field of a request and the rule it breaks."""

    field: str
    rule: str

    def as_json(self) -> dict[str, str]:
        return {"field": self.field, "rule": self.rule}


@dataclass(frozen=True)
class Listed:
    """Names a refusal lists under `key`: those on offer when the one asked for is not among them (`evals`,
    `tasks`, `specs`, `packages`, `organizations`), or those in the way (the `benchmarks` using a volume)."""

    key: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class Shortfall:
    """Credits a run's quote needs, and those its org has free."""

    required_units: int
    available_units: int


@dataclass(frozen=True)
class Feature:
    """A feature of a contract the install does not serve, and why (behind `not_offered`)."""

    name: str
    reason: str


class Refusal(Exception):
    """A request refused, changing nothing, with what a contract may carry beside the sentence."""

    def __init__(
        self,
        kind: RefusalKind,
        message: str,
        *,
        problems: Sequence[Problem] = (),
        listed: Sequence[Listed] = (),
        quota: Quota | None = None,
        shortfall: Shortfall | None = None,
        field: str | None = None,
        feature: Feature | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.problems = tuple(problems)
        self.listed = tuple(listed)
        self.quota = quota
        self.shortfall = shortfall
        self.field = field
        self.feature = feature

    @property
    def details(self) -> dict[str, Any]:
        """The details by the keys both contracts use (`errors`, each listing's key, `quota`,
        `required_units` and `available_units`, `field`, `feature` and `reason`), those that are present."""
        shown: dict[str, Any] = {}
        if self.problems:
            shown["errors"] = [p.as_json() for p in self.problems]
        for listing in self.listed:
            shown[listing.key] = list(listing.names)
        if self.quota is not None:
            shown["quota"] = self.quota
        if self.shortfall is not None:
            shown["required_units"] = self.shortfall.required_units
            shown["available_units"] = self.shortfall.available_units
        if self.field is not None:
            shown["field"] = self.field
        if self.feature is not None:
            shown["feature"] = self.feature.name
            shown["reason"] = self.feature.reason
        return shown


def bad_request(
    message: str, *, problems: Sequence[Problem] = (), listed: Sequence[Listed] = (), field: str | None = None
) -> Refusal:
    return Refusal(RefusalKind.BAD_REQUEST, message, problems=problems, listed=listed, field=field)


def not_found(message: str, *, listed: Sequence[Listed] = ()) -> Refusal:
    return Refusal(RefusalKind.NOT_FOUND, message, listed=listed)


def forbidden(message: str, *, listed: Sequence[Listed] = ()) -> Refusal:
    return Refusal(RefusalKind.FORBIDDEN, message, listed=listed)


def unauthenticated(message: str = "a valid API key is required: Authorization: Bearer <key>") -> Refusal:
    return Refusal(RefusalKind.UNAUTHENTICATED, message)
