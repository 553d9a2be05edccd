"""A Sequences deployment's page (`/deployments/ORG/NAME`): its robots connected now and the episodes they
played while it captured, with their labels — for the org's members, signed in on this site's own sign-in
(the pages' session, as the device approval's). Anyone else is sent to sign in, or told there is no such
deployment."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from yardstick.core.deployment_view import deployment_view
from yardstick.http.forms import NO_STORE
from yardstick.http.services import Plat, SignInService
from yardstick.web.signin_pages import signed_in
from yardstick.web.site import PAGES

__all__ = ["DEPLOYMENT_PAGE", "router"]

DEPLOYMENT_PAGE = "/deployments/{org}/{name}"

router = APIRouter(include_in_schema=False)


@router.get(DEPLOYMENT_PAGE, response_class=HTMLResponse)
async def deployment_page(
    org: str, name: str, request: Request, plat: Plat, sign_in: SignInService
) -> Response:
    signed = await signed_in(sign_in, request)
    if signed is None:
        return RedirectResponse(f"/signin?next={quote(request.url.path)}", status_code=303, headers=NO_STORE)
    view = await run_in_threadpool(deployment_view, plat, signed.user_id, org, name)
    if view is None:
        page = PAGES.get_template("message.html").render(
            title="No such deployment",
            message=f"No deployment {name!r} of {org!r} that {signed.login} may see: "
            "`seq policy ls` lists an org's deployments.",
        )
        return HTMLResponse(page, status_code=404, headers=NO_STORE)
    page = PAGES.get_template("deployment.html").render(view=view, user=signed.login)
    return HTMLResponse(page, headers=NO_STORE)
