"""`yardstick rig demo`: a lab on one machine, in one command — a platform, two Franka policies served over
the wire, a rig plan filed for them with the real Positronic client (a blind sample), and the simulated
Franka's rig with its station console. It prints the console's address; Ctrl-C stops all of it."""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Final

import typer

from yardstick.cli.display import console

DEMO_ORG: Final = "lab"
DEMO_USER: Final = "researcher"
DEMO_RIG: Final = "demo-franka"
POLICIES: Final = {"lean": "LeanOver", "sway": "Sway"}
START_TIMEOUT_S: Final = 60.0


def demo(
    data_dir: Path | None = typer.Option(
        None, "--data-dir", help="Where the platform keeps its data (a new temporary folder by default)."
    ),
    port: int = typer.Option(
        8080, "--port", min=0, max=65535, help="The platform's HTTP port (0: any free)."
    ),
    console_port: int = typer.Option(8081, "--console-port", min=0, max=65535, help="The station console's."),
    cap: int = typer.Option(20, "--cap", min=2, help="Seconds an episode may run."),
) -> None:
    """A platform, two policies, a rig plan and a simulated Franka's rig with its station console."""
    import uvicorn
    from platform_client.client import PlatformClient
    from platform_client.eval_plan import EvalPlan

    from yardstick.catalog import franka_policies
    from yardstick.catalog.sim_franka import SimulatedFranka
    from yardstick.core import admin, rigs
    from yardstick.core.boards import page_url
    from yardstick.core.settings import Settings
    from yardstick.gateway.app import create_app
    from yardstick.gateway.services import open_services
    from yardstick.rig.agent import RigAgent, RigOptions
    from yardstick.rig.client import PlatformLink
    from yardstick.rig.console import Console
    from yardstick.rig.station import Station
    from yardstick.sdk.robots import robot_spec
    from yardstick.store.models import Run
    from yardstick.wire.server.host import PolicyHost
    from yardstick.wire.server.serve import PolicyServer, ServeOptions

    folder = data_dir or Path(tempfile.mkdtemp(prefix="ys-rig-demo-"))
    settings = Settings(data_dir=folder, allow_remote=("127.0.0.1",))
    services = open_services(settings)
    stack: list[Any] = []
    try:
        with services.platform.db.writing() as session:
            admin.create_org(session, DEMO_ORG, per_day=100, concurrent=10)
            admin.create_user(session, DEMO_USER, orgs=[DEMO_ORG], alias=DEMO_USER)
            api_key = admin.create_key(session, DEMO_USER).plaintext
            rig_key = rigs.register(session, DEMO_ORG, DEMO_RIG, "franka").plaintext
        servers = {
            name: PolicyServer(
                {name: PolicyHost(getattr(franka_policies, cls), model_id=name, reference=cls)},
                ServeOptions(port=0),
            ).start()
            for name, cls in POLICIES.items()
        }
        stack.extend(servers.values())
        server = uvicorn.Server(
            uvicorn.Config(create_app(services), host="127.0.0.1", port=port, log_level="warning")
        )
        http = threading.Thread(target=server.run, name="platform", daemon=True)
        http.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if time.monotonic() > deadline or not http.is_alive():
                raise typer.Exit(1)
            time.sleep(0.05)
        bound = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{bound}"
        filed = PlatformClient(url, api_key=api_key).create_submission(  # type: ignore[arg-type]
            EvalPlan.model_validate(
                {
                    "request_type": {"type": "private_eval", "org": DEMO_ORG},
                    "eval": "franka.tabletop",
                    "endpoints": [
                        {
                            "name": name,
                            "wire": "websocket",
                            "address": {"host": "127.0.0.1", "port": s.port, "path": "/api/v1/session"},
                        }
                        for name, s in servers.items()
                    ],
                    "episodes_per_endpoint": 1,
                    "cap_per_episode_sec": cap,
                    "transaction_key": "rig-demo",
                }
            )
        )
        with services.platform.db.reading() as session:
            run = session.get(Run, int(filed.submission_id))
            token = run.replay_token if run is not None else ""
        (folder / "demo-api-key").write_text(api_key + "\n")
        spec = robot_spec(SimulatedFranka)
        station = Station(DEMO_RIG, spec.shape, tuple(spec.cameras))
        station_console = Console(station, "127.0.0.1", console_port)
        address = station_console.start()
        stack.append(station_console)
        link = PlatformLink(url, rig_key)
        agent = RigAgent(link, SimulatedFranka, spec, station, RigOptions())
        console.print(
            f"platform:        {url}   (data in {folder}; a user's API key in {folder / 'demo-api-key'})"
        )
        total = filed.resolved.episodes_total if filed.resolved is not None else "its"
        console.print(
            f"rig plan:        {filed.submission_id:x}, {total} episodes "
            f"of franka.tabletop, a blind sample of {' and '.join(POLICIES)}"
        )
        console.print(f"run page:        {page_url(url, token or '')}")
        console.print(f"station console: {address}", highlight=False)
        console.print("open the console, lay out each episode and press Start; Ctrl-C stops everything")

        def quit_now(signum: int, frame: FrameType | None) -> None:
            agent.stop_robot()
            agent.quit.set()

        signal.signal(signal.SIGINT, quit_now)
        signal.signal(signal.SIGTERM, quit_now)
        try:
            agent.run()
        finally:
            link.close()
            server.should_exit = True
            http.join(timeout=10)
    finally:
        for part in reversed(stack):
            part.stop()
        services.close()
