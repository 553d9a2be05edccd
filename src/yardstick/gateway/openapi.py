"""The OpenAPI the gateway publishes says what the server does, no more and no less loosely: every status a
route answers, each refusal with the schema of its door's error body; then each door states its own ids'
patterns and its limits' bounds (`Door.document`).

Each door's routes document what they may refuse (`http.routing.door_router`: 400 for a rule broken, 413
for a body past the limit, 422 for a request its models refuse, 500, 401 where a key is read, and what each
route declares with `refusals(...)`); here each refusal gets its door's error body as its schema, replacing
FastAPI's own 422 shape, which no door answers in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from yardstick.http.routing import DESCRIPTIONS, Door


def install(app: FastAPI, doors: Sequence[Door], door_of_path: Callable[[str], Door]) -> None:
    """Replace `app.openapi` with one that documents every route's refusals and each door's own rules."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for door in doors:
            for name, body in door.error_schemas().items():
                components.setdefault(name, body)
        for path, operations in schema.get("paths", {}).items():
            door = door_of_path(path)
            for operation in operations.values():
                for status, entry in operation.get("responses", {}).items():
                    if status.isdigit() and int(status) >= 400:
                        entry["description"] = entry.get("description") or DESCRIPTIONS.get(
                            int(status), "A refusal"
                        )
                        if status == "422" or "content" not in entry:
                            entry["content"] = {
                                "application/json": {"schema": door.error_ref(path, int(status))}
                            }
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        for door in doors:
            door.document(schema)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
