"""The pages a person signs in and approves a device code on (`/device`, `/signin`, `/signout`), over the
sign-in service's sessions, grants and throttles.

The approval page must not be framed by another site (a click there would approve someone's code), nor leak
its URL (the code) in a Referer to another site. `same-origin`, not `no-referrer`: under the latter a
browser sends `Origin: null` with the page's own forms, which the origin check below would refuse.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from yardstick.http.forms import NO_STORE, FormRefused, form_of
from yardstick.http.services import SignInService
from yardstick.signin.device import normalize_user_code
from yardstick.signin.service import SignIn
from yardstick.signin.sessions import FORM_COOKIE, SESSION_COOKIE, SignedIn
from yardstick.web.site import PAGES

PAGE_HEADERS = {
    **NO_STORE,
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
}


# --- the pages ------------------------------------------------------------------------------------------


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(
        PAGES.get_template(template).render(**context), status_code=status, headers=PAGE_HEADERS
    )


def _refused(status: int, message: str) -> HTMLResponse:
    return _page("message.html", status, title="ProviderRefused", message=message)


def _form_ok(service: SignIn, request: Request, anchor: str | None, form: dict[str, str]) -> bool:
    """A form of this site's own page: the browser says it came from here, and it carries the CSRF token
    of `anchor` (the session's cookie, or the sign-in form's)."""
    return _same_origin(request) and service.sessions.csrf_ok(anchor, form.get("csrf"))


def _same_origin(request: Request) -> bool:
    """A browser names the page a form came from; one from another site is refused whatever it carries."""
    origin = request.headers.get("origin")
    if origin is None:
        return True  # an older browser, or no browser: the CSRF token decides
    return origin.split("://", 1)[-1] == request.headers.get("host", "")


def _safe_next(target: str) -> str:
    """Where to go after signing in: a path of this site only (never `//elsewhere`)."""
    if target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/device"


def _secure(service: SignIn, request: Request) -> bool:
    return request.url.scheme == "https" or (service.settings.public_url or "").startswith("https:")


def _client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _minutes(seconds: float) -> int:
    return max(1, round(seconds / 60))


router = APIRouter(include_in_schema=False)


async def signed_in(service: SignIn, request: Request) -> SignedIn | None:
    return await run_in_threadpool(service.sessions.find, request.cookies.get(SESSION_COOKIE))


def signin_page(
    service: SignIn,
    request: Request,
    target: str,
    *,
    error: str | None = None,
    status: int = 200,
    login: str = "",
) -> HTMLResponse:
    """The sign-in form, with a pre-session cookie for its CSRF token."""
    anchor = request.cookies.get(FORM_COOKIE) or _new_anchor()
    response = _page(
        "signin.html",
        status,
        next=_safe_next(target),
        csrf=service.sessions.csrf(anchor),
        error=error,
        login=login,
    )
    response.set_cookie(
        FORM_COOKIE, anchor, httponly=True, samesite="strict", secure=_secure(service, request), path="/"
    )
    return response


def device_page(
    service: SignIn, signed: SignedIn, state: str, status: int = 200, **context: Any
) -> HTMLResponse:
    """The approval page in one of its states, its forms carrying the session's CSRF token."""
    csrf = service.sessions.csrf(signed.cookie)
    return _page("device.html", status, user=signed, csrf=csrf, state=state, **context)


async def confirm(service: SignIn, signed: SignedIn, typed: str) -> HTMLResponse:
    throttled = service.code_throttle.wait_s(f"user:{signed.user_id}")
    if throttled:
        return device_page(service, signed, "enter", 429, error=_too_many(throttled))
    code = normalize_user_code(typed)
    pending = await run_in_threadpool(service.grants.pending, code) if code else None
    if pending is None:
        service.code_throttle.fail(f"user:{signed.user_id}")
        return device_page(
            service,
            signed,
            "enter",
            404,
            error="No sign-in is waiting for that code: check it against your terminal "
            "(it may have expired, or been decided already).",
        )
    left = max(0, int((pending.expires_at - dt.datetime.now(dt.UTC)).total_seconds()))
    return device_page(service, signed, "confirm", grant=pending, left_s=left)


@router.get("/device", response_class=HTMLResponse)
async def device(service: SignInService, request: Request, code: str = "") -> HTMLResponse:
    """Where the CLI sends a person: sign in, then confirm the code shown in the terminal."""
    signed = await signed_in(service, request)
    if signed is None:
        return signin_page(service, request, f"/device?code={quote(code)}" if code else "/device")
    if not code:
        return device_page(service, signed, "enter")
    return await confirm(service, signed, code)


@router.post("/device", response_class=HTMLResponse)
async def decide(service: SignInService, request: Request) -> Response:
    signed = await signed_in(service, request)
    try:
        form = await form_of(request)
    except FormRefused as exc:
        return _refused(400, str(exc))
    if signed is None:
        return signin_page(
            service, request, "/device", error="Your session ended: sign in again.", status=401
        )
    if not _form_ok(service, request, signed.cookie, form):
        return _refused(403, _CSRF_MESSAGE)
    decision = form.get("decision", "")
    if decision not in ("approve", "deny"):
        return _refused(400, "decision: approve or deny")
    throttled = service.code_throttle.wait_s(f"user:{signed.user_id}")
    if throttled:
        return device_page(service, signed, "enter", 429, error=_too_many(throttled))
    code = normalize_user_code(form.get("user_code", ""))
    decided = code is not None and await run_in_threadpool(
        service.grants.decide, code, signed.user_id, decision == "approve"
    )
    if not decided:
        service.code_throttle.fail(f"user:{signed.user_id}")
        return device_page(
            service,
            signed,
            "enter",
            404,
            error="That code is no longer waiting (expired, or decided already).",
        )
    return device_page(service, signed, "approved" if decision == "approve" else "denied")


@router.get("/signin", response_class=HTMLResponse)
async def signin_form(service: SignInService, request: Request, next: str = "/device") -> Response:
    if await signed_in(service, request) is not None:
        return RedirectResponse(_safe_next(next), status_code=303)
    return signin_page(service, request, next)


@router.post("/signin", response_class=HTMLResponse)
async def signin(service: SignInService, request: Request) -> Response:
    try:
        form = await form_of(request)
    except FormRefused as exc:
        return _refused(400, str(exc))
    target, login, password = (
        form.get("next", "/device"),
        form.get("login", "").strip(),
        form.get("password", ""),
    )
    if not _form_ok(service, request, request.cookies.get(FORM_COOKIE), form):
        return signin_page(service, request, target, error=_CSRF_MESSAGE, status=403, login=login)
    if not login or not password:
        return signin_page(
            service, request, target, error="login and password: both required", status=400, login=login
        )
    throttles = (f"login:{login}", f"address:{_client_address(request)}")
    waits = [service.password_throttle.wait_s(key) for key in throttles]
    if max(waits):
        return signin_page(service, request, target, error=_too_many(max(waits)), status=429, login=login)
    user = await run_in_threadpool(service.check_password, login, password)
    if user is None:
        for key in throttles:
            service.password_throttle.fail(key)
        return signin_page(
            service, request, target, error="Wrong login or password.", status=401, login=login
        )
    service.password_throttle.clear(throttles[0])
    cookie = await run_in_threadpool(service.sessions.start, user.id)
    response = RedirectResponse(_safe_next(target), status_code=303, headers=NO_STORE)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=service.settings.session_ttl_s,
        httponly=True,
        samesite="lax",
        secure=_secure(service, request),
        path="/",
    )
    response.delete_cookie(FORM_COOKIE, path="/")
    return response


@router.get("/signout", response_class=HTMLResponse)
async def signout_form(service: SignInService, request: Request) -> Response:
    signed = await signed_in(service, request)
    if signed is None:
        return _page("message.html", title="Signed out", message="You are not signed in.")
    return device_page(service, signed, "signout")


@router.post("/signout", response_class=HTMLResponse)
async def signout(service: SignInService, request: Request) -> Response:
    signed = await signed_in(service, request)
    try:
        form = await form_of(request)
    except FormRefused as exc:
        return _refused(400, str(exc))
    if signed is not None:
        if not _form_ok(service, request, signed.cookie, form):
            return _refused(403, _CSRF_MESSAGE)
        await run_in_threadpool(service.sessions.end, signed.cookie)
    response = _page("message.html", title="Signed out", message="You are signed out of this browser.")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


_CSRF_MESSAGE = "This form did not come from this page (or it is stale): reload the page and try again."


def _new_anchor() -> str:
    return secrets.token_urlsafe(32)


def _too_many(wait_s: float) -> str:
    return f"Too many wrong tries: wait {_minutes(wait_s)} minute(s) and try again."
