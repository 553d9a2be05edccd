"""The gateway: one FastAPI application, its error envelope, the signed artifact route and health.

OpenAPI at `/openapi.json`, browsable at `/docs`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from platform_client.enums import ErrorCode
from starlette.exceptions import HTTPException

from yardstick import __version__
from yardstick.service import billing_routes, positronic, signin_routes
from yardstick.service.artifacts import ARTIFACTS_PATH, ArtifactUrlRefused
from yardstick.service.errors import ApiError
from yardstick.service.platform import Platform
from yardstick.web.site import CORS, site_router


def create_app(platform: Platform) -> FastAPI:
    app = FastAPI(
        title="Yardstick",
        version=__version__,
        openapi_url="/openapi.json",
        docs_url="/docs",
        description="Evaluate robot policies on benchmarks: the Positronic platform contract (v1).",
    )
    app.state.platform = platform
    app.include_router(positronic.router)
    app.include_router(billing_routes.router)
    app.include_router(site_router(platform))
    app.include_router(signin_routes.router(platform))

    @app.middleware("http")
    async def _open_to_other_origins(request: Request, call_next: Any) -> Any:
        """The replay data, its videos and both rankings routes may be read from any origin."""
        shared = request.url.path.startswith(("/v/", "/v1/rankings."))
        if shared and request.method == "OPTIONS":
            return Response(
                status_code=204,
                headers={
                    **CORS,
                    "Access-Control-Allow-Headers": "Authorization",
                    "Access-Control-Allow-Methods": "GET, OPTIONS",
                },
            )
        response = await call_next(request)
        if shared:
            response.headers.update(CORS)
        return response

    @app.exception_handler(ApiError)
    async def _refused(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.envelope(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Each problem names its field and the rule; the input itself is not echoed (it may hold a secret).
        problems = [
            {"field": ".".join(str(p) for p in error["loc"] if p != "body"), "rule": error["msg"]}
            for error in exc.errors()
        ]
        message = "; ".join(f"{p['field'] or 'body'}: {p['rule']}" for p in problems[:5])
        refused = ApiError(
            ErrorCode.bad_request, message or "the request is malformed", status=422, errors=problems
        )
        return JSONResponse(refused.envelope(), status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        code = {401: ErrorCode.unauthorized, 403: ErrorCode.forbidden, 404: ErrorCode.not_found}.get(
            exc.status_code, ErrorCode.bad_request if exc.status_code < 500 else ErrorCode.internal_error
        )
        return JSONResponse(
            ApiError(code, str(exc.detail), status=exc.status_code).envelope(), status_code=exc.status_code
        )

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        refused = ApiError(ErrorCode.internal_error, f"internal error: {type(exc).__name__}")
        return JSONResponse(refused.envelope(), status_code=500)

    @app.get(ARTIFACTS_PATH + "/{submission}/{key:path}", include_in_schema=True)
    def artifact(submission: str, key: str, expires: str = "", sig: str = "") -> Any:
        """An artifact by its signed, expiring URL (no key needed: the signature is the credential)."""
        try:
            platform.signer.verify(submission, key, expires, sig)
        except ArtifactUrlRefused as exc:
            raise ApiError(ErrorCode.forbidden, f"this artifact link is refused: {exc.reason}") from None
        try:
            path = platform.store.path(int(submission, 16), key)
        except ValueError:
            raise ApiError(ErrorCode.not_found, f"no artifact {key!r}") from None
        if not path.is_file():
            raise ApiError(ErrorCode.not_found, f"no artifact {key!r}")
        return FileResponse(path, headers={"Access-Control-Allow-Origin": "*"})

    @app.get("/healthz")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "workers_alive": platform.workers_alive()}

    return app
