"""`yardstick image check IMAGE`: the checks a submission of a policy image meets, run here before pushing;
`yardstick image base`: the base such an image is built from with no network (`worker.boxes.base_image`).

The image is run exactly as a worker runs it (`worker.boxes.containers`: no network, a read-only root, no
capabilities, the install's limits, a fresh `AUTH_TOKEN`), it must answer a session (on TCP 8000, or the
project's socket) within the warm-up deadline, and what it declares is printed; then it is stopped and
removed. With `--registry`, the reference is first pinned to its digest and checked (architecture, size,
credential) as the gateway does at submission, then pulled by that digest as a worker pulls it.
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
from yardstick.worker.boxes.base_image import BASE_TAG, build_base
from yardstick.worker.boxes.containers import (
    WARMUP_DEADLINE_S,
    ContainerPolicyServer,
    Podman,
    install_label,
)

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
    start_timeout: float = typer.Option(
        WARMUP_DEADLINE_S, "--start-timeout", min=1.0, help="Seconds it has to serve (the warm-up deadline)."
    ),
    max_image: float = typer.Option(
        50.0, "--max-image", min=0.01, help="GB an image may weigh, compressed (the contract's 50 GB)."
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
                pinned = Registries([registry], max_image_bytes=int(max_image * 10**9)).pin(image, credential)
                console.print(f"pinned:   {pinned.reference} ({pinned.size_bytes / 2**20:,.1f} MiB)")
                login = {"username": credential[0], "password": credential[1]} if credential else None
                podman.pull(pinned.reference, login)
                reference = pinned.reference
            sockets = Path(tempfile.mkdtemp(prefix="s-", dir="/tmp"))
            limits = BoxLimits(memory_bytes=int(memory * GiB))
            server = ContainerPolicyServer(podman, reference, sockets, limits=limits, warmup_s=start_timeout)
        except ImageRefused as refused:
            print_error(f"refused: {refused}")
            raise typer.Exit(Exit.CALLER) from None
        except Failed as failed:
            print_error(f"{failed.kind}: {failed.reason}")
            raise typer.Exit(Exit.CALLER) from None
        try:
            spec = server.spec
            console.print(
                f"serves:   {spec.name} ({_where(server)}), {spec.hz:g} Hz, chunks of "
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


def _where(server: ContainerPolicyServer) -> str:
    if server.endpoint.wire == "websocket_unix":
        return "the project's socket, $YARDSTICK_SOCKET"
    return "TCP 8000 in the container, with its AUTH_TOKEN"


@image_app.command("base")
def base(
    tag: str = typer.Option(BASE_TAG, "--tag", help="The name the base takes in podman's store."),
) -> None:
    """Make the base a policy image is built FROM, from this install (its Python, numpy, Yardstick's policy
    server), with no network: examples/policy-image/ builds on it."""
    if not Podman.available():
        print_error("podman and runc are not installed here (Debian: apt-get install podman runc)")
        raise typer.Exit(Exit.USAGE)
    with tempfile.TemporaryDirectory(prefix="ys-image-base-") as scratch:
        podman = Podman(Path(scratch) / "conf", install_label(Path(scratch)))
        console.print("making the base from this install's Python (a minute or two)")
        try:
            made = build_base(podman, tag)
        except RuntimeError as failed:
            print_error(str(failed))
            raise typer.Exit(Exit.CALLER) from None
    console.print(
        f"[green]ok[/green]: {made} (FROM {made} in a Containerfile; podman build needs no network)"
    )
