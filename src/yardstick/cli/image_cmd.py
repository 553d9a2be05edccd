"""`yardstick image check IMAGE`: the checks a submission of a policy image meets, run here before pushing.

The image is run exactly as a worker runs it (`worker.boxes.containers`: no network, a read-only root, no
capabilities, the install's limits, its socket in /yardstick), it must answer a session within the start-up
deadline, and what it declares is printed; then it is stopped and removed. With `--registry`, the reference
is first pinned to its digest and checked (architecture, size, credential) as the gateway does at
submission, then pulled by that digest as a worker pulls it.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

import typer

from yardstick.cli.display import console, print_error
from yardstick.cli.exits import Exit
from yardstick.core.registries import ImageRefused, Registries
from yardstick.engine.failures import Failed
from yardstick.hosted.limits import BoxLimits, GiB
from yardstick.worker.boxes.containers import SOCKET_ENV, SOCKET_FOLDER, ContainerPolicyServer, Podman

image_app = typer.Typer(
    help="Policy images: what a container must serve, checked here.", no_args_is_help=True
)


@image_app.command("check")
def check(
    image: str = typer.Argument(..., help="The image: a local one (podman's store) or HOST:PORT/REPO:TAG."),
    registry: str | None = typer.Option(
        None, "--registry", help="Pull it from this registry first (http://HOST:PORT or https://HOST)."
    ),
    username: str | None = typer.Option(None, "--username", help="The registry's user, if it needs one."),
    password_file: Path | None = typer.Option(
        None, "--password-file", help="A file holding the registry's password (never a command line)."
    ),
    memory: float = typer.Option(8.0, "--memory", min=0.1, help="GiB the container may use."),
    start_timeout: float = typer.Option(120.0, "--start-timeout", min=1.0, help="Seconds it has to serve."),
    max_image: float = typer.Option(
        4.0, "--max-image", min=0.01, help="GiB an image may weigh (compressed)."
    ),
) -> None:
    """Run a policy image as a submission's would run, and say whether it serves."""
    if not Podman.available():
        print_error("podman and runc are not installed here (Debian: apt-get install podman runc)")
        raise typer.Exit(Exit.USAGE)
    credential = None
    if username is not None:
        if password_file is None:
            print_error("--username needs --password-file: a password is never given on a command line")
            raise typer.Exit(Exit.USAGE)
        credential = (username, password_file.read_text().strip())
    with tempfile.TemporaryDirectory(prefix="ys-image-check-") as scratch:
        folder = Path(scratch)
        plain = registry is not None and registry.startswith("http://")
        insecure = (registry.removeprefix("http://").rstrip("/"),) if registry and plain else ()
        podman = Podman(folder / "conf", hashlib.sha256(scratch.encode()).hexdigest()[:16], insecure=insecure)
        reference = image
        try:
            if registry is not None:
                pinned = Registries([registry], max_image_bytes=int(max_image * GiB)).pin(image, credential)
                console.print(f"pinned:   {pinned.reference} ({pinned.size_bytes / 2**20:,.1f} MiB)")
                login = {"username": credential[0], "password": credential[1]} if credential else None
                podman.pull(pinned.reference, login)
                reference = pinned.reference
            sockets = Path(tempfile.mkdtemp(prefix="s-", dir="/tmp"))
            limits = BoxLimits(memory_bytes=int(memory * GiB))
            server = ContainerPolicyServer(
                podman, reference, sockets, limits=limits, start_timeout_s=start_timeout
            )
        except ImageRefused as refused:
            print_error(f"refused: {refused}")
            raise typer.Exit(Exit.CALLER) from None
        except Failed as failed:
            print_error(f"{failed.kind}: {failed.reason}")
            raise typer.Exit(Exit.CALLER) from None
        try:
            spec = server.spec
            console.print(
                f"serves:   {spec.name} on {SOCKET_FOLDER} (${SOCKET_ENV}), {spec.hz:g} Hz, chunks of "
                f"{spec.action_chunk_len}, asked every {spec.replan_every} steps"
            )
            printed = server.journal.since(0)[0]
            for _, line in printed[-5:]:
                console.print(f"  | {line}", markup=False)
        finally:
            server.close()
            shutil.rmtree(sockets, ignore_errors=True)
    console.print(
        "[green]ok[/green]: it serves as a submission's container must; nothing of it is left running"
    )
