"""The device flow's two endpoints (RFC 8628): `/oauth/device/code` starts a sign-in, `/oauth/token` polls it.
Their own contract: form bodies in, JSON out, RFC error codes (`authorization_pending`, `slow_down`,
`access_denied`, `expired_token`). Secrets travel in bodies, never in a query string, and every answer that
carries one says `Cache-Control: no-store`."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from yardstick.http.forms import NO_STORE, FormRefused, base_url, form_of
from yardstick.http.services import SignInService
from yardstick.signin.device import DEVICE_GRANT_TYPE, OAuthError

# --- the device flow (RFC 8628) ---------------------------------------------------------------------------


def _oauth_error(exc: OAuthError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=400, headers=NO_STORE)


# The OpenAPI of these two routes: their own bodies, an RFC 6749 error for a request refused.
_OAUTH_ERROR = {
    "description": "An RFC 6749 error: invalid_request, authorization_pending, slow_down, access_denied, "
    "expired_token, unsupported_grant_type",
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["error"],
                "properties": {"error": {"type": "string"}, "error_description": {"type": "string"}},
            }
        }
    },
}
_FORM = {
    "requestBody": {
        "required": True,
        "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}},
    }
}


router = APIRouter(prefix="/oauth", tags=["sign-in"])


@router.post("/device/code", responses={400: _OAUTH_ERROR}, openapi_extra=_FORM)
async def device_code(request: Request, service: SignInService) -> JSONResponse:
    """Start a device sign-in (RFC 8628 §3.1): form `client_id` (any name), `scope` (ignored)."""
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


@router.post("/token", responses={400: _OAUTH_ERROR}, openapi_extra=_FORM)
async def token(request: Request, service: SignInService) -> JSONResponse:
    """Poll a device sign-in (RFC 8628 §3.4): form `grant_type`, `device_code`, `client_id`."""
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
