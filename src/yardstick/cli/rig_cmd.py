"""`yardstick rig run`: the rig process at a robot — it dials out to the platform with the rig's key, claims
its org's rig plans of its shape, and plays them on the robot with the operator at the station console."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType

import typer

from yardstick.cli import rig_demo
from yardstick.cli.display import console, print_error
from yardstick.cli.exits import Exit

rig_app = typer.Typer(help="Run a rig: the process at a robot that plays rig plans.", no_args_is_help=True)

SIMULATED_FRANKA = "yardstick.catalog.sim_franka:SimulatedFranka"
KEY_ENV = "YARDSTICK_RIG_KEY"


@rig_app.command("run")
def run(
    shape: str = typer.Option(..., "--shape", help="The robot's shape: franka or yam (the rig's, as added)."),
    name: str = typer.Option(..., "--name", help="The rig's name, as an admin added it."),
    robot: str = typer.Option(
        SIMULATED_FRANKA, "--robot", help="The robot adapter, module:Class (default: the simulated Franka)."
    ),
    platform: str = typer.Option(
        "http://127.0.0.1:8000", "--platform", envvar="YARDSTICK_PLATFORM_URL", help="The platform's URL."
    ),
    key_file: Path | None = typer.Option(
        None, "--key-file", help=f"A file holding the rig's key (else ${KEY_ENV}; never a command line)."
    ),
    console_host: str = typer.Option(
        "127.0.0.1", "--console-host", help="Where the station console listens."
    ),
    console_port: int = typer.Option(0, "--console-port", min=0, max=65535, help="Its port (0: any free)."),
    verdict_wait: float = typer.Option(
        300.0, "--verdict-wait", min=1.0, help="Seconds an operator has to judge an episode (else UNSCORED)."
    ),
    once: bool = typer.Option(False, "--once", help="Stop after one run."),
    terminal: bool = typer.Option(
        False, "--terminal", help="The station console in this terminal too (one line a command; ? for help)."
    ),
) -> None:
    """Play this org's rig plans on the robot, with an operator at the station console."""
    from yardstick.rig.agent import RigAgent, RigOptions
    from yardstick.rig.client import PlatformLink, RigRefused
    from yardstick.rig.console import Console
    from yardstick.rig.station import Station
    from yardstick.rig.terminal import TerminalConsole
    from yardstick.sdk import load_object
    from yardstick.sdk.errors import AuthoringError
    from yardstick.sdk.robots import robot_spec

    key = key_file.read_text().strip() if key_file is not None else os.environ.get(KEY_ENV, "").strip()
    if not key:
        print_error(
            f"no rig key: give --key-file or set {KEY_ENV} (an admin mints one: yardstick admin rig add)"
        )
        raise typer.Exit(Exit.USAGE)
    try:
        adapter = load_object(robot)
        spec = robot_spec(adapter)
    except (AuthoringError, ValueError, ImportError) as exc:
        print_error(f"--robot {robot}: {exc}")
        raise typer.Exit(Exit.USAGE) from None
    if spec.shape != shape:
        print_error(f"--robot {robot} is a {spec.shape}, and --shape says {shape}")
        raise typer.Exit(Exit.USAGE)
    link = PlatformLink(platform, key)
    try:
        said = link.hello()
    except RigRefused as refused:
        print_error(str(refused))
        raise typer.Exit(Exit.CALLER) from None
    if said.get("rig") != name or said.get("shape") != shape:
        print_error(f"the key is rig {said.get('rig')!r} ({said.get('shape')}), not {name!r} ({shape})")
        raise typer.Exit(Exit.USAGE)
    station = Station(name, shape, tuple(spec.cameras))
    console_server = Console(station, console_host, console_port)
    address = console_server.start()
    console.print(f"rig {name} ({shape}) of {said.get('org')} online at {platform}")
    console.print(f"station console: {address}", highlight=False)
    agent = RigAgent(link, adapter, spec, station, RigOptions(verdict_wait_s=verdict_wait, once=once))
    at_keyboard = (
        TerminalConsole(station, sys.stdin, lambda text: print(text, flush=True)) if terminal else None
    )
    if at_keyboard is not None:
        at_keyboard.start()

    def quit_now(signum: int, frame: FrameType | None) -> None:
        agent.stop_robot()  # the robot first
        agent.quit.set()

    signal.signal(signal.SIGTERM, quit_now)
    signal.signal(signal.SIGINT, quit_now)
    try:
        agent.run()
    except RigRefused as refused:
        print_error(str(refused))
        raise typer.Exit(Exit.CALLER) from None
    finally:
        if at_keyboard is not None:
            at_keyboard.stop()
        console_server.stop()
        link.close()


rig_app.command("demo")(rig_demo.demo)
