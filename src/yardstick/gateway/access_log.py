"""The access log keeps no credential. Some credentials travel in URLs by design: a run page's token
(`/v/<token>/`, the link is the key), an artifact link's signature (`sig=`, good for an hour) and a device
sign-in's user code (`/device?code=`). uvicorn's access log writes every request's path and query, so its
records pass through `RedactCredentials`, which blanks those parts before any handler formats them."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

REDACTED = "…"

_RULES = (
    # /v/<token>/... : the token is the page's credential.
    (re.compile(r"(/v/)[^/?#\s]+"), rf"\1{REDACTED}"),
    # ?sig=<hex>&... and ?code=<user code>: in any query, any route.
    (
        re.compile(r"([?&](?:sig|code|device_code|token|access_token)=)[^&#\s]*", re.IGNORECASE),
        rf"\1{REDACTED}",
    ),
)


def redact(path: str) -> str:
    """`path` (with its query) with every credential blanked."""
    for pattern, replacement in _RULES:
        path = pattern.sub(replacement, path)
    return path


class RedactCredentials(logging.Filter):
    """Rewrites uvicorn's access records (`client, method, path, http version, status`) in place."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact(args[2]), *args[3:])
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with the access log's records redacted."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_credentials"] = {"()": RedactCredentials}
    config["handlers"]["access"].setdefault("filters", []).append("redact_credentials")
    return config
