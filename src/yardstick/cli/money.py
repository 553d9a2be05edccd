"""Credits as a person reads them: a tariff and a run's quote in one line each."""

from __future__ import annotations

from typing import Protocol

from platform_client.billing import CreditQuote

from yardstick.billing.terms import credits


class Rates(Protocol):
    """A tariff's rates, the platform's own (a usage statement's) or the contract's (a client's answer)."""

    @property
    def episode_units(self) -> int: ...
    @property
    def minute_units(self) -> int: ...
    @property
    def duration_rounding_sec(self) -> int: ...


def describe_tariff(tariff: Rates) -> str:
    """`0.1 an episode + 1 a minute, each episode's time rounded up to 30 s` (in credits)."""
    rounding = (
        f"each episode's time rounded up to {tariff.duration_rounding_sec} s"
        if tariff.duration_rounding_sec
        else "time priced exactly"
    )
    return f"{credits(tariff.episode_units)} an episode + {credits(tariff.minute_units)} a minute, {rounding}"


def describe_quote(quote: CreditQuote) -> str:
    """What a run may cost at most (every episode at its task's cap), and the tariff it is priced by."""
    episodes = sum(line.count for line in quote.lines)
    return (
        f"credits: up to {credits(quote.total_units)} for {episodes} episodes at their caps "
        f"({describe_tariff(quote.terms)}); reserved when filed, the rest released when it ends"
    )
