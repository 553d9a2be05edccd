"""`/v1/secrets`: an org's secrets, set whole (a re-set replaces every value), listed by name and the
variables they hold (never a value), removed by name. Hosted code that names a secret is handed its
variables as its environment."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from yardstick.core.runs import org_for
from yardstick.core.secrets import SecretInfo
from yardstick.http.auth import Who, audit_target
from yardstick.http.routing import door_router, refusals
from yardstick.http.services import Plat
from yardstick.sequences import paths
from yardstick.sequences.errors import SEQUENCES
from yardstick.sequences.models import SecretCreateRequest


def _shown(info: SecretInfo) -> dict[str, object]:
    return {
        "name": info.name,
        "env_keys": list(info.env_keys),
        "created_at": info.created_at,
        "last_used_at": info.last_used_at,
    }


router = door_router(SEQUENCES, tags=["sequences: secrets"])


@router.post(paths.SECRETS, status_code=201, responses=refusals(403))
def set_secret(body: SecretCreateRequest, request: Request, plat: Plat, who: Who) -> JSONResponse:
    audit_target(request, body.name)
    info = plat.secrets.put(org_for(who, None).id, body.name, body.env)
    return JSONResponse(_shown(info), status_code=201)


@router.get(paths.SECRETS, responses=refusals(403))
def list_secrets(plat: Plat, who: Who) -> JSONResponse:
    return JSONResponse({"secrets": [_shown(i) for i in plat.secrets.listed(org_for(who, None).id)]})


@router.delete(paths.SECRET, status_code=204, responses=refusals(403, 404))
def remove_secret(name: str, plat: Plat, who: Who) -> Response:
    plat.secrets.remove(org_for(who, None).id, name)
    return Response(status_code=204)
