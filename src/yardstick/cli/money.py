"""Credits as a person reads them: a tariff and a run's quote in one line each."""

from __future__ import annotations

from platform_client.billing import CreditQuote, Tariff

from yardstick.billing.terms import credits


def describe_tariff(tariff: Tariff) -> str:
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
