"""The services a route may use, injected one way: as typed dependencies read from the app the gateway
composed (`gateway.app.create_app` puts them on `app.state`). A route names what it needs in its
signature (`plat: Plat`, `purchases: Purch`, `sign_in: SignInService`, `hosting: HostingService`); no
router is built around a service it captured."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from yardstick.billing.purchases import Purchases
from yardstick.core.hosting import Hosting
from yardstick.core.platform import Platform
from yardstick.signin.service import SignIn

__all__ = [
    "HostingService",
    "Plat",
    "Purch",
    "SignInService",
    "hosting_of",
    "platform_of",
    "purchases_of",
    "sign_in_of",
]

# `async`: FastAPI runs a plain `def` dependency in a thread of its pool, a trip costing more than the read.


async def platform_of(request: Request) -> Platform:
    found: Platform = request.app.state.platform
    return found


async def hosting_of(request: Request) -> Hosting:
    """The platform's registry of hosted code (a Sequences benchmark's or deployment's versions)."""
    return (await platform_of(request)).hosting


async def purchases_of(request: Request) -> Purchases:
    found: Purchases = request.app.state.purchases
    return found


async def sign_in_of(request: Request) -> SignIn:
    found: SignIn = request.app.state.sign_in
    return found


Plat = Annotated[Platform, Depends(platform_of)]
Purch = Annotated[Purchases, Depends(purchases_of)]
SignInService = Annotated[SignIn, Depends(sign_in_of)]
HostingService = Annotated[Hosting, Depends(hosting_of)]
