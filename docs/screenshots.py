"""Draw the README's screenshots from a real platform: a fresh one in a temporary folder (SQLite), two
workers playing Meta-World MT10 with video, the real client filing runs, Chromium taking the pictures.

    .venv/bin/python docs/screenshots.py        # about three minutes on two cores; writes docs/*.png

Runs filed: alice's scripted expert on the public board (2 trials a task), bob's random policy (1 trial),
carol's expert marked as the Meta-World baseline, and a private run of expert and random side by side.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from platform_client.client import PlatformClient
from platform_client.eval_plan import EvalPlan

from yardstick.cli.platform_cmd import start_workers, stop_workers
from yardstick.core import admin
from yardstick.core.settings import Settings
from yardstick.gateway.app import create_app
from yardstick.gateway.services import open_services
from yardstick.signin.passwords import set_password

DOCS = Path(__file__).resolve().parent
PASSWORD = "screenshots only"


def plan(key: str, endpoints: dict[str, str], trials: int, *, competition: bool) -> EvalPlan:
    request = {"type": "nebius_competition"} if competition else {"type": "private_eval", "org": "lab"}
    return EvalPlan.model_validate(
        {
            "request_type": request,
            "eval": "metaworld.mt10",
            "endpoints": [
                {"name": name, "kind": "served", "wire": "websocket", "spec": spec}
                for name, spec in endpoints.items()
            ],
            "episodes_per_endpoint": trials,
            "transaction_key": key,
        }
    )


def wait(client: PlatformClient, submission_id: Any) -> dict[str, Any]:
    while True:
        view = client.get_submission(submission_id)
        if view.status.name in ("finished", "errored", "cancelled"):
            return view.model_dump(mode="json")
        time.sleep(1.0)


def device_page(page: Any, url: str) -> None:
    """What `yardstick login` sends a person to: alice signs in and sees the code to approve."""
    started = httpx.post(f"{url}/oauth/device/code", data={"client_id": "yardstick-cli"}).json()
    page.set_viewport_size({"width": 900, "height": 420})
    page.goto(started["verification_uri_complete"])
    page.fill("input[name=login]", "alice")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("#user-code")
    page.screenshot(path=str(DOCS / "device-page.png"))


def main() -> None:
    os.environ.setdefault("MUJOCO_GL", "egl")
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="yardstick-shots-"))
    settings = Settings(data_dir=folder)
    services = open_services(settings)
    platform = services.platform
    keys = {}
    with platform.db.writing() as session:
        admin.create_org(session, "lab", per_day=100, concurrent=10)
        for login in ("alice", "bob", "carol"):
            admin.create_user(session, login, orgs=["lab"], alias=login)
            keys[login] = admin.create_key(session, login).plaintext
        set_password(session, "alice", PASSWORD)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(services), port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    workers = start_workers(settings, 2)
    url = f"http://127.0.0.1:{port}"
    try:
        filed = {
            "alice": plan("alice", {"expert": "metaworld-expert"}, 2, competition=True),
            "bob": plan("bob", {"random": "random"}, 1, competition=True),
            "carol": plan("carol", {"expert": "metaworld-expert"}, 1, competition=True),
            "compare": plan(
                "compare", {"expert": "metaworld-expert", "random": "random"}, 1, competition=False
            ),
        }
        clients = {
            name: PlatformClient(url, api_key=keys[name if name != "compare" else "alice"]) for name in filed
        }
        created = {name: clients[name].create_submission(p).submission_id for name, p in filed.items()}
        views = {}
        for name, submission_id in created.items():
            views[name] = wait(clients[name], submission_id)
            print(f"{name}: {views[name]['status']}", file=sys.stderr)
        with platform.db.writing() as session:
            admin.add_baseline(
                session,
                "metaworld.mt10",
                int(views["carol"]["id"], 16),
                publisher="Meta-World",
                name="scripted",
            )
        with sync_playwright() as driver:
            browser = driver.chromium.launch(
                executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport={"width": 1200, "height": 1500})
            page.goto(views["compare"]["replay"]["url"])
            page.wait_for_timeout(2000)
            page.screenshot(path=str(DOCS / "run-page.png"))
            page.set_viewport_size({"width": 1200, "height": 760})
            page.goto(f"{url}/boards/metaworld.mt10")
            page.wait_for_timeout(500)
            page.screenshot(path=str(DOCS / "board-page.png"))
            device_page(page, url)
            browser.close()
    finally:
        stop_workers(workers)
        server.should_exit = True
        services.close()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"wrote run-page.png, board-page.png and device-page.png in {DOCS}", file=sys.stderr)


if __name__ == "__main__":
    main()
