"""How the gateway's HTTP is served: one place for the uvicorn settings, so `yardstick server` and the
bench's trivial route (`bench/gateway.py`, the ceiling ours is measured against) are served alike."""

from __future__ import annotations

import gc
import socket
import sys
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE

from yardstick.gateway.access_log import log_config

# The event loop of a process that serves alone, and of processes that share one socket. Measured under 50
# connections: alone, uvloop served as many requests a second as asyncio's own loop, but let some wait far
# longer than the rest (p99 110-140 ms on `/healthz` against 22 ms). Sharing a socket, asyncio's loop accepts
# every connection waiting when it wakes, so one process took most of them and the others idled (two
# processes served no more than one); uvloop's spread them.
ALONE_LOOP, SHARING_LOOP = "asyncio", "uvloop"


def config(app: Any, *, host: str, port: int, log_level: str, loop: str = ALONE_LOOP) -> uvicorn.Config:
    """uvicorn's settings for `app` on `host:port`."""
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, log_config=log_config(), loop=loop)


def serve(app: Any, *, host: str, port: int, log_level: str) -> None:
    """Serve `app` in this process until SIGTERM or SIGINT (uvicorn re-raises the signal once it stopped);
    exit with uvicorn's start-up failure status when it could not start (the port taken), as `uvicorn.run`."""
    server = uvicorn.Server(config(app, host=host, port=port, log_level=log_level))
    settle_heap()
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)


def settle_heap() -> None:
    """Take what was built before serving (the app, its routes and schemas, the catalogue: it lives as long
    as the process) out of the garbage collector's reach, so a full collection while serving walks only what
    requests made. It walked everything: pauses of 90-190 ms under load, the slowest percent of requests."""
    gc.collect()
    gc.freeze()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`, bound as uvicorn binds its own (for processes that share it); one
    that cannot be bound (the port taken) exits with the start-up failure status, as `serve` does."""
    try:
        listening = config(None, host=host, port=port, log_level="warning").bind_socket()
    except SystemExit:  # uvicorn has logged why
        sys.exit(STARTUP_FAILURE)
    # Inherited by every connection accepted on it, whichever loop serves them (asyncio's sets it only on
    # the connections of a socket it bound itself: without it, each answer waited for the client's delayed
    # ACK, a p50 of 44 ms at any load).
    listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return listening
