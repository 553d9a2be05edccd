"""Front doors: each renders the platform's refusals in its own contract's error body. A door's router is
made with `door_router(door)`; its routes catch what they raise (a `Refusal`, or a request its models
refuse) and answer in that door's body. What reaches no route (a path nobody serves, a method a path does
not take) is rendered by the door whose paths it falls under (`gateway.app`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from yardstick.core.refusals import Refusal


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


def door_router(door: Door, **options: Any) -> APIRouter:
    """An `APIRouter` whose routes answer refusals in `door`'s body."""

    class DoorRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handle = super().get_route_handler()

            async def answered(request: Request) -> Response:
                try:
                    return await handle(request)
                except Refusal as refusal:
                    return door.refusal(request, refusal)
                except RequestValidationError as exc:
                    return door.invalid(request, exc)

            return answered

    return APIRouter(route_class=DoorRoute, **options)
