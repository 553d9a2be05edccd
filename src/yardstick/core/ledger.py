"""Where the core meets money, without knowing its terms: a run's price is held when it is admitted and
settled when it ends, in the transactions that admit and end it. The billing package implements this;
an install without credits uses `NO_CREDITS`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.orm import Session

from yardstick.store.models import Org

__all__ = ["NO_CREDITS", "Ledger", "NoCredits", "PricedEpisodes", "Quote"]


@dataclass(frozen=True)
class PricedEpisodes:
    """What a quote prices: per task position and endpoint, how many episodes, each capped at how long."""

    task_pos: int
    endpoint: str
    count: int
    cap_s: float


class Quote(Protocol):
    """The most a run may cost, as a ledger quoted it: the units held while it plays, and the whole quote as
    the run's row keeps it (its door shows it from there)."""

    @property
    def total_units(self) -> int: ...

    def as_json(self) -> dict[str, Any]: ...


class Ledger(Protocol):
    def quote(self, billing_mode: str, lines: Sequence[PricedEpisodes]) -> Quote | None:
        """The most a run of these episodes may cost an org in `billing_mode` (None: nothing is held)."""
        ...

    def reserve(self, session: Session, org: Org, run_id: int, quote: Quote) -> None:
        """Hold `quote` for a run being admitted, in the admitting transaction; a `Refusal` if the org cannot
        cover it (the transaction then rolls back and nothing is filed)."""
        ...

    def settle(self, session: Session, run_id: int, *, charged: bool) -> None:
        """Charge a run that ended for what it played (nothing when it is not `charged`), release the rest,
        in the transaction that ends it. Settles once, whoever ends the run."""
        ...


class NoCredits:
    """An install that keeps no credits: nothing is quoted, held or charged."""

    def quote(self, billing_mode: str, lines: Sequence[PricedEpisodes]) -> Quote | None:
        return None

    def reserve(self, session: Session, org: Org, run_id: int, quote: Quote) -> None:
        return None

    def settle(self, session: Session, run_id: int, *, charged: bool) -> None:
        return None


NO_CREDITS: Ledger = NoCredits()
