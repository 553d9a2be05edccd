"""The station console: the page a rig serves to the operator beside the robot, and its buttons' routes.

Served on the rig's own machine (loopback by default): the operator's screen, not the lab's network. The
page polls `/state` and draws the phase it is in; every button has a key, since an operator's hands are
busy: `S` Start, `Space` Stop, `E` End, `1`–`5` the ladder while playing and the verdicts when judging,
`D` Discard, `Enter` to send the verdict.
"""

from __future__ import annotations

import io
import threading
from importlib import resources
from typing import Any

import uvicorn
from eval_vocabulary.outcome import Outcome
from eval_vocabulary.progress import Stage
from PIL import Image
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from yardstick.rig.station import Judgement, Station


def console_app(station: Station) -> Starlette:
    page = resources.files("yardstick.rig").joinpath("console.html").read_text(encoding="utf-8")

    async def index(_: Request) -> Response:
        return HTMLResponse(page)

    async def state(_: Request) -> Response:
        return JSONResponse(station.snapshot())

    async def camera(request: Request) -> Response:
        image = station.latest(request.path_params["name"])
        if image is None:
            return Response(status_code=204)
        encoded = io.BytesIO()
        Image.fromarray(image).save(encoded, format="JPEG", quality=80)
        return Response(encoded.getvalue(), media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    def done(ok: bool, what: str) -> Response:
        if ok:
            return JSONResponse({"ok": True})
        return JSONResponse({"ok": False, "message": f"{what} is not possible now"}, status_code=409)

    async def start(_: Request) -> Response:
        return done(station.start(), "Start")

    async def stop(_: Request) -> Response:
        return done(station.stop(), "Stop")

    async def end(_: Request) -> Response:
        return done(station.end(), "End")

    async def mark(request: Request) -> Response:
        code = request.path_params["stage"]
        if code not in {str(stage) for stage in Stage}:
            return JSONResponse({"ok": False, "message": f"stage: {code!r} is no rung of the ladder"}, 400)
        return done(station.mark(Stage(code)), "a mark")

    async def verdict(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        try:
            outcome = Outcome(str(body.get("outcome")))
            items = body.get("successful_items")
            judgement = Judgement(
                outcome=outcome,
                successful_items=None if items in (None, "") else int(items),
                notes=str(body["notes"]).strip() or None if body.get("notes") else None,
            )
        except (ValueError, TypeError) as exc:
            return JSONResponse({"ok": False, "message": f"verdict: {exc}"}, status_code=400)
        return done(station.judge(judgement), "a verdict")

    return Starlette(
        routes=[
            Route("/", index),
            Route("/state", state),
            Route("/camera/{name}.jpg", camera),
            Route("/start", start, methods=["POST"]),
            Route("/stop", stop, methods=["POST"]),
            Route("/end", end, methods=["POST"]),
            Route("/mark/{stage}", mark, methods=["POST"]),
            Route("/verdict", verdict, methods=["POST"]),
        ]
    )


class Console:
    """The console served in a thread of the rig process, on `host:port` (port 0: one the system picks)."""

    def __init__(self, station: Station, host: str = "127.0.0.1", port: int = 0) -> None:
        config = uvicorn.Config(
            console_app(station), host=host, port=port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="station-console", daemon=True)

    def start(self, timeout: float = 30.0) -> str:
        """Serve, and return the console's address once it listens."""
        self.thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout / 0.05)):
            if self.server.started:
                break
            deadline.wait(0.05)
        if not self.server.started:
            raise RuntimeError(f"the station console did not start within {timeout:g} s")
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        return f"http://{host}:{port}/"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
