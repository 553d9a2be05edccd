"""The credit vocabulary, in the platform's own types: a `Tariff` (what an episode costs, by its robot time),
a `CreditQuote` (the most a run may cost, line by line, held while it plays) and a `CreditPackage` (what a
purchase buys). Each checks its own arithmetic when it is made or read back, so a quote whose lines do not
add up, or a tariff whose version does not name its rates, cannot be held or shown.

The Positronic door shows these as its contract's models of the same names and fields (translated there, from
`as_json`); the Sequences door shows credits only. The facts are the contract's: one credit is `CREDIT_SCALE`
units, a tariff's version is the sha256 of its rates so two tariffs with one version are the same tariff, an
episode costs its fixed part plus its duration (rounded up to the tariff's step) at the minute rate.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

CREDIT_SCALE = 60_000_000_000
NANOSECONDS_PER_SECOND = 1_000_000_000
NANOSECONDS_PER_MINUTE = 60 * NANOSECONDS_PER_SECOND
# Amounts are stored in 64-bit integer columns on both databases.
UNITS_MAX = (1 << 63) - 1
Units = Annotated[int, Field(strict=True, ge=0, le=UNITS_MAX)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Tariff(_Frozen):
    """The price of an episode: `episode_units` each, plus `minute_units` a minute of its robot time, that
    time rounded up to whole steps of `duration_rounding_sec` (0: not rounded)."""

    version: str
    episode_units: Units
    minute_units: Units
    duration_rounding_sec: int = Field(default=0, strict=True, ge=0, le=UNITS_MAX // NANOSECONDS_PER_SECOND)

    @staticmethod
    def version_of(episode_units: int, minute_units: int, duration_rounding_sec: int = 0) -> str:
        """The version that names these rates (a tariff without rounding keeps the first form's hash)."""
        named = f"v1:{CREDIT_SCALE}:{episode_units}:{minute_units}"
        if duration_rounding_sec:
            named = f"v2:{CREDIT_SCALE}:{episode_units}:{minute_units}:{duration_rounding_sec}"
        return hashlib.sha256(named.encode()).hexdigest()

    @classmethod
    def for_rates(cls, episode_units: int, minute_units: int, *, duration_rounding_sec: int) -> Tariff:
        return cls(
            version=cls.version_of(episode_units, minute_units, duration_rounding_sec),
            episode_units=episode_units,
            minute_units=minute_units,
            duration_rounding_sec=duration_rounding_sec,
        )

    def charge_units(self, duration_ns: int) -> int:
        """What one episode of `duration_ns` of robot time costs."""
        if type(duration_ns) is not int or not 0 <= duration_ns <= UNITS_MAX:
            raise ValueError("duration must be a whole number of nanoseconds within the storage limit")
        if self.duration_rounding_sec:
            step = self.duration_rounding_sec * NANOSECONDS_PER_SECOND
            duration_ns = -(-duration_ns // step) * step
        units = self.episode_units + duration_ns * self.minute_units // NANOSECONDS_PER_MINUTE
        if units > UNITS_MAX:
            raise ValueError("an episode's credits exceed the storage limit")
        return units

    @model_validator(mode="after")
    def _version_names_the_rates(self) -> Self:
        if self.version != self.version_of(self.episode_units, self.minute_units, self.duration_rounding_sec):
            raise ValueError("the tariff's version does not name its rates")
        return self


class QuoteLine(_Frozen):
    """One task (by its position in the plan) on one endpoint: `count` episodes, each charged at most as
    if it ran its whole cap."""

    task_pos: int = Field(strict=True, ge=0, le=UNITS_MAX)
    endpoint: str = Field(min_length=1)
    count: int = Field(strict=True, ge=1, le=UNITS_MAX)
    cap_ns: int = Field(strict=True, ge=1, le=UNITS_MAX)
    max_units: Units


class CreditQuote(_Frozen):
    """The most a run may cost under `terms`: the sum of its lines, each line its count at its cap's price.
    It is the core's `ledger.Quote`: what an admitted run holds."""

    terms: Tariff
    lines: tuple[QuoteLine, ...] = Field(min_length=1)
    total_units: Units

    @model_validator(mode="after")
    def _lines_add_up(self) -> Self:
        keys = [(line.task_pos, line.endpoint) for line in self.lines]
        if len(set(keys)) != len(keys):
            raise ValueError("the quote prices one task on one endpoint twice")
        for line in self.lines:
            if line.max_units != line.count * self.terms.charge_units(line.cap_ns):
                raise ValueError("a line of the quote does not match its tariff")
        if self.total_units != sum(line.max_units for line in self.lines):
            raise ValueError("the quote's total is not the sum of its lines")
        return self


class CreditPackage(_Frozen):
    """What a purchase buys: `credit_units` for `amount_minor` of `currency` (minor units: cents)."""

    id: str = Field(min_length=1)
    credit_units: Units = Field(gt=0)
    amount_minor: int = Field(strict=True, gt=0, le=UNITS_MAX)
    currency: str = Field(pattern=r"^[a-z]{3}$")
