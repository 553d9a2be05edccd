"""The Sequences door's error body, `{detail, code, retryable, retry_after_s?, request_id?, hint?, details?}`,
and its one table: the platform's refusal kinds to the contract's codes and statuses (which the SDK maps to
its exit statuses: 2 bad request, 3 auth, 4 not found, 5 conflict, 6 out of credit, 7 retry)."""

from __future__ import annotations

import secrets
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from yardstick.core.admission import Quota
from yardstick.core.refusals import Refusal, RefusalKind
from yardstick.sequences import paths, unoffered
from yardstick.sequences.models import ErrorBody

CODES: dict[RefusalKind, tuple[str, int]] = {
    RefusalKind.BAD_REQUEST: ("invalid_request", 400),
    RefusalKind.UNAUTHENTICATED: ("unauthenticated", 401),
    RefusalKind.FORBIDDEN: ("forbidden", 403),
    RefusalKind.NOT_FOUND: ("not_found", 404),
    RefusalKind.CONFLICT: ("conflict", 409),
    RefusalKind.EVAL_UNAVAILABLE: ("conflict", 409),
    RefusalKind.QUOTA_EXCEEDED: ("busy", 429),
    RefusalKind.INSUFFICIENT_CREDITS: ("insufficient_credit", 402),
    RefusalKind.TOO_LARGE: ("payload_too_large", 413),
    RefusalKind.UPSTREAM_UNAVAILABLE: ("upstream_error", 502),
    RefusalKind.INTERNAL: ("internal", 500),
    # A feature of the contract this install does not serve (sequences.unoffered): the contract's code for
    # "the platform lacks what this needs", not retryable, the CLI's exit 1 - not a 404 "no such thing".
    RefusalKind.NOT_OFFERED: ("dependency_missing", 424),
}

# What the SDK waits before retrying a refusal it may retry (the quota's day, an identity provider's outage).
RETRY_AFTER_S = 5.0
REQUEST_ID = "X-Seq-Request-Id"
EVAL_ID_PATTERN = r"^ev-[0-9a-f]{1,16}$"


def body(code: str, detail: str, *, retryable: bool, **fields: Any) -> dict[str, Any]:
    shown = ErrorBody(
        detail=detail, code=code, retryable=retryable, request_id=secrets.token_hex(8), **fields
    )
    return shown.model_dump(mode="json", exclude_none=True)


class Sequences:
    """The Sequences door: its paths, its error body."""

    def refusal(self, request: Request, refusal: Refusal) -> Response:
        code, status = CODES[refusal.kind]
        details = {k: _plain(v) for k, v in refusal.details.items()}
        retryable = refusal.kind.retryable
        shown = body(
            code,
            refusal.message,
            retryable=retryable,
            retry_after_s=RETRY_AFTER_S if retryable else None,
            details=details or None,
        )
        return JSONResponse(shown, status_code=status, headers={REQUEST_ID: shown["request_id"]})

    def invalid(self, request: Request, exc: RequestValidationError) -> Response:
        problems = [
            {"field": ".".join(str(p) for p in error["loc"] if p != "body"), "rule": error["msg"]}
            for error in exc.errors()
        ]
        detail = "; ".join(f"{p['field'] or 'body'}: {p['rule']}" for p in problems[:5])
        shown = body(
            "invalid_request",
            detail or "the request is malformed",
            retryable=False,
            details={"errors": [f"{p['field'] or 'body'}: {p['rule']}" for p in problems]},
        )
        return JSONResponse(shown, status_code=400, headers={REQUEST_ID: shown["request_id"]})

    def serves(self, path: str) -> bool:
        return paths.ours(path)

    def unrouted(self, method: str, path: str) -> Refusal | None:
        return unoffered.refusal(method, path)

    def error_schemas(self) -> dict[str, dict[str, Any]]:
        return {"ErrorBody": ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")}

    def error_ref(self, path: str, status: int) -> dict[str, Any]:
        return {"$ref": "#/components/schemas/ErrorBody"}

    def document(self, schema: dict[str, Any]) -> None:
        """Eval ids with their pattern."""
        for path, operations in schema.get("paths", {}).items():
            if not self.serves(path):
                continue
            for operation in operations.values():
                for parameter in operation.get("parameters", []):
                    if parameter["name"] == "eval_id":
                        parameter["schema"]["pattern"] = EVAL_ID_PATTERN


def _plain(value: Any) -> Any:
    if isinstance(value, Quota):
        return {"key": value.key, "limit": value.limit, "used": value.used}
    return value


SEQUENCES = Sequences()
