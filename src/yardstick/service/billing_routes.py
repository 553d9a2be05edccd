"""The contract's billing routes (`billing.account`, `billing.purchases.create|get|list`), bound to its own
models, and the built-in payment provider's checkout page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from markupsafe import Markup
from platform_client import routes
from platform_client.billing import BillingAccount, CreditPackage, PurchaseListResponse, PurchaseView
from platform_client.requests import BillingPurchaseCreateRequest

from yardstick.service.billing import CHECKOUT_PATH, credits
from yardstick.service.positronic import Plat, Who, answer
from yardstick.web.site import PAGES

router = APIRouter()

# A query value that is present but empty is refused as one that is absent would be: by name, with a 422.
Text = Annotated[str, Query(min_length=1)]


@router.get(routes.BILLING_ACCOUNT, response_model=BillingAccount)
def billing_account(plat: Plat, who: Who, org: Text) -> JSONResponse:
    """The org's billing mode, the caller's billing role in it, its balance, the tariff and the packages."""
    return answer(plat.billing.account(who, org))


@router.post(routes.BILLING_PURCHASES_CREATE, response_model=PurchaseView)
def billing_purchases_create(
    body: BillingPurchaseCreateRequest, request: Request, plat: Plat, who: Who
) -> JSONResponse:
    """Buy a package (the spender role); the same `transaction_key` in the org returns the same purchase."""
    return answer(plat.billing.create_purchase(who, body, str(request.base_url)))


@router.get(routes.BILLING_PURCHASES_GET, response_model=PurchaseView)
def billing_purchases_get(plat: Plat, who: Who, id: Text) -> JSONResponse:
    return answer(plat.billing.purchase(who, id))


@router.get(routes.BILLING_PURCHASES_LIST, response_model=PurchaseListResponse)
def billing_purchases_list(
    plat: Plat,
    who: Who,
    org: Text,
    # Required, as the contract says: a client that omits it gets a 422, not a page it reads as the whole.
    limit: Annotated[int, Query(gt=0, description="The page size; above 200 it is clamped to 200.")],
    after: Annotated[str | None, Query(min_length=1)] = None,
) -> JSONResponse:
    return answer(plat.billing.purchases(who, org, after, limit))


@router.get(CHECKOUT_PATH + "/{purchase_id}", include_in_schema=False)
def checkout(purchase_id: str, plat: Plat) -> HTMLResponse:
    """Where a purchase's `checkout_url` leads with the built-in provider: the link is the credential (its id
    is unguessable), and the page only says how the purchase gets settled."""
    found = plat.billing.checkout(purchase_id)
    if found is None:
        return _message(404, "No such purchase", "This platform has no such purchase.")
    row, org = found
    package = CreditPackage.model_validate(row.package)
    return _message(
        200,
        "Credit purchase",
        # Markup.format escapes what it fills in.
        Markup(
            "Purchase <code>{}</code> of package <b>{}</b> ({} credits, {} {} in minor units) for <b>{}</b>."
        ).format(
            row.id, package.id, credits(package.credit_units), package.amount_minor, package.currency, org
        ),
        "Its credits were granted."
        if row.state == "granted"
        else "It is open: an administrator of this platform settles it once it is paid, and the credits then"
        " appear in the organization's balance.",
        Markup(
            "This platform takes no payments online. Administrators settle with "
            "<code>yardstick admin credits settle {}</code>."
        ).format(row.id),
    )


def _message(status: int, title: str, message: str, *more: str) -> HTMLResponse:
    page = PAGES.get_template("message.html").render(
        title=title, message=message, more=more, signin_link=False
    )
    return HTMLResponse(page, status_code=status)
