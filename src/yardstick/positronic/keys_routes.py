"""A signed-in user's keys (`/v1/keys.create|list|revoke|rotate`): Yardstick's own routes beside the
contract's, in its envelope, what `yardstick login`, `logout` and `keys` call."""

from __future__ import annotations

import datetime as dt

from fastapi import Request
from fastapi.responses import JSONResponse
from platform_client.ids import UserId
from pydantic import BaseModel, ConfigDict

from yardstick.http.auth import Who, bearer
from yardstick.http.forms import NO_STORE
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import SignInService
from yardstick.positronic.errors import POSITRONIC

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


router = door_router(POSITRONIC, prefix="/v1", tags=["keys"])


@router.post("/keys.create", response_model=KeyMinted, responses=refusals(401))
def keys_create(body: KeyCreateRequest, service: SignInService) -> JSONResponse:
    """Mint a key for one machine from a sign-in credential (what `yardstick login` does with the
    platform's own device-flow token, spending it). Never revokes another machine's key."""
    user_id, login, minted, label = service.create_key(body.credential, body.label)
    shown = KeyMinted(
        user_id=UserId(user_id), login=login, api_key=minted.plaintext, prefix=minted.prefix, label=label
    )
    return JSONResponse(shown.model_dump(mode="json"), headers=NO_STORE)


@router.get("/keys.list", response_model=KeyListResponse)
def keys_list(request: Request, who: Who, service: SignInService) -> JSONResponse:
    """The caller's live keys: prefixes and labels only (a key's plaintext is never kept)."""
    current = bearer(request) or ""
    rows = service.list_keys(who)
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


@router.post("/keys.revoke", response_model=KeyRevoked, responses=refusals(404))
def keys_revoke(body: KeyRevokeRequest, who: Who, service: SignInService) -> JSONResponse:
    """Revoke one of the caller's keys by its prefix (the caller's own included: a sign-out)."""
    service.revoke_key(who, body.prefix.strip().rstrip("…"))
    return JSONResponse(KeyRevoked(revoked=body.prefix).model_dump(mode="json"))


@router.post("/keys.rotate", response_model=KeyMinted, responses=refusals(404))
def keys_rotate(request: Request, who: Who, service: SignInService) -> JSONResponse:
    """Revoke the key this call came with and mint its successor (same label), shown this once."""
    minted, label = service.rotate_key(bearer(request) or "")
    shown = KeyMinted(
        user_id=UserId(who.user_id),
        login=who.login,
        api_key=minted.plaintext,
        prefix=minted.prefix,
        label=label,
    )
    return JSONResponse(shown.model_dump(mode="json"), headers=NO_STORE)
