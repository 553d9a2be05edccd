"""What an administrator does with an org's credits: billing roles, grants, settling purchases, a summary."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from yardstick.billing import credits as billing
from yardstick.billing.terms import BillingConfigError, parse_credits
from yardstick.core.admin import AdminError, one_of, org, user
from yardstick.store.models import Membership, Org
from yardstick.store.states import BillingRole, LedgerKind


def set_billing_role(session: Session, slug: str, login: str, role: str) -> None:
    """Whether a member may spend the org's money (buy credits): `spender`, or `none`."""
    one_of("billing role", role, BillingRole)
    found = session.get(Membership, (user(session, login).id, org(session, slug).id))
    if found is None:
        raise AdminError(
            f"user {login!r} is not a member of org {slug!r} (yardstick admin user create --org)"
        )
    found.billing_role = BillingRole(role)


def grant_credits(session: Session, slug: str, amount: str, note: str = "") -> tuple[int, int]:
    """Add credits to an org's balance: `amount` in credits (`100`, `2.5`) or integer units with a `u`
    suffix. Returns the units granted and the balance's posted units after."""
    try:
        units = parse_credits(amount)
        account = billing.post(
            session, org(session, slug).id, units, kind=LedgerKind.GRANT, note=note or "granted"
        )
    except (billing.BillingError, BillingConfigError) as exc:
        raise AdminError(str(exc)) from None
    return units, account.posted_units


def settle_purchase(session: Session, purchase_id: str, note: str = "") -> tuple[str, int]:
    """Grant an open purchase's credits once its payment arrived (the built-in payment provider's way of
    confirming one). Returns the org's slug and the units granted."""
    try:
        row = billing.settle_purchase(session, purchase_id, note)
    except billing.BillingError as exc:
        raise AdminError(str(exc)) from None
    found = session.get(Org, row.org_id)
    return (found.slug if found else "?"), int(row.package["credit_units"])


def credit_summary(session: Session, slug: str) -> dict[str, Any]:
    return billing.describe(session, org(session, slug).id)
