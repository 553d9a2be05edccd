"""`yardstick credits account | buy | purchase | purchases`: an org's credit account and its purchases,
through the contract's `billing.*` calls (the same `PlatformClient` as `client_cmd.py`).

Which org: `--org`, else the caller's sole membership (`users.me`); with none or several, `--org` is
required. The org used is said on stderr (`org: acme (sole organization)`), so stdout stays the answer.
Amounts are shown in credits (one credit is `CREDIT_SCALE` units); `--json` prints the contract's typed
answer with exact integer units.
"""

from __future__ import annotations

import typer
from platform_client.billing import PurchaseView
from platform_client.client import PlatformClient
from platform_client.ids import OrgSlug, PackageId, PurchaseId, TransactionKey
from platform_client.requests import BillingPurchaseCreateRequest
from positronic_evals.slug import slug_of
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from yardstick.billing.terms import credits
from yardstick.cli.client_cmd import AsJson, PlatformUrl, connected_client, print_json
from yardstick.cli.display import console, fail, print_table
from yardstick.cli.exits import Exit
from yardstick.cli.money import describe_tariff

credits_app = typer.Typer(
    help="An org's credits: balance, tariff, packages, purchases.", no_args_is_help=True
)

OrgOption = typer.Option(None, "--org", help="The organization [default: your sole one].")
PAGE_CAP = 200  # the most purchases the platform answers a page with


def _org(client: PlatformClient, given: str | None) -> OrgSlug:
    """`--org`, else the caller's only organization; said on stderr either way."""
    if given is not None:
        if not given.strip():
            fail(Exit.USAGE, "--org is empty: name an organization")
        console.print(f"org: {escape(given)}", style="dim")
        return OrgSlug(given)
    orgs = client.me().organizations
    if len(orgs) != 1:
        which = f"you belong to {', '.join(orgs)}" if orgs else "you belong to no organization"
        fail(Exit.USAGE, f"--org: required ({which})")
    console.print(f"org: {escape(orgs[0])} (sole organization)", style="dim")
    return orgs[0]


@credits_app.command("account")
def account(
    org: str | None = OrgOption, as_json: bool = AsJson, platform_url: str | None = PlatformUrl
) -> None:
    """The org's billing mode, your billing role, its balance, the tariff and the packages on sale."""
    with connected_client(platform_url, as_json) as client:
        found = client.billing_account(_org(client, org))
    if as_json:
        print_json(found)
        return
    balance = found.balance
    mode, role = slug_of(found.mode), slug_of(found.billing_role)
    console.print(f"[bold]{escape(found.org)}[/bold]: {mode}, your billing role {role}")
    console.print(
        f"balance: {credits(balance.available_units)} credits available "
        f"({credits(balance.posted_units)} posted, {credits(balance.reserved_units)} held by runs)"
    )
    console.print(f"tariff: {describe_tariff(found.tariff)}", soft_wrap=True)
    table = Table(title="packages", title_justify="left")
    for column in ("package", "credits", "price"):
        table.add_column(column, justify="left" if column == "package" else "right")
    for package in found.packages:
        table.add_row(
            Text(str(package.id)),
            credits(package.credit_units),
            f"{package.amount_minor} {package.currency} (minor units)",
        )
    print_table(table)


def _show_purchase(view: PurchaseView) -> None:
    state = (
        f"granted {view.granted_at:%Y-%m-%d %H:%M} UTC"
        if view.granted_at
        else f"under review: {view.review_reason}"
        if view.review_reason
        else "open"
    )
    console.print(
        f"purchase {escape(str(view.id))}: package {escape(str(view.package.id))}, "
        f"{credits(view.package.credit_units)} credits, {state}",
        soft_wrap=True,
    )
    if view.checkout_url:
        console.print(f"pay here: {escape(view.checkout_url)}", soft_wrap=True)


@credits_app.command("buy")
def buy(
    package_id: str = typer.Option(..., "--package-id", help="A package `credits account` lists."),
    transaction_key: str = typer.Option(
        ..., "--transaction-key", help="Stable per purchase: the same key reads the same purchase back."
    ),
    org: str | None = OrgOption,
    as_json: bool = AsJson,
    platform_url: str | None = PlatformUrl,
) -> None:
    """Buy a package of credits (the billing role spender); the credits land once the payment is confirmed."""
    with connected_client(platform_url, as_json) as client:
        slug = _org(client, org)
        try:
            request = BillingPurchaseCreateRequest(
                org=slug, package_id=PackageId(package_id), transaction_key=TransactionKey(transaction_key)
            )
        except ValidationError as exc:
            fail(Exit.USAGE, "; ".join(f"--{'-'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()))
        bought = client.create_purchase(request)
    if as_json:
        print_json(bought)
        return
    _show_purchase(bought)


@credits_app.command("purchase")
def purchase(
    purchase_id: str = typer.Argument(..., help="The purchase's id."),
    as_json: bool = AsJson,
    platform_url: str | None = PlatformUrl,
) -> None:
    """One purchase: its package, and whether it is open, under review or granted."""
    with connected_client(platform_url, as_json) as client:
        found = client.get_purchase(PurchaseId(purchase_id))
    if as_json:
        print_json(found)
        return
    _show_purchase(found)


@credits_app.command("purchases")
def purchases(
    org: str | None = OrgOption,
    limit: int = typer.Option(50, min=1, help=f"Purchases a page (the platform clamps to {PAGE_CAP})."),
    after: str | None = typer.Option(None, help="The page after this purchase id (a page's `next`)."),
    every: bool = typer.Option(False, "--all", help="Every page, not just one."),
    as_json: bool = AsJson,
    platform_url: str | None = PlatformUrl,
) -> None:
    """The org's purchases, oldest first, a page at a time (`--all` follows `next` to the end)."""
    rows: list[PurchaseView] = []
    with connected_client(platform_url, as_json) as client:
        slug = _org(client, org)
        cursor = PurchaseId(after) if after else None
        while True:
            page = client.list_purchases(slug, after=cursor, limit=limit)
            rows += page.purchases
            cursor = page.next
            if cursor is None or not every:
                break
    if as_json:
        print_json({"purchases": [r.model_dump(mode="json") for r in rows], "next": cursor})
        return
    table = Table(title=f"{len(rows)} purchases of {slug}", title_justify="left")
    for column in ("purchase", "package", "credits", "created", "state"):
        table.add_column(
            column, justify="right" if column == "credits" else "left", no_wrap=column == "purchase"
        )
    for row in rows:
        state = "granted" if row.granted_at else "review" if row.review_reason else "open"
        table.add_row(
            Text(str(row.id)),
            Text(str(row.package.id)),
            credits(row.package.credit_units),
            f"{row.created_at:%Y-%m-%d %H:%M}",
            state,
        )
    print_table(table)
    if cursor is not None:
        console.print(f"more: --after {cursor}", style="dim")
