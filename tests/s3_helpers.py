"""moto's standalone S3 server on loopback, as the bucket of a lab, for the tests of the S3 stores: started in
a process of its own, its bucket made, and the AWS variables every process of the test reads set while it
serves (a platform's workers, spawned meanwhile, inherit them)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import free_port
from deadlines import give_up_at, patience
from yardstick.core.s3_artifacts import s3_client

BUCKET = "yardstick-lab"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "lab-key-id",
    "AWS_SECRET_ACCESS_KEY": "lab-secret-key",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# Generous for a loaded two-core machine: moto's server imports Flask and every service's models.
START_S = 90.0


@contextmanager
def moto_bucket(folder: Path, servers: list[subprocess.Popen[bytes]] | None = None) -> Iterator[str]:
    """moto's S3 on a free loopback port with `BUCKET` made, the AWS variables pointing at it while the block
    runs; its endpoint URL. `servers`: where the server is listed (a test may stop it and start another on
    the same port with `moto`); every server listed is stopped at the end."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    before = {name: os.environ.get(name) for name in (*CREDENTIALS, "AWS_ENDPOINT_URL")}
    os.environ.update(CREDENTIALS, AWS_ENDPOINT_URL=url)
    started = servers if servers is not None else []
    try:
        started.append(moto(port, folder / "moto.log"))
        yield url
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for server in started:
            server.terminate()
            server.wait(timeout=30)


def moto(port: int, log: Path) -> subprocess.Popen[bytes]:
    """moto's S3 server on `port`, listening, with the bucket made (its state is in memory: a new server
    starts empty)."""
    with log.open("ab") as out:
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    _wait_for_port(port, server, log)
    s3_client().create_bucket(Bucket=BUCKET)
    return server


def _wait_for_port(port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = give_up_at(START_S)
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()[-2000:]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            threading.Event().wait(0.1)
    waited = patience(START_S)
    raise AssertionError(f"moto's server did not listen within {waited:g} s: {log.read_text()[-2000:]}")
