"""`platform-register`, the one command positronic-platform-client installs (0.41.2, and 0.37.1 beside it),
signs in to a fresh `yardstick server` as the README says: the real executable from each one's own venv, the
real server as a user starts it, and GitHub stood in at the network's edge (`github_standin`), reached by both
through the `HTTPS_PROXY` and `SSL_CERT_FILE` they read. It exits 0 and the key it prints works for a keyed
call."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import free_port
from deadlines import answering
from github_standin import GitHubStandIn, github_stand_in
from yardstick.core.settings import GITHUB_API, SignInSettings

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ("0.41.2", "0.37.1")
YARDSTICK = str(Path(sys.executable).parent / "yardstick")


def _venv(version: str) -> Path:
    venv = ROOT / f".venv-positronic-{version}"
    if not (venv / "bin" / "platform-register").exists():
        pytest.skip(f"no {venv.name} (make test builds it)")
    return venv


@dataclass
class Fresh:
    url: str  # where a client reaches the platform
    github: GitHubStandIn
    env: dict[str, str]  # a user's shell: no Yardstick or Positronic setting, GitHub through the proxy
    client: Path  # the venv of the client under test


@pytest.fixture(params=CLIENTS)
def fresh(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fresh]:
    """`yardstick server` on a new data folder with no sign-in setting at all, as a first install runs, and
    the client of one version."""
    client = _venv(request.param)
    with github_stand_in(tmp_path) as github:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("YARDSTICK_", "POSITRONIC_PLATFORM_"))
        }
        env.update(github.env())
        port, log = free_port(), tmp_path / "server.log"
        with log.open("w") as sink:
            process = subprocess.Popen(
                [
                    YARDSTICK,
                    "server",
                    "--data-dir",
                    str(tmp_path / "data"),
                    "--port",
                    str(port),
                    "--no-worker",
                ],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
            )
        url = f"http://127.0.0.1:{port}"
        answering(url + "/healthz", process, log, base_s=90)
        try:
            yield Fresh(url, github, env, client)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _client_env(fresh: Fresh) -> dict[str, str]:
    """The user's shell for the client: its own venv only, none of the paths the server was started with."""
    return {k: v for k, v in fresh.env.items() if k != "PYTHONPATH"}


def _register(fresh: Fresh, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(fresh.client / "bin" / "platform-register"), "--platform-url", fresh.url, *args],
        capture_output=True,
        text=True,
        env=_client_env(fresh),
        timeout=120,
    )


def _me(fresh: Fresh, key: str) -> str:
    """`users.me` through the client under test, with `key`: the account's alias."""
    script = (
        "import sys; from platform_client.client import PlatformClient; "
        "print(PlatformClient(sys.argv[1], api_key=sys.argv[2]).me().alias)"
    )
    done = subprocess.run(
        [str(fresh.client / "bin" / "python"), "-c", script, fresh.url, key],
        capture_output=True,
        text=True,
        env=_client_env(fresh),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_platform_register_signs_in_to_a_fresh_install_through_github_and_its_key_works(fresh: Fresh) -> None:
    done = _register(fresh, "--alias", "Ada")

    assert done.returncode == 0, done.stdout + done.stderr
    # The prompt a person follows, on stderr: GitHub's page and the code to type there.
    assert "open https://github.com/login/device and enter WDJB-MJHT" in done.stderr
    assert re.search(r"^user \S+ \(created\)$", done.stdout, re.M), done.stdout
    key = re.search(r"^export POSITRONIC_PLATFORM_API_KEY=(\S+)$", done.stdout, re.M)
    assert key is not None, done.stdout
    assert _me(fresh, key.group(1)) == "Ada"
    # Through the client's own default GitHub app; only GitHub went through the proxy (the platform is
    # reached directly), and the platform checked the token with GitHub's API.
    assert fresh.github.client_ids == ["Ov23liw7qPBHHzUfjfZA"]
    assert set(fresh.github.tunnelled) == {"github.com:443", "api.github.com:443"}


def test_a_second_sign_in_finds_the_account_and_rotate_mints_a_key_that_works(fresh: Fresh) -> None:
    first = _register(fresh, "--alias", "Ada")
    assert first.returncode == 0, first.stdout + first.stderr

    again = _register(fresh)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "(existing)" in again.stdout and "export POSITRONIC_PLATFORM_API_KEY" not in again.stdout

    rotated = _register(fresh, "--rotate")
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    key = re.search(r"^export POSITRONIC_PLATFORM_API_KEY=(\S+)$", rotated.stdout, re.M)
    assert key is not None and "(rotated)" in rotated.stdout, rotated.stdout
    assert _me(fresh, key.group(1)) == "Ada"


def test_github_sign_in_is_on_unless_an_install_turns_it_off() -> None:
    assert SignInSettings.from_env({}).github_api_url == GITHUB_API
    assert SignInSettings.from_env({"YARDSTICK_GITHUB": "off"}).github_api_url is None
    enterprise = SignInSettings.from_env({"YARDSTICK_GITHUB": "https://ghe.lab.org/api/v3"})
    assert enterprise.github_api_url == "https://ghe.lab.org/api/v3"
