"""Calls to routes the contract's client has no method for (Yardstick's own, and a few of the contract's
that `yardstick login` and `yardstick keys` make by hand): over plain httpx, failing as the contract's client
fails (a `PlatformError` from the error envelope), so `explained_calls` explains every failure one way."""

from __future__ import annotations

from typing import Any

import httpx
from platform_client.errors import PlatformError
from platform_client.identity_providers import REQUEST_TIMEOUT


def http_to(url: str) -> httpx.Client:
    # An environment proxy would carry a plain-http key or token off the machine (as PlatformClient decides).
    return httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT, trust_env=url.startswith("https:"))


def call(
    http: httpx.Client,
    method: str,
    path: str,
    *,
    key: str | None = None,
    body: Any = None,
    params: dict[str, str] | None = None,
) -> Any:
    """One call; a refusal raises the contract's `PlatformError` as the client's calls do."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    response = http.request(method, path, json=body, params=params, headers=headers)
    if not 200 <= response.status_code < 300:
        try:
            payload: object = response.json()
        except ValueError:
            payload = response.text
        raise PlatformError.from_payload(response.status_code, payload)
    return response.json()
