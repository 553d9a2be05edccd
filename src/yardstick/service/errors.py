"""Refusals in the contract's error envelope: `{"error": {"code", "message", "details"}}`.

`code` is an `ErrorCode` slug; `details` carries `reason_code` behind a caller-fault rejection, `quota` behind
`quota_exceeded`, and `evals` / `tasks` listing what is on offer when the one asked for is not.
"""

from __future__ import annotations

from typing import Any

from platform_client.enums import ErrorCode

STATUS_OF = {
    ErrorCode.bad_request: 400,
    ErrorCode.unauthorized: 401,
    ErrorCode.forbidden: 403,
    ErrorCode.not_found: 404,
    ErrorCode.quota_exceeded: 429,
    ErrorCode.transaction_conflict: 409,
    ErrorCode.registry_unreachable: 503,
    ErrorCode.upstream_unavailable: 503,
    ErrorCode.eval_unavailable: 409,
    ErrorCode.internal_error: 500,
    ErrorCode.insufficient_credits: 402,
}


class ApiError(Exception):
    """A request refused: `code` for a program, `message` for a person (it names the field and the rule)."""

    def __init__(self, code: ErrorCode, message: str, *, status: int | None = None, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or STATUS_OF.get(code, 400)
        self.details = {k: v for k, v in details.items() if v is not None}

    def envelope(self) -> dict[str, Any]:
        return {"error": {"code": self.code.name, "message": self.message, "details": self.details}}


def bad_request(message: str, **details: Any) -> ApiError:
    return ApiError(ErrorCode.bad_request, message, **details)


def not_found(message: str, **details: Any) -> ApiError:
    return ApiError(ErrorCode.not_found, message, **details)


def forbidden(message: str, **details: Any) -> ApiError:
    return ApiError(ErrorCode.forbidden, message, **details)
