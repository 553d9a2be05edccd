"""Credits: the tariff and its quotes, reservations taken when a pay-as-you-go run is admitted, settlement
when it ends, and the ledger. `CreditLedger` is the core's `Ledger`: the platform holds and settles a run's
price through it, in the transactions that admit and end the run.

Money moves in integer units (`CREDIT_SCALE` to a credit) and only in these places:
- `reserve` (in the transaction that admits a run): the quote's whole maximum is held,
  `credit_accounts.reserved_units += total`, or the run is refused `insufficient_credits`;
- `settle` (in the transaction that ends the run, whichever of finish / error / cancel wins): the real cost
  is charged, `posted_units -= charged`, the hold released, `reserved_units -= reserved`, one `charge` entry;
- `post` (an admin's grant, a settled purchase): `posted_units += units`, one `grant` / `purchase` entry.
So the ledger's entries of an org always sum to its `posted_units`, and its held reservations to its
`reserved_units`.

The credit vocabulary (`Tariff`, `CreditQuote`, `CreditPackage`) is the platform's own (`billing.money`); the
Positronic door shows it as its contract's models of the same names and fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from yardstick.billing.money import NANOSECONDS_PER_SECOND, CreditPackage, CreditQuote, QuoteLine, Tariff
from yardstick.billing.terms import credits as credits  # re-exported: the admin CLI's
from yardstick.core.ledger import PricedEpisodes, Quote
from yardstick.core.refusals import Refusal, RefusalKind, Shortfall
from yardstick.store.models import CreditAccount, CreditEntry, Org, Purchase, Reservation, RunEpisode, utcnow
from yardstick.store.states import (
    PLAYED_EPISODES,
    BillingMode,
    LedgerKind,
    PurchaseState,
    ReservationState,
)


class BillingError(ValueError):
    """An operator's billing action that cannot be done as asked; the message says what and why."""


# --- quotes and charges ----------------------------------------------------------------------------------


def quote(lines: Sequence[PricedEpisodes], tariff: Tariff) -> CreditQuote:
    """The most a run can cost: per task and endpoint, its episodes each charged at the task's cap.
    `CreditQuote` checks the lines against the tariff itself, so a wrong sum cannot leave here."""
    quoted = [
        QuoteLine(
            task_pos=line.task_pos,
            endpoint=line.endpoint,
            count=line.count,
            cap_ns=round(line.cap_s * NANOSECONDS_PER_SECOND),
            max_units=line.count * tariff.charge_units(round(line.cap_s * NANOSECONDS_PER_SECOND)),
        )
        for line in lines
    ]
    return CreditQuote(terms=tariff, lines=tuple(quoted), total_units=sum(line.max_units for line in quoted))


def duration_ns(robot_seconds: object) -> int:
    """An episode's played time (its result's `robot_seconds`) in whole nanoseconds; none or nonsense is 0."""
    if isinstance(robot_seconds, bool) or not isinstance(robot_seconds, int | float):
        return 0
    return max(0, round(robot_seconds * NANOSECONDS_PER_SECOND))


def played_episodes(session: Session, *where: Any) -> dict[int, list[tuple[int, str, int]]]:
    """Per submission (of those `where` picks), the episodes it is charged for, in order, as `charge` takes
    them: (task position, endpoint, duration in ns)."""
    played: dict[int, list[tuple[int, str, int]]] = {}
    for submission_id, task_pos, endpoint, result in session.execute(
        select(RunEpisode.submission_id, RunEpisode.task_pos, RunEpisode.endpoint, RunEpisode.result)
        .where(RunEpisode.state.in_(PLAYED_EPISODES), *where)
        .order_by(RunEpisode.submission_id, RunEpisode.index)
    ).all():
        played.setdefault(submission_id, []).append(
            (task_pos, endpoint, duration_ns((result or {}).get("robot_seconds")))
        )
    return played


def charge(frozen: CreditQuote, played: Iterable[tuple[int, str, int]]) -> int:
    """What the played episodes (task position, endpoint, duration in ns) cost under the frozen quote.

    Each episode is charged for its duration at most up to its line's cap (a benchmark whose own time limit
    runs past the plan's cap does not bill the caller for it), episodes beyond a line's count and outside
    the quote are not charged, and the whole never passes what was reserved."""
    lines = {(line.task_pos, line.endpoint): line for line in frozen.lines}
    counted: dict[tuple[int, str], int] = {}
    total = 0
    for task_pos, endpoint, duration in played:
        line = lines.get((task_pos, endpoint))
        if line is None or counted.get((task_pos, endpoint), 0) >= line.count:
            continue
        counted[(task_pos, endpoint)] = counted.get((task_pos, endpoint), 0) + 1
        total += frozen.terms.charge_units(min(duration, line.cap_ns))
    return min(total, frozen.total_units)


# --- the balance -------------------------------------------------------------------------------------------


def _locked_account(session: Session, org_id: int) -> CreditAccount:
    """The org's account row, created at zero if it has none, locked for this transaction on PostgreSQL
    (SQLite's writer holds the whole database already)."""
    sqlite = session.get_bind().dialect.name == "sqlite"
    query = (
        select(CreditAccount).where(CreditAccount.org_id == org_id).execution_options(populate_existing=True)
    )
    if not sqlite:
        query = query.with_for_update()
    found = session.execute(query).scalar_one_or_none()
    if found is not None:
        return found
    insert = sqlite_insert if sqlite else pg_insert
    session.execute(
        insert(CreditAccount)
        .values(org_id=org_id, posted_units=0, reserved_units=0, updated_at=utcnow())
        .on_conflict_do_nothing(index_elements=["org_id"])
    )
    return session.execute(query).scalar_one()


def post(
    session: Session,
    org_id: int,
    units: int,
    *,
    kind: str,
    note: str = "",
    purchase_id: str | None = None,
) -> CreditAccount:
    """Add credits to an org's balance (a grant, a paid purchase), with its ledger entry."""
    if units <= 0:
        raise BillingError(f"units: {units} is not a positive amount of credits")
    account = _locked_account(session, org_id)
    account.posted_units += units
    account.updated_at = utcnow()
    session.add(CreditEntry(org_id=org_id, kind=kind, units=units, purchase_id=purchase_id, note=note))
    return account


def reserve(session: Session, org: Org, submission_id: int, frozen: CreditQuote) -> None:
    """Hold the quote's whole maximum for a run being admitted, in the admitting transaction; refuse it if
    the org cannot cover it (the caller's transaction then rolls back, and nothing is filed)."""
    account = _locked_account(session, org.id)
    available = account.posted_units - account.reserved_units
    if available < frozen.total_units:
        raise Refusal(
            RefusalKind.INSUFFICIENT_CREDITS,
            f"credits: this plan may cost up to {credits(frozen.total_units)} credits and org {org.slug!r}"
            f" has {credits(available)} available ({credits(account.reserved_units)} held by runs not yet"
            " settled): buy a package (billing.purchases.create) or file fewer episodes",
            shortfall=Shortfall(frozen.total_units, available),
        )
    account.reserved_units += frozen.total_units
    account.updated_at = utcnow()
    session.add(
        Reservation(
            submission_id=submission_id,
            org_id=org.id,
            quote=frozen.as_json(),
            reserved_units=frozen.total_units,
            state=ReservationState.HELD,
        )
    )


@dataclass(frozen=True)
class Settlement:
    reserved: int
    charged: int

    @property
    def released(self) -> int:
        return self.reserved - self.charged


def settle(session: Session, submission_id: int, *, platform_fault: bool) -> Settlement | None:
    """Charge a run that ended for the episodes it played, release the rest of its hold, and write the
    ledger; None for a run that holds nothing (packaged, or settled already).

    Call it inside the transaction that ends the run. It is conditional on the reservation still being held,
    so two workers ending one run settle it once. A platform fault charges nothing. A caller's fault, a
    cancel and a finished run charge every episode that landed (done, or failed with the policy's fault —
    the robot time it took was spent); episodes never played are released."""
    held = session.execute(
        select(Reservation).where(
            Reservation.submission_id == submission_id, Reservation.state == ReservationState.HELD
        )
    ).scalar_one_or_none()
    if held is None:
        return None
    frozen = CreditQuote.model_validate(held.quote)
    played = (
        []
        if platform_fault
        else played_episodes(session, RunEpisode.submission_id == submission_id).get(submission_id, [])
    )
    charged = min(charge(frozen, played), held.reserved_units)
    won = session.execute(
        update(Reservation)
        .where(Reservation.submission_id == submission_id, Reservation.state == ReservationState.HELD)
        .values(state=ReservationState.SETTLED, charged_units=charged, settled_at=utcnow())
    )
    if not won.rowcount:  # type: ignore[attr-defined]
        return None  # another worker settled it between the read and the write
    account = _locked_account(session, held.org_id)
    account.posted_units -= charged
    account.reserved_units -= held.reserved_units
    account.updated_at = utcnow()
    why = "a platform fault: nothing charged" if platform_fault else f"{len(played)} episodes played"
    session.add(
        CreditEntry(
            org_id=held.org_id,
            kind=LedgerKind.CHARGE,
            units=-charged,
            submission_id=submission_id,
            note=f"run {submission_id:x}, {why}; charged {credits(charged)} of {credits(held.reserved_units)}"
            f" reserved, {credits(held.reserved_units - charged)} released",
        )
    )
    return Settlement(held.reserved_units, charged)


def settle_purchase(session: Session, purchase_id: str, note: str = "") -> Purchase:
    """Grant an open purchase's credits (the built-in provider's confirmation of payment: an admin's)."""
    row = session.get(Purchase, purchase_id, with_for_update=True, populate_existing=True)
    if row is None:
        raise BillingError(f"no purchase {purchase_id!r}")
    if row.state != PurchaseState.OPEN:
        since = f" (granted {row.granted_at:%Y-%m-%d %H:%M} UTC)" if row.granted_at else ""
        raise BillingError(f"purchase {purchase_id} is {row.state}{since}: only an open purchase is settled")
    package = CreditPackage.model_validate(row.package)
    row.state, row.granted_at, row.checkout_url = PurchaseState.GRANTED, utcnow(), None
    post(
        session,
        row.org_id,
        package.credit_units,
        kind=LedgerKind.PURCHASE,
        purchase_id=row.id,
        note=note or f"package {package.id}: {package.amount_minor} {package.currency} (minor units)",
    )
    return row


def describe(session: Session, org_id: int, entries: int = 10) -> dict[str, Any]:
    """An org's balance, its latest ledger entries and its open purchases, for an administrator."""
    account = session.get(CreditAccount, org_id)
    ledger = session.execute(
        select(CreditEntry)
        .where(CreditEntry.org_id == org_id)
        .order_by(CreditEntry.created_at.desc(), CreditEntry.id)
        .limit(entries)
    ).scalars()
    open_purchases = session.execute(
        select(Purchase)
        .where(Purchase.org_id == org_id, Purchase.state == PurchaseState.OPEN)
        .order_by(Purchase.created_at)
    ).scalars()
    return {
        "posted_units": account.posted_units if account else 0,
        "reserved_units": account.reserved_units if account else 0,
        "entries": [(e.created_at, e.kind, e.units, e.note) for e in ledger],
        "open_purchases": [(p.id, p.package.get("id"), p.created_at) for p in open_purchases],
    }


class CreditLedger:
    """The core's `Ledger` over an org's credits under `tariff`: a pay-as-you-go org's run is quoted and its
    quote held; a packaged org's holds nothing (it is invoiced from its usage statement)."""

    def __init__(self, tariff: Tariff) -> None:
        self.tariff = tariff

    def quote(self, billing_mode: str, lines: Sequence[PricedEpisodes]) -> CreditQuote | None:
        return quote(lines, self.tariff) if billing_mode == BillingMode.PAY_AS_YOU_GO else None

    def reserve(self, session: Session, org: Org, run_id: int, quote: Quote) -> None:
        assert isinstance(quote, CreditQuote)  # what `quote` made
        reserve(session, org, run_id, quote)

    def settle(self, session: Session, run_id: int, *, charged: bool) -> None:
        settle(session, run_id, platform_fault=not charged)
