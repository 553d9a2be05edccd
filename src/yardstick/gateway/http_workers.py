"""`yardstick server --http-workers N`: the gateway served by N processes sharing one listening socket, for
more cores than one process's GIL can use.

The server's own process prepares the install (migrations, the catalogue, unfinished builds resumed), binds
the socket and supervises the HTTP processes as it does its queue workers (`core.supervisor`): one that dies
is replaced; stopping the server stops them all, and what they started, within a few seconds; each dies with
the server even when it is killed outright. The kernel hands each new connection to one of them.

What a process keeps to itself is per process: the key cache (revocations through the API still hold at once
in all of them: they share a count of revocations, `accounts.Authenticator`), the sign-in pages' failure
counts, and the waits on a build it started.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import socket
import sys
from functools import partial

from yardstick.core.accounts import Revocations
from yardstick.core.settings import Settings
from yardstick.worker.processes import die_with_parent
from yardstick.worker.supervisor import Supervisor


def supervisor(settings: Settings, count: int, listening: socket.socket, log_level: str) -> Supervisor:
    """`count` HTTP processes serving the gateway on `listening` (bound by the caller), not started yet."""
    revocations = mp.get_context("spawn").Value("Q", 0)
    target = partial(_serve, listening, revocations, log_level)
    return Supervisor(settings, count, target, holds_leases=False, role="HTTP process")


def _serve(
    listening: socket.socket,
    revocations: Revocations,
    log_level: str,
    settings: Settings,
    name: str,
    parent: int,
) -> None:
    """One HTTP process's life: serve until SIGTERM or SIGINT (uvicorn finishes the requests in hand), or
    until the server's process dies."""
    import uvicorn

    from yardstick.gateway.app import create_app
    from yardstick.gateway.services import open_services
    from yardstick.gateway.serving import SHARING_LOOP, config, settle_heap

    die_with_parent(parent, lambda: os.kill(os.getpid(), signal.SIGTERM))
    # uvicorn catches SIGTERM and SIGINT while it serves and, once it has shut down, raises the signal again
    # to the handler it found: this one, so the process closes its services and exits 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(0))
    services = open_services(settings, prepare=False)
    try:
        services.platform.accounts.share_revocations(revocations)
        host, port = listening.getsockname()[:2]
        app = create_app(services)
        settle_heap()
        shared = config(app, host=host, port=port, log_level=log_level, loop=SHARING_LOOP)
        uvicorn.Server(shared).run(sockets=[listening])
    finally:
        services.close()
