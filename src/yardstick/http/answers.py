"""A contract's model as a route's JSON answer, encoded by pydantic straight to bytes: the same document
`JSONResponse(model.model_dump(mode="json"))` sends, without building the dicts first and encoding them
again with the json module (the larger views cost more to encode so than to read)."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi.responses import Response
from pydantic import BaseModel


def json_answer(
    model: BaseModel, *, exclude_none: bool = False, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        model.model_dump_json(exclude_none=exclude_none), media_type="application/json", headers=headers
    )
