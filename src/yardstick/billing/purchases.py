"""An org's credits as its members reach them: the account (mode, role, balance), and purchases of credit
packages through a payment provider, idempotent per org by transaction key. Credits are granted only when
the provider confirms a payment (`credits.settle_purchase`), never on a redirect back from its page."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.billing.money import CreditPackage, Tariff
from yardstick.billing.terms import BillingTerms
from yardstick.core import limits
from yardstick.core.accounts import Caller
from yardstick.core.idempotency import create_once
from yardstick.core.paging import keyset_page
from yardstick.core.refusals import Listed, Refusal, RefusalKind, bad_request, forbidden, not_found
from yardstick.store.db import Database
from yardstick.store.models import CreditAccount, Membership, Org, Purchase, Reservation, utcnow
from yardstick.store.states import BillingRole, PurchaseState

CHECKOUT_PATH = "/billing/checkout"
# What an org slug may look like in a billing query: anything else is refused before a lookup.
ORG_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class PaymentProvider(Protocol):
    """Where a purchase is paid. `checkout_url` opens a payment for a new purchase (None: none to open)."""

    def checkout_url(
        self, purchase_id: str, org: str, package: CreditPackage, base_url: str
    ) -> str | None: ...


class AdminSettles:
    """The built-in provider: no outside service. The checkout link is a page of the platform saying that an
    administrator settles the purchase (`yardstick admin credits settle PURCHASE_ID`) once paid by
    whatever means the operator takes."""

    def checkout_url(self, purchase_id: str, org: str, package: CreditPackage, base_url: str) -> str | None:
        return f"{base_url.rstrip('/')}{CHECKOUT_PATH}/{purchase_id}"


@dataclass(frozen=True)
class Account:
    """An org's billing as one of its members sees it."""

    org: Org
    role: str
    posted_units: int
    reserved_units: int


@dataclass(frozen=True)
class PurchaseInfo:
    """A purchase as a member sees it: the payable link only while it is open and its initiator may still
    pay it (holds the spender role); a reviewed purchase says why."""

    id: str
    package: CreditPackage
    initiated_by: int
    created_at: dt.datetime
    checkout_url: str | None
    granted_at: dt.datetime | None
    review_reason: str | None


class Purchases:
    """The operator's terms (tariff, packages), the payment provider, and what a member may read and do."""

    def __init__(self, db: Database, terms: BillingTerms, provider: PaymentProvider) -> None:
        self.db = db
        self.tariff: Tariff = terms.tariff()
        self.packages = tuple(terms.package(i) for i in range(len(terms.packages)))
        self.provider = provider

    def held(self, run_id: int) -> Reservation | None:
        """What a run holds, if it was admitted paying as it goes."""
        with self.db.reading() as session:
            return session.get(Reservation, run_id)

    def held_by(self, run_ids: list[int]) -> dict[int, Reservation]:
        """What each of those runs holds (those admitted paying as they go), in one query."""
        if not run_ids:
            return {}
        with self.db.reading() as session:
            found = session.execute(select(Reservation).where(Reservation.submission_id.in_(run_ids)))
            return {row.submission_id: row for row in found.scalars()}

    def account(self, caller: Caller, slug: str) -> Account:
        with self.db.reading() as session:
            org, role = _membership(session, caller, slug)
            account = session.get(CreditAccount, org.id)
        return Account(
            org, role, account.posted_units if account else 0, account.reserved_units if account else 0
        )

    def create(self, caller: Caller, slug: str, package_id: str, key: str, base_url: str) -> PurchaseInfo:
        """Open a purchase of a package; the same transaction key in the org answers the same purchase."""

        def earlier(session: Session) -> PurchaseInfo | None:
            org, _ = _membership(session, caller, slug)
            found = _by_key(session, org.id, key, caller.user_id, package_id)
            return None if found is None else _info(session, found)

        def create(session: Session) -> PurchaseInfo:
            org, role = _membership(session, caller, slug)
            if role != BillingRole.SPENDER:
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
                state=PurchaseState.OPEN,
                checkout_url=self.provider.checkout_url(purchase_id, org.slug, package, base_url),
                created_at=utcnow(),
            )
            session.add(row)
            session.flush()
            return _info(session, row)

        return create_once(self.db, earlier=earlier, create=create)[0]

    def _package(self, package_id: str) -> CreditPackage:
        found = next((p for p in self.packages if p.id == package_id), None)
        if found is None:
            offered = [str(p.id) for p in self.packages]
            raise bad_request(
                f"package_id: {package_id!r} is not a package on offer"
                f" ({', '.join(offered) or 'none are configured'})",
                listed=[Listed("packages", tuple(offered))],
            )
        return found

    def get(self, caller: Caller, purchase_id: str) -> PurchaseInfo:
        with self.db.reading() as session:
            row = session.get(Purchase, purchase_id)
            if row is None or not (caller.is_admin or row.org_id in caller.org_ids):
                raise not_found(f"id: no purchase {purchase_id!r} that you can see")
            return _info(session, row)

    def page(
        self, caller: Caller, slug: str, after: str | None, limit: int
    ) -> tuple[list[PurchaseInfo], str | None]:
        """One page of an org's purchases, oldest first; the page's last id when more remain."""
        size = min(limit, limits.PAGE_SIZE_MAX)
        with self.db.reading() as session:
            org, _ = _membership(session, caller, slug)
            anchor = None
            if after is not None:
                found = session.get(Purchase, after)
                if found is None or found.org_id != org.id:
                    raise bad_request(f"after: {after!r} is no purchase of {org.slug!r} to page from")
                anchor = (found.created_at, found.id)
            rows, more = keyset_page(
                session,
                select(Purchase).where(Purchase.org_id == org.id),
                order=(Purchase.created_at, Purchase.id),
                after=anchor,
                size=size,
            )
            spenders = _spenders(session, org.id)
            infos = [_info(session, row, spenders) for row in rows]
        return infos, (infos[-1].id if more and infos else None)

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
            f"org: {slug!r} is not an organization you belong to",
            listed=[Listed("organizations", tuple(o.slug for o in caller.orgs))],
        )
    return found[0], found[1] or BillingRole.NONE


def _by_key(session: Session, org_id: int, key: str, user_id: int, package_id: str) -> Purchase | None:
    earlier = session.execute(
        select(Purchase).where(Purchase.org_id == org_id, Purchase.transaction_key == key)
    ).scalar_one_or_none()
    if earlier is None:
        return None
    if earlier.initiated_by != user_id:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"transaction_key: {key!r} already names a purchase by another member of this org",
        )
    if earlier.package.get("id") != package_id:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"transaction_key: {key!r} already bought package {earlier.package.get('id')!r}"
            f" (purchase {earlier.id}), not {package_id!r}",
        )
    return earlier


def _spenders(session: Session, org_id: int) -> set[int]:
    return set(
        session.execute(
            select(Membership.user_id).where(
                Membership.org_id == org_id, Membership.billing_role == BillingRole.SPENDER
            )
        ).scalars()
    )


def _info(session: Session, row: Purchase, spenders: set[int] | None = None) -> PurchaseInfo:
    may_pay = row.initiated_by in (spenders if spenders is not None else _spenders(session, row.org_id))
    return PurchaseInfo(
        id=row.id,
        package=CreditPackage.model_validate(row.package),
        initiated_by=row.initiated_by,
        created_at=row.created_at,
        checkout_url=row.checkout_url
        if row.state == PurchaseState.OPEN and may_pay and row.checkout_url
        else None,
        granted_at=row.granted_at,
        review_reason=(row.review_reason or "under review") if row.state == PurchaseState.REVIEW else None,
    )
