"""The built-in payment provider's checkout page: where a purchase's `checkout_url` leads. The link is the
credential (its id is unguessable), and the page only says how the purchase gets settled."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from yardstick.billing.money import CreditPackage
from yardstick.billing.purchases import CHECKOUT_PATH
from yardstick.billing.terms import credits
from yardstick.http.services import Purch
from yardstick.store.states import PurchaseState
from yardstick.web.site import PAGES

router = APIRouter(include_in_schema=False)


@router.get(CHECKOUT_PATH + "/{purchase_id}")
def checkout(purchase_id: str, purchases: Purch) -> HTMLResponse:
    found = purchases.checkout(purchase_id)
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
        if row.state == PurchaseState.GRANTED
        else "It is open: an administrator of this platform settles it once it is paid, and the credits"
        " then appear in the organization's balance.",
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
