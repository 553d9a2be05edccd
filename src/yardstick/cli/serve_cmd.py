"""`yardstick policy serve`: any policy class as a policy server."""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath

import typer

from yardstick.cli.display import console, print_error
from yardstick.cli.exits import Exit
from yardstick.cli.options import parse_params
from yardstick.cli.signals import sigterm_as_interrupt
from yardstick.sdk.errors import AuthoringError
from yardstick.wire.address import HostPort, Root, UnixSocket, format_url

TOKEN_ENV = "YARDSTICK_POLICY_TOKEN"


def serve(
    refs: list[str] = typer.Argument(
        ...,
        help="Policies to serve: expert, random, module:Class or file.py:Class; "
        "[ID=]REF to name one. The first answers the bare session route.",
    ),
    host: str = typer.Option("127.0.0.1", help="The address to bind (0.0.0.0 or :: for every interface)."),
    port: int | None = typer.Option(8000, help="The websocket port (0: any free one)."),
    no_port: bool = typer.Option(
        False, "--no-port", help="Serve no TCP websocket (only --uds / --grpc-port)."
    ),
    uds: str | None = typer.Option(None, help="Also serve on this unix socket (an absolute path)."),
    uds_fd: int | None = typer.Option(
        None,
        help="Also serve on this inherited descriptor: a unix socket already listening (a boxed server).",
    ),
    grpc_port: int | None = typer.Option(None, help="Also serve gRPC on this port."),
    tls_cert: str | None = typer.Option(None, help="Serve TLS with this certificate (PEM)."),
    tls_key: str | None = typer.Option(None, help="...and this key (PEM)."),
    idle_timeout_min: float | None = typer.Option(None, help="Stop after this many idle minutes."),
    param: list[str] = typer.Option(
        [], "--param", help="policy.NAME=VALUE laid over the constructor's arguments."
    ),
) -> None:
    """Serve policies over the session protocol (websocket, unix socket, gRPC, TLS) and the openpi and
    roboarena dialects at the root. A bearer token is demanded when YARDSTICK_POLICY_TOKEN is set."""
    from yardstick.catalog import resolve_to_play
    from yardstick.wire.server.host import PolicyHost
    from yardstick.wire.server.serve import PolicyServer, ServeOptions

    _, policy_params = parse_params(param)
    hosts: dict[str, PolicyHost] = {}
    for ref in refs:
        named = re.fullmatch(r"([A-Za-z0-9._-]+)=(.+)", ref)
        model_id, reference = (named.group(1), named.group(2)) if named else (None, ref)
        try:
            cls = resolve_to_play("policy", reference)
        except AuthoringError as exc:
            print_error(str(exc))
            raise typer.Exit(Exit.CALLER) from None
        host_id = model_id or re.sub(r"[^A-Za-z0-9._-]+", "-", cls.__name__).lower()
        if host_id in hosts:
            raise typer.BadParameter(
                f"two policies are named {host_id!r}: name one with ID=REF", param_hint="REFS"
            )
        hosts[host_id] = PolicyHost(cls, model_id=host_id, reference=reference, params=policy_params)
    options = ServeOptions(
        host=host,
        port=None if no_port else port,
        uds=uds,
        uds_fd=uds_fd,
        grpc_port=grpc_port,
        token=os.environ.get(TOKEN_ENV) or None,
        tls_cert=tls_cert,
        tls_key=tls_key,
        idle_timeout_min=idle_timeout_min,
    )
    try:
        server = PolicyServer(hosts, options).start()
    except (ValueError, OSError) as exc:
        print_error(str(exc))
        raise typer.Exit(Exit.USAGE if isinstance(exc, ValueError) else Exit.CALLER) from None
    tls = options.tls_cert is not None
    for model_id, policy_host in hosts.items():
        spec = policy_host.spec
        console.print(
            f"[bold]{model_id}[/bold]: {spec.name}, {spec.hz:g} Hz, chunks of {spec.action_chunk_len}, "
            f"asked every {spec.replan_every} steps"
            + (", each answer played after the chunk's rows" if spec.prefetch else "")
        )
    if server.port is not None:
        at = HostPort(host, server.port)
        console.print(f"session:  {format_url('websocket_tls' if tls else 'websocket', at)}")
        if not tls:
            console.print(f"openpi:   {format_url('openpi', Root(host, server.port))}  (and roboarena)")
    if uds is not None:
        console.print(f"session:  {format_url('websocket_unix', UnixSocket(PurePosixPath(uds)))}")
    if server.grpc_port is not None:
        console.print(
            f"gRPC:     {format_url('grpc_tls' if tls else 'grpc', HostPort(host, server.grpc_port))}"
        )
    if options.token:
        console.print(f"sessions need the bearer token in ${TOKEN_ENV}")
    try:
        with sigterm_as_interrupt():
            server.wait()
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        server.stop()
