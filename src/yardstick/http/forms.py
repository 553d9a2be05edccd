"""Form bodies, as the sign-in's routes read them (the device flow's endpoints and the approval pages): each
field once, UTF-8, a bounded size; and the headers of an answer that carries a secret."""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import Request

from yardstick.signin.service import SignIn

__all__ = ["MAX_FORM_BYTES", "NO_STORE", "FormRefused", "base_url", "form_of"]

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
MAX_FORM_BYTES = 16_384


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
