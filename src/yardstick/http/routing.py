"""Front doors: each renders the platform's refusals in its own contract's error body. A door's router is
made with `door_router(door)`; its routes catch what they raise (a `Refusal`, or a request its models
refuse) and answer in that door's body. What reaches no route (a path nobody serves, a method a path does
not take) is rendered by the door whose paths it falls under (`gateway.app`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from fastapi import APIRouter, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from yardstick.core.refusals import Problem, Refusal, bad_request
from yardstick.store.text import UnstorableText

DESCRIPTIONS = {
    400: "A rule the request breaks (the message names the field and the rule)",
    401: "No valid API key",
    402: "Not enough credits for the plan's quote",
    403: "A caller who may not do this",
    404: "Nothing by that name that the caller can see",
    405: "A method the path does not take (the Allow header lists those it does)",
    409: "A conflict: a transaction key already used for another request, or an eval not accepting runs",
    413: "A body past the size limit, refused before it is read",
    422: "A request the models refuse (each problem with its field and rule)",
    424: "A feature of the contract this install does not serve, named with why (not retryable)",
    429: "A quota spent",
    500: "The platform's own fault",
    503: "A service the platform asks (an identity provider) is down; retry later",
}


def refusals(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's own refusals, for its decorator's `responses=`: the gateway's OpenAPI adds its door's error
    body to each, and the statuses every route may answer (`gateway.openapi`)."""
    return {status: {"description": DESCRIPTIONS.get(status, "A refusal")} for status in statuses}


class Door(Protocol):
    """A contract's way of saying no."""

    def refusal(self, request: Request, refusal: Refusal) -> Response:
        """A refusal of the platform's, in this contract's error body and status."""
        ...

    def invalid(self, request: Request, exc: RequestValidationError) -> Response:
        """A request the route's models refuse (each problem with its field and rule)."""
        ...

    def serves(self, path: str) -> bool:
        """Whether a path belongs to this door (for answers that reach no route)."""
        ...

    def unrouted(self, method: str, path: str) -> Refusal | None:
        """What this door says of a request on one of its paths that no route takes (a feature of its
        contract the install does not serve, named), or None for the framework's own 404 or 405."""
        ...

    def error_schemas(self) -> dict[str, dict[str, Any]]:
        """The JSON schemas of this door's error body, by name, for the OpenAPI's components."""
        ...

    def error_ref(self, path: str, status: int) -> dict[str, Any]:
        """The schema (a `$ref` into the components) of a refusal with `status` on `path`."""
        ...

    def document(self, schema: dict[str, Any]) -> None:
        """State this door's own rules in the OpenAPI: its ids' patterns, its limits' bounds."""
        ...


def door_router(door: Door, **options: Any) -> APIRouter:
    """An `APIRouter` whose routes answer refusals in `door`'s body."""

    class DoorRoute(APIRoute):
        def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
            super().__init__(path, endpoint, **kwargs)
            # What every route of a door may answer, beside what it declares (`refusals`); FastAPI builds a
            # documented status's schema as it builds the route, so the route is built again with them.
            answers = {400: None, 413: None, 500: None}
            if _reads_parameters(self.dependant):
                answers[422] = None
            if _reads_a_key(self.dependant):
                answers[401] = None
            missing = [status for status in answers if status not in self.responses]
            if missing:
                kwargs["responses"] = {**refusals(*missing), **self.responses}
                super().__init__(path, endpoint, **kwargs)

        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handle = super().get_route_handler()

            async def answered(request: Request) -> Response:
                try:
                    return await handle(request)
                except Refusal as refusal:
                    return door.refusal(request, refusal)
                except RequestValidationError as exc:
                    return door.invalid(request, exc)
                except (UnstorableText, TypeError) as exc:
                    refused = refused_input(exc)
                    if refused is None:
                        raise
                    return answer_refused(door, request, refused)

            return answered

    return APIRouter(route_class=DoorRoute, **options)


def _reads_a_key(dependant: Dependant) -> bool:
    from yardstick.http.auth import caller, maybe_caller

    return any(sub.call in (caller, maybe_caller) or _reads_a_key(sub) for sub in dependant.dependencies)


def _reads_parameters(dependant: Dependant) -> bool:
    reads = (
        dependant.query_params or dependant.body_params or dependant.path_params or dependant.header_params
    )
    return bool(reads) or any(_reads_parameters(sub) for sub in dependant.dependencies)


def refused_input(exc: BaseException) -> Refusal | RequestValidationError | None:
    """What the request's input broke, when `exc` is a refusal of it that is not spelled as one: text no
    column can hold (`store.text`), or a `TypeError` a model's validator raised while reading the request
    (pydantic turns only ValueError and AssertionError into validation errors; the contract's id types
    raise TypeError for a value of the wrong type, such as `{"id": null}`). None: a fault of ours."""
    if isinstance(exc, UnstorableText):
        return bad_request(str(exc), problems=[Problem(exc.field, exc.rule)])
    if isinstance(exc, TypeError):
        loc = _validated_at(exc)
        if loc is not None:
            problem = {"loc": loc, "msg": f"Value error, {exc}", "type": "value_error", "input": None}
            return RequestValidationError([problem])
    return None


def answer_refused(door: Door, request: Request, refused: Refusal | RequestValidationError) -> Response:
    if isinstance(refused, Refusal):
        return door.refusal(request, refused)
    return door.invalid(request, refused)


def _validated_at(exc: TypeError) -> tuple[Any, ...] | None:
    """Where in the request the value was that a model's validator raised on (FastAPI's `loc`, such as
    `("body",)`), or None when the error was not raised while validating a request."""
    # FastAPI validates each request value in this function, with `loc` saying where the value came from.
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_validate_value_with_model_field" and "fastapi" in code.co_filename:
            loc = tb.tb_frame.f_locals.get("loc")
            return tuple(loc) if isinstance(loc, tuple) else ("body",)
        tb = tb.tb_next
    return None
