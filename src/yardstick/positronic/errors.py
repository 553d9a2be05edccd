"""The Positronic door's error envelope, `{"error": {"code", "message", "details"}}`, and its two tables:
the platform's refusal kinds to the contract's `ErrorCode`s (with their HTTP statuses), and the platform's
failure kinds to the contract's `ReasonCode`s. Nothing else in the door chooses a code.

`details` carries `quota` behind `quota_exceeded`, `evals` / `tasks` listing what is on offer when the one
asked for is not, and `errors` (field and rule each) behind a request the models refuse.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from platform_client import routes
from platform_client.enums import ErrorCode, OnExhausted, QuotaSubject, ReasonCode
from platform_client.errors import ApiErrorBody, ErrorEnvelope
from platform_client.responses import QuotaLimit

from yardstick.core import limits
from yardstick.core.admission import Quota
from yardstick.core.refusals import Refusal, RefusalKind
from yardstick.engine.failures import FailureKind

CODES: dict[RefusalKind, tuple[ErrorCode, int]] = {
    RefusalKind.BAD_REQUEST: (ErrorCode.bad_request, 400),
    RefusalKind.UNAUTHENTICATED: (ErrorCode.unauthorized, 401),
    RefusalKind.FORBIDDEN: (ErrorCode.forbidden, 403),
    RefusalKind.NOT_FOUND: (ErrorCode.not_found, 404),
    RefusalKind.CONFLICT: (ErrorCode.transaction_conflict, 409),
    RefusalKind.EVAL_UNAVAILABLE: (ErrorCode.eval_unavailable, 409),
    RefusalKind.QUOTA_EXCEEDED: (ErrorCode.quota_exceeded, 429),
    RefusalKind.INSUFFICIENT_CREDITS: (ErrorCode.insufficient_credits, 402),
    RefusalKind.TOO_LARGE: (ErrorCode.bad_request, 413),
    RefusalKind.UPSTREAM_UNAVAILABLE: (ErrorCode.upstream_unavailable, 503),
    RefusalKind.INTERNAL: (ErrorCode.internal_error, 500),
    RefusalKind.NOT_OFFERED: (ErrorCode.bad_request, 400),
}

REASONS: dict[FailureKind, ReasonCode] = {
    FailureKind.POLICY_CRASH: ReasonCode.policy_inference_crash,
    FailureKind.MALFORMED_ANSWER: ReasonCode.policy_inference_crash,
    FailureKind.SESSION_DROPPED: ReasonCode.policy_inference_crash,
    FailureKind.POLICY_TIMEOUT: ReasonCode.latency_budget_exceeded,
    FailureKind.LATENCY_BUDGET: ReasonCode.latency_budget_exceeded,
    FailureKind.POLICY_SETUP_CRASH: ReasonCode.policy_setup_crash,
    FailureKind.SESSION_REFUSED: ReasonCode.policy_setup_crash,
    FailureKind.POLICY_OOM: ReasonCode.policy_oom,
    FailureKind.IMAGE_UNPULLABLE: ReasonCode.image_unpullable,
    FailureKind.IMAGE_TOO_LARGE: ReasonCode.image_too_large,
    # The catalogue's benchmarks are the platform's: their failures are the platform's, refunded.
    FailureKind.BENCHMARK_CRASH: ReasonCode.internal_error,
    FailureKind.BENCHMARK_TIMEOUT: ReasonCode.internal_error,
    FailureKind.BENCHMARK_SETUP_CRASH: ReasonCode.internal_error,
    FailureKind.WORKER_LOST: ReasonCode.runner_unresponsive,
    FailureKind.PLATFORM_LOST: ReasonCode.runner_unresponsive,
    FailureKind.STORAGE_FAILED: ReasonCode.internal_error,
    FailureKind.INSTALL_INCOMPLETE: ReasonCode.internal_error,
    # The contract's fetch deadline: a pull past it is the platform's fault, as a wedged provisioning is.
    FailureKind.IMAGE_FETCH_TIMEOUT: ReasonCode.provision_wedged,
}


def reason_code(failure: str | None) -> ReasonCode | None:
    """The contract's reason for a run's recorded failure kind (None for a run that did not fail)."""
    return REASONS[FailureKind(failure)] if failure else None


def quota_limit(quota: Quota) -> QuotaLimit:
    """A quota as the contract's `QuotaLimit`: a count of submissions."""
    return QuotaLimit(
        key=quota.key,
        meter="submissions",
        unit="submissions",
        scale=1,
        window=quota.window,
        subject=QuotaSubject[quota.subject],
        limit=quota.limit,
        used=quota.used,
        resets_at=quota.resets_at,
        on_exhausted=OnExhausted[quota.on_exhausted],
    )


def envelope(code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contract's `ErrorEnvelope`, as its JSON."""
    shown = ErrorEnvelope(error=ApiErrorBody(code=code, message=message, details=details or {}))
    return shown.model_dump(mode="json")


def refusal_response(refusal: Refusal) -> JSONResponse:
    code, status = CODES[refusal.kind]
    details = {
        k: quota_limit(v).model_dump(mode="json") if isinstance(v, Quota) else v
        for k, v in refusal.details.items()
    }
    return JSONResponse(envelope(code, refusal.message, details), status_code=status)


def problems_of(exc: RequestValidationError) -> list[dict[str, str]]:
    """Each problem a model found: the field (dotted, without `body`) and the rule it broke."""
    return [
        {"field": ".".join(str(p) for p in error["loc"] if p != "body"), "rule": error["msg"]}
        for error in exc.errors()
    ]


# A submission id on the wire: bare hexadecimal, 0 < id < 2**63 (`SubmissionId.parse`).
SUBMISSION_ID_PATTERN = "^[0-9a-fA-F]{1,16}$"
# Where each query parameter that is a submission id is read.
_ID_PARAMETERS = {
    (routes.SUBMISSIONS_GET, "id"),
    (routes.SUBMISSIONS_ARTIFACTS, "id"),
    (routes.SUBMISSIONS_LIST, "after"),
}


def _bound(prop: dict[str, Any], **bounds: Any) -> None:
    """Lay `bounds` on a property's schema: on its non-null branch where it may also be null."""
    branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"] or [prop]
    for branch in branches:
        branch.update(bounds)


class Positronic:
    """The Positronic door: dotted routes under `/v1/` (`/v1/submissions.create`), its envelope."""

    def error_schemas(self) -> dict[str, dict[str, Any]]:
        schema = ErrorEnvelope.model_json_schema(ref_template="#/components/schemas/{model}")
        defs = schema.pop("$defs", {})
        return {**defs, "ErrorEnvelope": schema}

    def error_ref(self, path: str, status: int) -> dict[str, Any]:
        return {"$ref": "#/components/schemas/ErrorEnvelope"}

    def document(self, schema: dict[str, Any]) -> None:
        """Submission ids with their pattern; the plan's counts, caps, lists and text with the platform's
        limits (`core.limits`); page sizes with their bounds."""
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                for parameter in operation.get("parameters", []):
                    if (path, parameter["name"]) in _ID_PARAMETERS:
                        _bound(parameter["schema"], pattern=SUBMISSION_ID_PATTERN)
                    if parameter["name"] == "limit" and path.startswith(routes.API_PREFIX + "/"):
                        cap = limits.ARTIFACT_PAGE_MAX if "artifacts" in path else limits.PAGE_SIZE_MAX
                        _bound(parameter["schema"], minimum=1)
                        parameter["description"] = (
                            f"The page size, at least 1; above {cap} it is clamped to {cap}."
                        )
        for name, component in schema.get("components", {}).get("schemas", {}).items():
            props = component.get("properties", {})
            if name == "CancelRequest" and "id" in props:
                _bound(props["id"], pattern=SUBMISSION_ID_PATTERN)
            if "episodes_per_endpoint" in props:
                _bound(props["episodes_per_endpoint"], maximum=limits.EPISODES_PER_PLAN)
            if "cap_per_episode_sec" in props:
                _bound(props["cap_per_episode_sec"], maximum=limits.CAP_PER_EPISODE_SEC)
            if "request_type" in props:  # a plan
                for field, bounds in (
                    ("tasks", {"maxItems": limits.TASKS_PER_PLAN}),
                    ("endpoints", {"maxItems": limits.ENDPOINTS_PER_PLAN}),
                    ("alias", {"maxLength": limits.ALIAS_CHARS}),
                    ("transaction_key", {"maxLength": limits.TRANSACTION_KEY_CHARS}),
                ):
                    if field in props:
                        _bound(props[field], **bounds)

    def refusal(self, request: Request, refusal: Refusal) -> Response:
        return refusal_response(refusal)

    def invalid(self, request: Request, exc: RequestValidationError) -> Response:
        problems = problems_of(exc)
        message = "; ".join(f"{p['field'] or 'body'}: {p['rule']}" for p in problems[:5])
        body = envelope(ErrorCode.bad_request, message or "the request is malformed", {"errors": problems})
        return JSONResponse(body, status_code=422)

    def serves(self, path: str) -> bool:
        return True  # the platform's default: every answer no other door claims

    def unrouted(self, method: str, path: str) -> Refusal | None:
        return None  # the contract's clients know its routes: an unknown one is a plain not_found


POSITRONIC = Positronic()
