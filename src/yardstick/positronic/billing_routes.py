"""The contract's billing routes (`billing.account`, `billing.purchases.create|get|list`), bound to its own
models, over the billing package's accounts and purchases: the platform's tariff, quotes and packages
(`billing.money`) are shown as the contract's models of the same fields, which check them again."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from fastapi.responses import JSONResponse
from platform_client import routes
from platform_client.billing import (
    BillingAccount,
    CreditBalance,
    CreditPackage,
    CreditQuote,
    PurchaseListResponse,
    PurchaseView,
    RequestBilling,
    Tariff,
)
from platform_client.enums import BillingMode, BillingRole, BillingState
from platform_client.ids import OrgSlug, PurchaseId, UserId
from platform_client.requests import BillingPurchaseCreateRequest

from yardstick.billing.purchases import PurchaseInfo, Purchases
from yardstick.http.auth import Who
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Purch
from yardstick.positronic.errors import POSITRONIC

# A query value that is present but empty is refused as one that is absent would be: by name, with a 422.
Text = Annotated[str, Query(min_length=1)]


def request_billing(purchases: Purchases, run_id: int) -> RequestBilling:
    """How an admitted run is billed: its frozen quote and hold, or packaged (nothing held)."""
    held = purchases.held(run_id)
    if held is None:
        return RequestBilling(mode=BillingMode.packaged, state=BillingState.settled)
    return RequestBilling(
        mode=BillingMode.pay_as_you_go,
        quote=CreditQuote.model_validate(held.quote),
        state=BillingState[held.state],
    )


def purchase_view(info: PurchaseInfo) -> PurchaseView:
    return PurchaseView(
        id=PurchaseId(info.id),
        package=CreditPackage.model_validate(info.package.as_json()),
        initiated_by=UserId(info.initiated_by),
        created_at=info.created_at,
        checkout_url=info.checkout_url,
        granted_at=info.granted_at,
        review_reason=info.review_reason,
    )


def _json(model: PurchaseView | BillingAccount | PurchaseListResponse) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"))


router = door_router(POSITRONIC)


@router.get(routes.BILLING_ACCOUNT, response_model=BillingAccount, responses=refusals(403, 404))
def billing_account(who: Who, org: Text, purchases: Purch) -> JSONResponse:
    """The org's billing mode, the caller's billing role in it, its balance, the tariff and the
    packages."""
    account = purchases.account(who, org)
    return _json(
        BillingAccount(
            org=OrgSlug(account.org.slug),
            mode=BillingMode[account.org.billing_mode],
            billing_role=BillingRole[account.role],
            balance=CreditBalance(posted_units=account.posted_units, reserved_units=account.reserved_units),
            tariff=Tariff.model_validate(purchases.tariff.as_json()),
            packages=tuple(CreditPackage.model_validate(p.as_json()) for p in purchases.packages),
        )
    )


@router.post(routes.BILLING_PURCHASES_CREATE, response_model=PurchaseView, responses=refusals(403, 404, 409))
def billing_purchases_create(
    body: BillingPurchaseCreateRequest, request: Request, who: Who, purchases: Purch
) -> JSONResponse:
    """Buy a package (the spender role); the same `transaction_key` in the org returns the same
    purchase."""
    info = purchases.create(
        who, str(body.org), str(body.package_id), str(body.transaction_key), str(request.base_url)
    )
    return _json(purchase_view(info))


@router.get(routes.BILLING_PURCHASES_GET, response_model=PurchaseView, responses=refusals(403, 404))
def billing_purchases_get(who: Who, id: Text, purchases: Purch) -> JSONResponse:
    return _json(purchase_view(purchases.get(who, id)))


@router.get(routes.BILLING_PURCHASES_LIST, response_model=PurchaseListResponse, responses=refusals(403, 404))
def billing_purchases_list(
    purchases: Purch,
    who: Who,
    org: Text,
    # Required, as the contract says: a client that omits it gets a 422, not a page it reads as the whole.
    limit: Annotated[int, Query(gt=0, description="The page size; above 200 it is clamped to 200.")],
    after: Annotated[str | None, Query(min_length=1)] = None,
) -> JSONResponse:
    infos, more = purchases.page(who, org, after, limit)
    return _json(
        PurchaseListResponse(
            purchases=[purchase_view(i) for i in infos], next=PurchaseId(more) if more else None
        )
    )
