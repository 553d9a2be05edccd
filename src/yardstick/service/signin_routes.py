"""The sign-in routes: the device flow's two endpoints (`/oauth/device/code`, `/oauth/token`, RFC 8628), the
pages a person approves a code on (`/device`, `/signin`, `/signout`), and a signed-in user's keys
(`/v1/keys.create|list|revoke|rotate`, ours, beside the contract's routes).

Secrets travel in bodies, headers and cookies, never in a query string, so no access log can carry one
(the user code in `/device?code=` is no secret: it does nothing without a signed-in person approving it).
Answers that carry a secret say `Cache-Control: no-store`.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Annotated, Any
from urllib.parse import parse_qsl, quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from platform_client.ids import UserId
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from yardstick.service.device import DEVICE_GRANT_TYPE, OAuthError, normalize_user_code
from yardstick.service.identity import Caller
from yardstick.service.platform import Platform
from yardstick.service.positronic import caller
from yardstick.service.sessions import FORM_COOKIE, SESSION_COOKIE, SignedIn
from yardstick.service.signin import SignIn, service_for
from yardstick.web.site import PAGES

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
# The approval page must not be framed by another site (a click there would approve someone's code), nor
# leak its URL (the code) in a Referer to another site. `same-origin`, not `no-referrer`: under the latter a
# browser sends `Origin: null` with the page's own forms, which the origin check below would refuse.
PAGE_HEADERS = {
    **NO_STORE,
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "same-origin",
}
MAX_FORM_BYTES = 16_384

Who = Annotated[Caller, Depends(caller)]


# --- forms -----------------------------------------------------------------------------------------------


class FormRefused(Exception):
    pass


async def form_of(request: Request) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body, each field once (RFC 6749 §3.1)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise FormRefused("the body is a form: Content-Type: application/x-www-form-urlencoded")
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise FormRefused(f"the form is larger than {MAX_FORM_BYTES} bytes")
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=50, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise FormRefused("the form does not parse (UTF-8, at most 50 fields)") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise FormRefused(f"{name}: given more than once")
        fields[name] = value
    return fields


def base_url(service: SignIn, request: Request) -> str:
    return (service.settings.public_url or str(request.base_url)).rstrip("/")


# --- the device flow (RFC 8628) ---------------------------------------------------------------------------


def _oauth_error(exc: OAuthError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=400, headers=NO_STORE)


def oauth_router(platform: Platform) -> APIRouter:
    router = APIRouter(prefix="/oauth", tags=["sign-in"])

    @router.post("/device/code")
    async def device_code(request: Request) -> JSONResponse:
        """Start a device sign-in (RFC 8628 §3.1): form `client_id` (any name), `scope` (ignored)."""
        service = service_for(platform)
        try:
            form = await form_of(request)
            started = await run_in_threadpool(service.grants.start, form.get("client_id", "").strip())
        except FormRefused as exc:
            return _oauth_error(OAuthError("invalid_request", str(exc)))
        except OAuthError as exc:
            return _oauth_error(exc)
        device_page = base_url(service, request) + "/device"
        return JSONResponse(
            {
                "device_code": started.device_code,
                "user_code": started.user_code,
                "verification_uri": device_page,
                "verification_uri_complete": f"{device_page}?code={quote(started.user_code)}",
                "expires_in": started.expires_in,
                "interval": started.interval,
            },
            headers=NO_STORE,
        )

    @router.post("/token")
    async def token(request: Request) -> JSONResponse:
        """Poll a device sign-in (RFC 8628 §3.4): form `grant_type`, `device_code`, `client_id`."""
        service = service_for(platform)
        try:
            form = await form_of(request)
            grant_type = form.get("grant_type", "")
            if not grant_type:
                raise OAuthError("invalid_request", f"grant_type: required ({DEVICE_GRANT_TYPE})")
            if grant_type != DEVICE_GRANT_TYPE:
                raise OAuthError("unsupported_grant_type", f"grant_type: only {DEVICE_GRANT_TYPE} is taken")
            for field in ("device_code", "client_id"):
                if not form.get(field):
                    raise OAuthError("invalid_request", f"{field}: required")
            access = await run_in_threadpool(service.grants.poll, form["device_code"], form["client_id"])
        except FormRefused as exc:
            return _oauth_error(OAuthError("invalid_request", str(exc)))
        except OAuthError as exc:
            return _oauth_error(exc)
        return JSONResponse(
            {"access_token": access, "token_type": "bearer", "expires_in": service.settings.token_ttl_s},
            headers=NO_STORE,
        )

    return router


# --- the pages ------------------------------------------------------------------------------------------


def _page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(
        PAGES.get_template(template).render(**context), status_code=status, headers=PAGE_HEADERS
    )


def _refused(status: int, message: str) -> HTMLResponse:
    return _page("message.html", status, title="Refused", message=message)


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


def pages_router(platform: Platform) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def signed_in(request: Request) -> SignedIn | None:
        return await run_in_threadpool(
            service_for(platform).sessions.find, request.cookies.get(SESSION_COOKIE)
        )

    def signin_page(
        request: Request, target: str, *, error: str | None = None, status: int = 200, login: str = ""
    ) -> HTMLResponse:
        """The sign-in form, with a pre-session cookie for its CSRF token."""
        service = service_for(platform)
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

    def device_page(signed: SignedIn, state: str, status: int = 200, **context: Any) -> HTMLResponse:
        """The approval page in one of its states, its forms carrying the session's CSRF token."""
        csrf = service_for(platform).sessions.csrf(signed.cookie)
        return _page("device.html", status, user=signed, csrf=csrf, state=state, **context)

    async def confirm(signed: SignedIn, typed: str) -> HTMLResponse:
        service = service_for(platform)
        throttled = service.code_throttle.wait_s(f"user:{signed.user_id}")
        if throttled:
            return device_page(signed, "enter", 429, error=_too_many(throttled))
        code = normalize_user_code(typed)
        pending = await run_in_threadpool(service.grants.pending, code) if code else None
        if pending is None:
            service.code_throttle.fail(f"user:{signed.user_id}")
            return device_page(
                signed,
                "enter",
                404,
                error="No sign-in is waiting for that code: check it against your terminal "
                "(it may have expired, or been decided already).",
            )
        left = max(0, int((pending.expires_at - dt.datetime.now(dt.UTC)).total_seconds()))
        return device_page(signed, "confirm", grant=pending, left_s=left)

    @router.get("/device", response_class=HTMLResponse)
    async def device(request: Request, code: str = "") -> HTMLResponse:
        """Where the CLI sends a person: sign in, then confirm the code shown in the terminal."""
        signed = await signed_in(request)
        if signed is None:
            return signin_page(request, f"/device?code={quote(code)}" if code else "/device")
        if not code:
            return device_page(signed, "enter")
        return await confirm(signed, code)

    @router.post("/device", response_class=HTMLResponse)
    async def decide(request: Request) -> Response:
        service = service_for(platform)
        signed = await signed_in(request)
        try:
            form = await form_of(request)
        except FormRefused as exc:
            return _refused(400, str(exc))
        if signed is None:
            return signin_page(request, "/device", error="Your session ended: sign in again.", status=401)
        if not _form_ok(service, request, signed.cookie, form):
            return _refused(403, _CSRF_MESSAGE)
        decision = form.get("decision", "")
        if decision not in ("approve", "deny"):
            return _refused(400, "decision: approve or deny")
        throttled = service.code_throttle.wait_s(f"user:{signed.user_id}")
        if throttled:
            return device_page(signed, "enter", 429, error=_too_many(throttled))
        code = normalize_user_code(form.get("user_code", ""))
        decided = code is not None and await run_in_threadpool(
            service.grants.decide, code, signed.user_id, decision == "approve"
        )
        if not decided:
            service.code_throttle.fail(f"user:{signed.user_id}")
            return device_page(
                signed, "enter", 404, error="That code is no longer waiting (expired, or decided already)."
            )
        return device_page(signed, "approved" if decision == "approve" else "denied")

    @router.get("/signin", response_class=HTMLResponse)
    async def signin_form(request: Request, next: str = "/device") -> Response:
        if await signed_in(request) is not None:
            return RedirectResponse(_safe_next(next), status_code=303)
        return signin_page(request, next)

    @router.post("/signin", response_class=HTMLResponse)
    async def signin(request: Request) -> Response:
        service = service_for(platform)
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
            return signin_page(request, target, error=_CSRF_MESSAGE, status=403, login=login)
        if not login or not password:
            return signin_page(
                request, target, error="login and password: both required", status=400, login=login
            )
        throttles = (f"login:{login}", f"address:{_client_address(request)}")
        waits = [service.password_throttle.wait_s(key) for key in throttles]
        if max(waits):
            return signin_page(request, target, error=_too_many(max(waits)), status=429, login=login)
        user = await run_in_threadpool(service.check_password, login, password)
        if user is None:
            for key in throttles:
                service.password_throttle.fail(key)
            return signin_page(request, target, error="Wrong login or password.", status=401, login=login)
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
    async def signout_form(request: Request) -> Response:
        signed = await signed_in(request)
        if signed is None:
            return _page("message.html", title="Signed out", message="You are not signed in.")
        return device_page(signed, "signout")

    @router.post("/signout", response_class=HTMLResponse)
    async def signout(request: Request) -> Response:
        service = service_for(platform)
        signed = await signed_in(request)
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

    return router


_CSRF_MESSAGE = "This form did not come from this page (or it is stale): reload the page and try again."


def _new_anchor() -> str:
    return secrets.token_urlsafe(32)


def _too_many(wait_s: float) -> str:
    return f"Too many wrong tries: wait {_minutes(wait_s)} minute(s) and try again."


# --- keys -----------------------------------------------------------------------------------------------

_INPUT = ConfigDict(extra="forbid", hide_input_in_errors=True)


class KeyCreateRequest(BaseModel):
    """`keys.create`: a key for this machine, for the account a sign-in credential names."""

    model_config = _INPUT
    credential: str
    label: str = ""


class KeyRevokeRequest(BaseModel):
    model_config = _INPUT
    prefix: str


class KeyView(BaseModel):
    prefix: str
    label: str
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    current: bool  # the key this call came with


class KeyListResponse(BaseModel):
    keys: list[KeyView]


class KeyMinted(BaseModel):
    """A key's plaintext, shown this once."""

    user_id: UserId
    login: str
    api_key: str
    prefix: str
    label: str


class KeyRevoked(BaseModel):
    revoked: str


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


def keys_router(platform: Platform) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["keys"])

    @router.post("/keys.create", response_model=KeyMinted)
    def keys_create(body: KeyCreateRequest) -> JSONResponse:
        """Mint a key for one machine from a sign-in credential (what `yardstick login` does with the
        platform's own device-flow token, spending it). Never revokes another machine's key."""
        user_id, login, minted, label = service_for(platform).create_key(body.credential, body.label)
        shown = KeyMinted(
            user_id=UserId(user_id), login=login, api_key=minted.plaintext, prefix=minted.prefix, label=label
        )
        return JSONResponse(shown.model_dump(mode="json"), headers=NO_STORE)

    @router.get("/keys.list", response_model=KeyListResponse)
    def keys_list(request: Request, who: Who) -> JSONResponse:
        """The caller's live keys: prefixes and labels only (a key's plaintext is never kept)."""
        current = _bearer(request)
        rows = service_for(platform).list_keys(who)
        listed = [
            KeyView(
                prefix=r.prefix,
                label=r.label,
                created_at=r.created_at,
                last_used_at=r.last_used_at,
                current=current.startswith(r.prefix),
            )
            for r in rows
        ]
        return JSONResponse(KeyListResponse(keys=listed).model_dump(mode="json"))

    @router.post("/keys.revoke", response_model=KeyRevoked)
    def keys_revoke(body: KeyRevokeRequest, who: Who) -> JSONResponse:
        """Revoke one of the caller's keys by its prefix (the caller's own included: a sign-out)."""
        service_for(platform).revoke_key(who, body.prefix.strip().rstrip("…"))
        return JSONResponse(KeyRevoked(revoked=body.prefix).model_dump(mode="json"))

    @router.post("/keys.rotate", response_model=KeyMinted)
    def keys_rotate(request: Request, who: Who) -> JSONResponse:
        """Revoke the key this call came with and mint its successor (same label), shown this once."""
        minted, label = service_for(platform).rotate_key(_bearer(request))
        shown = KeyMinted(
            user_id=UserId(who.user_id),
            login=who.login,
            api_key=minted.plaintext,
            prefix=minted.prefix,
            label=label,
        )
        return JSONResponse(shown.model_dump(mode="json"), headers=NO_STORE)

    return router


def router(platform: Platform) -> APIRouter:
    """Everything above, for `create_app` to include in one line."""
    combined = APIRouter()
    combined.include_router(oauth_router(platform))
    combined.include_router(pages_router(platform))
    combined.include_router(keys_router(platform))
    return combined
