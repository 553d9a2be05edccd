"""Credits: the tariff and its quotes, reservations taken when a pay-as-you-go run is admitted, settlement
when it ends, the ledger, and purchases of credit packages through a payment provider.

Money moves in integer units (`CREDIT_SCALE` to a credit) and only in these places:
- `reserve` (in the transaction that admits a submission): the quote's whole maximum is held,
  `credit_accounts.reserved_units += total`, or the create is refused `insufficient_credits`;
- `settle` (in the transaction that ends the run, whichever of finish / error / cancel wins): the real cost
  is charged, `posted_units -= charged`, the hold released, `reserved_units -= reserved`, one `charge` entry;
- `post` (an admin's grant, a settled purchase): `posted_units += units`, one `grant` / `purchase` entry.
So the ledger's entries of an org always sum to its `posted_units`, and its held reservations to its
`reserved_units`.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from platform_client.billing import (
    NANOSECONDS_PER_SECOND,
    BillingAccount,
    CreditBalance,
    CreditPackage,
    CreditQuote,
    PurchaseListResponse,
    PurchaseView,
    QuoteLine,
    RequestBilling,
    Tariff,
)
from platform_client.enums import BillingMode, BillingRole, BillingState, ErrorCode
from platform_client.ids import OrgSlug, PurchaseId, UserId
from platform_client.requests import BillingPurchaseCreateRequest
from platform_client.responses import ResolvedPlan
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.service.billing_config import BillingTerms
from yardstick.service.billing_config import credits as credits  # re-exported: the admin CLI's
from yardstick.service.errors import ApiError, bad_request, forbidden, not_found
from yardstick.service.identity import Caller
from yardstick.service.plans import Resolution
from yardstick.store.db import Database
from yardstick.store.models import (
    CreditAccount,
    CreditEntry,
    Episode,
    Membership,
    Org,
    Purchase,
    Reservation,
    utcnow,
)

PACKAGED, PAY_AS_YOU_GO = BillingMode.packaged.name, BillingMode.pay_as_you_go.name
BILLING_MODES = (PACKAGED, PAY_AS_YOU_GO)
BILLING_ROLES = (BillingRole.none.name, BillingRole.spender.name)
PURCHASE_CAP = 200
CHECKOUT_PATH = "/billing/checkout"
# The episodes a run that ended is charged for: done, or failed with the policy's fault (its robot time was
# spent); episodes never played are not.
PLAYED = ("done", "failed")
# What an org slug may look like in a billing query: anything else is refused before a lookup.
ORG_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class BillingError(ValueError):
    """An operator's billing action that cannot be done as asked; the message says what and why."""


# --- quotes and charges ----------------------------------------------------------------------------------


def quote(resolved: ResolvedPlan, tariff: Tariff) -> CreditQuote:
    """The most a resolved plan can cost: per task and endpoint, its episodes each charged at the task's cap.
    `CreditQuote` checks the lines against the tariff itself, so a wrong sum cannot leave here."""
    lines = [
        QuoteLine(
            task_pos=pos,
            endpoint=endpoint.name,
            count=endpoint.episodes,
            cap_ns=task.cap_per_episode_sec * NANOSECONDS_PER_SECOND,
            max_units=endpoint.episodes
            * tariff.charge_units(task.cap_per_episode_sec * NANOSECONDS_PER_SECOND),
        )
        for pos, task in enumerate(resolved.tasks)
        for endpoint in task.endpoints
    ]
    return CreditQuote(terms=tariff, lines=tuple(lines), total_units=sum(line.max_units for line in lines))


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
        select(Episode.submission_id, Episode.task_pos, Episode.endpoint, Episode.result)
        .where(Episode.state.in_(PLAYED), *where)
        .order_by(Episode.submission_id, Episode.index)
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
        raise ApiError(
            ErrorCode.insufficient_credits,
            f"credits: this plan may cost up to {credits(frozen.total_units)} credits and org {org.slug!r}"
            f" has {credits(available)} available ({credits(account.reserved_units)} held by runs not yet"
            " settled): buy a package (billing.purchases.create) or file fewer episodes",
            required_units=frozen.total_units,
            available_units=available,
        )
    account.reserved_units += frozen.total_units
    account.updated_at = utcnow()
    session.add(
        Reservation(
            submission_id=submission_id,
            org_id=org.id,
            quote=frozen.model_dump(mode="json"),
            reserved_units=frozen.total_units,
            state=BillingState.held.name,
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
            Reservation.submission_id == submission_id, Reservation.state == BillingState.held.name
        )
    ).scalar_one_or_none()
    if held is None:
        return None
    frozen = CreditQuote.model_validate(held.quote)
    played = (
        []
        if platform_fault
        else played_episodes(session, Episode.submission_id == submission_id).get(submission_id, [])
    )
    charged = min(charge(frozen, played), held.reserved_units)
    won = session.execute(
        update(Reservation)
        .where(Reservation.submission_id == submission_id, Reservation.state == BillingState.held.name)
        .values(state=BillingState.settled.name, charged_units=charged, settled_at=utcnow())
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
            kind="charge",
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
    if row.state != "open":
        since = f" (granted {row.granted_at:%Y-%m-%d %H:%M} UTC)" if row.granted_at else ""
        raise BillingError(f"purchase {purchase_id} is {row.state}{since}: only an open purchase is settled")
    package = CreditPackage.model_validate(row.package)
    row.state, row.granted_at, row.checkout_url = "granted", utcnow(), None
    post(
        session,
        row.org_id,
        package.credit_units,
        kind="purchase",
        purchase_id=row.id,
        note=note or f"package {package.id}: {package.amount_minor} {package.currency} (minor units)",
    )
    return row


# --- payments ----------------------------------------------------------------------------------------------


class PaymentProvider(Protocol):
    """Where a purchase is paid. `checkout_url` opens a payment for a new purchase (None: none to open);
    credits are granted only when the provider confirms the payment (`settle_purchase`), never on a
    redirect back from its page."""

    def checkout_url(
        self, purchase_id: str, org: str, package: CreditPackage, base_url: str
    ) -> str | None: ...


class AdminSettles:
    """The built-in provider: no outside service. The checkout link is a page of the platform saying that an
    administrator settles the purchase (`yardstick admin credits settle PURCHASE_ID`) once paid by
    whatever means the operator takes."""

    def checkout_url(self, purchase_id: str, org: str, package: CreditPackage, base_url: str) -> str | None:
        return f"{base_url.rstrip('/')}{CHECKOUT_PATH}/{purchase_id}"


# --- the use-cases the billing routes call -------------------------------------------------------------


class Billing:
    """The operator's terms (tariff, packages), the payment provider, and what a caller may read and do."""

    def __init__(self, db: Database, terms: BillingTerms, provider: PaymentProvider) -> None:
        self.db = db
        self.tariff = terms.tariff()
        self.packages = tuple(terms.package(i) for i in range(len(terms.packages)))
        self.provider = provider

    def quoted(self, mode: str, resolution: Resolution) -> Resolution:
        """The resolution with its credit quote, for an org that pays as it goes."""
        if mode != PAY_AS_YOU_GO:
            return resolution
        resolved = resolution.resolved.model_copy(
            update={"credit_quote": quote(resolution.resolved, self.tariff)}
        )
        return dataclasses.replace(resolution, resolved=resolved)

    @staticmethod
    def mode_of(session: Session, org_id: int) -> str:
        """Read afresh: the caller's cached org may be seconds behind an admin's change."""
        return str(session.execute(select(Org.billing_mode).where(Org.id == org_id)).scalar_one())

    def request_billing(self, submission_id: int) -> RequestBilling:
        """How an admitted submission is billed: its frozen quote and hold, or packaged (nothing held)."""
        with self.db.reading() as session:
            held = session.get(Reservation, submission_id)
        if held is None:
            return RequestBilling(mode=BillingMode.packaged, state=BillingState.settled)
        return RequestBilling(
            mode=BillingMode.pay_as_you_go,
            quote=CreditQuote.model_validate(held.quote),
            state=BillingState[held.state],
        )

    def account(self, caller: Caller, slug: str) -> BillingAccount:
        with self.db.reading() as session:
            org, role = _membership(session, caller, slug)
            account = session.get(CreditAccount, org.id)
        return BillingAccount(
            org=OrgSlug(org.slug),
            mode=BillingMode[org.billing_mode],
            billing_role=BillingRole[role],
            balance=CreditBalance(
                posted_units=account.posted_units if account else 0,
                reserved_units=account.reserved_units if account else 0,
            ),
            tariff=self.tariff,
            packages=self.packages,
        )

    def create_purchase(
        self, caller: Caller, request: BillingPurchaseCreateRequest, base_url: str
    ) -> PurchaseView:
        """Open a purchase of a package; the same transaction key in the org answers the same purchase."""
        key, package_id = str(request.transaction_key), str(request.package_id)
        try:
            with self.db.writing() as session:
                org, role = _membership(session, caller, str(request.org))
                earlier = _by_key(session, org.id, key, caller.user_id, package_id)
                if earlier is not None:
                    return _view(session, earlier)
                if role != BillingRole.spender.name:
                    raise forbidden(
                        f"org: buying credits for {org.slug!r} takes the billing role spender, and yours is"
                        f" {role} (an administrator grants it: yardstick admin org billing-role)"
                    )
                package = self._package(package_id)
                purchase_id = f"pur_{secrets.token_hex(12)}"
                row = Purchase(
                    id=purchase_id,
                    org_id=org.id,
                    initiated_by=caller.user_id,
                    transaction_key=key,
                    package=package.model_dump(mode="json"),
                    state="open",
                    checkout_url=self.provider.checkout_url(purchase_id, org.slug, package, base_url),
                    created_at=utcnow(),
                )
                session.add(row)
                session.flush()
                return _view(session, row)
        except IntegrityError:
            # Two creates raced on one key: the other won; answer as a replay would.
            with self.db.reading() as session:
                org, _ = _membership(session, caller, str(request.org))
                earlier = _by_key(session, org.id, key, caller.user_id, package_id)
                if earlier is None:
                    raise
                return _view(session, earlier)

    def _package(self, package_id: str) -> CreditPackage:
        found = next((p for p in self.packages if p.id == package_id), None)
        if found is None:
            offered = [str(p.id) for p in self.packages]
            raise bad_request(
                f"package_id: {package_id!r} is not a package on offer"
                f" ({', '.join(offered) or 'none are configured'})",
                packages=offered,
            )
        return found

    def purchase(self, caller: Caller, purchase_id: str) -> PurchaseView:
        with self.db.reading() as session:
            row = session.get(Purchase, purchase_id)
            if row is None or not (caller.is_admin or row.org_id in caller.org_ids):
                raise not_found(f"id: no purchase {purchase_id!r} that you can see")
            return _view(session, row)

    def purchases(self, caller: Caller, slug: str, after: str | None, limit: int) -> PurchaseListResponse:
        """One page of an org's purchases, oldest first (a purchase made while paging lands on a later
        page, never before the cursor); `next` is the page's last id when more remain."""
        size = min(limit, PURCHASE_CAP)
        with self.db.reading() as session:
            org, _ = _membership(session, caller, slug)
            query = select(Purchase).where(Purchase.org_id == org.id)
            if after is not None:
                anchor = session.get(Purchase, after)
                if anchor is None or anchor.org_id != org.id:
                    raise bad_request(f"after: {after!r} is no purchase of {org.slug!r} to page from")
                query = query.where(
                    (Purchase.created_at > anchor.created_at)
                    | ((Purchase.created_at == anchor.created_at) & (Purchase.id > anchor.id))
                )
            rows = list(
                session.execute(query.order_by(Purchase.created_at, Purchase.id).limit(size + 1)).scalars()
            )
            more = len(rows) > size
            spenders = _spenders(session, org.id)
            views = [_view(session, row, spenders) for row in rows[:size]]
        return PurchaseListResponse(purchases=views, next=views[-1].id if more and views else None)

    def checkout(self, purchase_id: str) -> tuple[Purchase, str] | None:
        """A purchase and its org's slug, for the built-in provider's checkout page; None if there is none."""
        with self.db.reading() as session:
            row = session.get(Purchase, purchase_id)
            org = session.get(Org, row.org_id) if row is not None else None
        return None if row is None else (row, org.slug if org else "")


def _membership(session: Session, caller: Caller, slug: str) -> tuple[Org, str]:
    """The org a billing call names and the caller's billing role in it. A member may read; an admin who is
    not one reads with the role `none`. An org the caller is not in is refused as if it did not exist."""
    if not ORG_SLUG.fullmatch(slug):
        raise bad_request(
            f"org: {slug!r} is not an organization slug (letters, digits, '.', '_' and '-', at most 64)"
        )
    found = session.execute(
        select(Org, Membership.billing_role)
        .outerjoin(Membership, (Membership.org_id == Org.id) & (Membership.user_id == caller.user_id))
        .where(Org.slug == slug)
    ).one_or_none()
    if found is None or (found[1] is None and not caller.is_admin):
        raise forbidden(
            f"org: {slug!r} is not an organization you belong to", organizations=[o.slug for o in caller.orgs]
        )
    return found[0], found[1] or BillingRole.none.name


def _by_key(session: Session, org_id: int, key: str, user_id: int, package_id: str) -> Purchase | None:
    earlier = session.execute(
        select(Purchase).where(Purchase.org_id == org_id, Purchase.transaction_key == key)
    ).scalar_one_or_none()
    if earlier is None:
        return None
    if earlier.initiated_by != user_id:
        raise ApiError(
            ErrorCode.transaction_conflict,
            f"transaction_key: {key!r} already names a purchase by another member of this org",
        )
    if earlier.package.get("id") != package_id:
        raise ApiError(
            ErrorCode.transaction_conflict,
            f"transaction_key: {key!r} already bought package {earlier.package.get('id')!r}"
            f" (purchase {earlier.id}), not {package_id!r}",
        )
    return earlier


def _spenders(session: Session, org_id: int) -> set[int]:
    return set(
        session.execute(
            select(Membership.user_id).where(
                Membership.org_id == org_id, Membership.billing_role == BillingRole.spender.name
            )
        ).scalars()
    )


def _view(session: Session, row: Purchase, spenders: set[int] | None = None) -> PurchaseView:
    """A purchase as the contract shows it. The payable link only while it is open and its initiator may
    still pay it (holds the spender role); a reviewed or granted purchase carries none."""
    may_pay = row.initiated_by in (spenders if spenders is not None else _spenders(session, row.org_id))
    return PurchaseView(
        id=PurchaseId(row.id),
        package=CreditPackage.model_validate(row.package),
        initiated_by=UserId(row.initiated_by),
        created_at=row.created_at,
        checkout_url=row.checkout_url if row.state == "open" and may_pay and row.checkout_url else None,
        granted_at=row.granted_at,
        review_reason=(row.review_reason or "under review") if row.state == "review" else None,
    )


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
        .where(Purchase.org_id == org_id, Purchase.state == "open")
        .order_by(Purchase.created_at)
    ).scalars()
    return {
        "posted_units": account.posted_units if account else 0,
        "reserved_units": account.reserved_units if account else 0,
        "entries": [(e.created_at, e.kind, e.units, e.note) for e in ledger],
        "open_purchases": [(p.id, p.package.get("id"), p.created_at) for p in open_purchases],
    }
