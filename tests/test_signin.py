"""Sign-in end to end: `users.register` through the contract's own client against a local stand-in for GitHub
and for an OpenID Connect issuer (real sockets), on SQLite and PostgreSQL; `yardstick login` run as a real
process against a real `yardstick server`, its code approved in headless Chromium; `keys list|rotate|revoke`
and `logout`; and no key, token or password readable in the database or the server's log."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from platform_client import identity_providers
from platform_client.client import PlatformClient
from platform_client.enums import ErrorCode, KeyStatus
from platform_client.errors import PlatformError
from platform_client.ids import ApiKey
from platform_client.requests import RegisterRequest
from sqlalchemy import create_engine, inspect, text

from conftest import free_port
from deadlines import answering
from json_answers import JsonHandler
from platform_harness import running_platform
from yardstick.core.settings import SignInSettings
from yardstick.signin import providers as providers_module
from yardstick.store.models import Identity, User, utcnow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
YARDSTICK = str(Path(sys.executable).parent / "yardstick")


# --- a stand-in for the identity providers ------------------------------------------------------------


@dataclass
class StandIn:
    """GitHub's API (`/github/user`, `/github/user/emails`) and an OpenID Connect issuer (`/oidc`, with its
    discovery document and userinfo) on one local server. Tokens are the keys of `github` / `oidc`."""

    url: str = ""
    github: dict[str, dict[str, Any]] = field(default_factory=dict)
    github_emails: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    oidc: dict[str, dict[str, Any]] = field(default_factory=dict)
    down: bool = False
    asked: list[str] = field(default_factory=list)

    @property
    def github_api(self) -> str:
        return self.url + "/github"

    @property
    def issuer(self) -> str:
        return self.url + "/oidc"

    def jwt(self, subject: str) -> str:
        """An access token shaped as a JWT naming this issuer (the platform reads only `iss` from it, to
        know where to check it; the issuer's userinfo is what vouches for it)."""

        def part(value: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

        token = f"{part({'alg': 'RS256'})}.{part({'iss': self.issuer, 'sub': subject})}.c2lnbmF0dXJl"
        return token


def _handler(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            stand_in.asked.append(self.path)
            if stand_in.down:
                self._answer(503, {"message": "down for maintenance"})
                return
            token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if self.path == "/oidc/.well-known/openid-configuration":
                self._answer(
                    200, {"issuer": stand_in.issuer, "userinfo_endpoint": stand_in.issuer + "/userinfo"}
                )
            elif self.path == "/github/user" and token in stand_in.github:
                self._answer(200, stand_in.github[token])
            elif self.path == "/github/user/emails" and token in stand_in.github:
                self._answer(200, stand_in.github_emails.get(token, []))
            elif self.path == "/oidc/userinfo" and token in stand_in.oidc:
                self._answer(200, stand_in.oidc[token])
            else:
                self._answer(401, {"message": "Bad credentials"})

    return Handler


@pytest.fixture
def providers() -> Iterator[StandIn]:
    stand_in = StandIn()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stand_in))
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


# --- what a database holds, as text ---------------------------------------------------------------------


def database_text(url: str) -> str:
    """Every row of every table, as text: the file's bytes for SQLite (with its write-ahead log), each row
    cast to text for PostgreSQL."""
    if url.startswith("sqlite"):
        path = Path(url.removeprefix("sqlite:///"))
        return "".join(p.read_bytes().decode("latin-1") for p in (path, Path(f"{path}-wal")) if p.exists())
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as connection:
            tables = inspect(connection).get_table_names()
            return "\n".join(
                str(row[0])
                for table in tables
                for row in connection.execute(text(f'SELECT t::text FROM "{table}" t'))
            )
    finally:
        engine.dispose()


# --- users.register through the contract's client -----------------------------------------------------


def _sign_in_settings(stand_in: StandIn) -> SignInSettings:
    return SignInSettings(
        github_api_url=stand_in.github_api, oidc_issuers=(stand_in.issuer,), registration_org="acme"
    )


def test_a_provider_check_keeps_to_the_phase_timeouts_the_contracts_client_allows() -> None:
    """Sign-in keeps the Positronic client's phase timeouts as its own values: they must stay equal to the
    client's, or `users.register` could outlast the client's wait."""
    assert (
        providers_module.CONNECT_TIMEOUT_S,
        providers_module.READ_TIMEOUT_S,
        providers_module.WRITE_TIMEOUT_S,
        providers_module.POOL_TIMEOUT_S,
        providers_module.MAX_REQUEST_STALL_S,
    ) == (
        identity_providers.CONNECT_TIMEOUT_S,
        identity_providers.READ_TIMEOUT_S,
        identity_providers.WRITE_TIMEOUT_S,
        identity_providers.POOL_TIMEOUT_S,
        identity_providers.MAX_REQUEST_STALL_S,
    )
    assert identity_providers.GITHUB_REGISTER_TIMEOUT.read is not None
    assert identity_providers.GITHUB_REGISTER_TIMEOUT.read > providers_module.CHECK_DEADLINE_S


def test_register_creates_then_finds_then_rotates_with_the_real_client(
    tmp_path: Path, database_url: str, providers: StandIn
) -> None:
    providers.github["gho_ada"] = {"id": 4242, "login": "ada", "name": "Ada L.", "email": None}
    providers.github_emails["gho_ada"] = [
        {"email": "old@example.org", "primary": False, "verified": True},
        {"email": "ada@example.org", "primary": True, "verified": True},
    ]
    providers.oidc["grace-token"] = {"sub": "g-1", "preferred_username": "grace", "email": "g@lab.org"}
    grace_jwt = providers.jwt("g-1")
    providers.oidc[grace_jwt] = providers.oidc.pop("grace-token")
    minted: list[str] = []
    with running_platform(tmp_path, database_url, workers=0, sign_in=_sign_in_settings(providers)) as h:
        anonymous = PlatformClient(h.url)
        config = anonymous.auth_config()
        assert config.github_registration is True and config.workos is None
        timeout = anonymous.register_timeout()

        first = anonymous.register(RegisterRequest(credential="gho_ada", alias="Ada"), timeout=timeout)
        assert first.key_status is KeyStatus.created and first.api_key is not None
        assert first.artifact_location.startswith(h.url)
        minted.append(first.api_key)
        # The client keeps the key it was handed: its next call is signed in, as the new user, in the
        # org the platform puts registrations in.
        me = anonymous.me()
        assert me.user_id == first.user_id and me.alias == "Ada"
        assert list(me.organizations) == ["acme"]

        again = PlatformClient(h.url).register(RegisterRequest(credential="gho_ada"), timeout=timeout)
        assert again.key_status is KeyStatus.existing and again.api_key is None
        assert again.user_id == first.user_id

        rotated = PlatformClient(h.url).register(
            RegisterRequest(credential="gho_ada", rotate=True), timeout=timeout
        )
        assert rotated.key_status is KeyStatus.rotated and rotated.api_key not in (None, first.api_key)
        assert rotated.user_id == first.user_id
        assert rotated.api_key is not None
        minted.append(rotated.api_key)
        refused = _refusal(lambda: PlatformClient(h.url, api_key=ApiKey(first.api_key or "")).me())
        assert refused.http_status == 401
        assert PlatformClient(h.url, api_key=rotated.api_key).me().user_id == first.user_id

        # Any OpenID Connect issuer: its own user, told apart from GitHub's by the issuer.
        grace = PlatformClient(h.url).register(RegisterRequest(credential=grace_jwt), timeout=timeout)
        assert grace.key_status is KeyStatus.created and grace.user_id != first.user_id
        assert grace.api_key is not None
        minted.append(grace.api_key)

        with h.platform.db.reading() as session:
            ada = session.get(User, int(first.user_id))
            assert ada is not None and ada.login == "ada@127.0.0.1" and ada.email == "ada@example.org"
            identities = {(i.provider, i.subject) for i in session.query(Identity).all()}
        assert identities == {("github", "4242"), ("oidc", "g-1")}

        stored = database_text(h.settings.database)
    assert "ada@example.org" in stored  # the dump does read what the tables hold
    for key in minted:
        assert key not in stored and key[12:] not in stored


def _refusal(call: Any) -> PlatformError:
    with pytest.raises(PlatformError) as refused:
        call()
    return refused.value


def test_register_refusals_name_the_problem_and_create_nothing(tmp_path: Path, providers: StandIn) -> None:
    providers.github["gho_ada"] = {"id": 1, "login": "ada", "email": "ada@example.org"}
    with running_platform(tmp_path, None, workers=0, sign_in=_sign_in_settings(providers)) as h:
        anonymous = PlatformClient(h.url)
        with h.platform.db.reading() as session:
            users_before = session.query(User).count()

        wrong = _refusal(lambda: anonymous.register(RegisterRequest(credential="gho_nobody")))
        assert wrong.http_status == 401 and wrong.code is ErrorCode.unauthorized
        assert "credential" in str(wrong)

        foreign = _refusal(lambda: anonymous.register(RegisterRequest(credential="yst_forged.token")))
        assert foreign.http_status == 401

        blank = httpx.post(h.url + "/v1/users.register", json={"credential": "  "})
        assert blank.status_code == 400 and "credential" in blank.json()["error"]["message"]

        providers.down = True
        down = _refusal(lambda: anonymous.register(RegisterRequest(credential="gho_ada")))
        assert down.code is ErrorCode.upstream_unavailable and "nothing was created" in str(down)
        providers.down = False

        with h.platform.db.reading() as session:
            assert session.query(User).count() == users_before
            assert session.query(Identity).count() == 0
        # The credential went to GitHub only (its prefix says whose it is), never to the OIDC issuer.
        assert not any(path.startswith("/oidc") for path in providers.asked)


def test_auth_config_says_no_github_when_none_is_configured(tmp_path: Path) -> None:
    with running_platform(tmp_path, None, workers=0) as h:
        config = PlatformClient(h.url).auth_config()
        assert config.github_registration is False
        refused = _refusal(lambda: PlatformClient(h.url).register(RegisterRequest(credential="gho_x")))
        assert refused.http_status == 401


# --- yardstick login in a browser ---------------------------------------------------------------------


@dataclass
class Server:
    url: str
    data_dir: Path
    log: Path
    env: dict[str, str]

    def cli(
        self, *args: str, stdin: str | None = None, config: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if config is not None:
            env["YARDSTICK_CONFIG_DIR"] = str(config)
        return subprocess.run(
            [YARDSTICK, *args], input=stdin, capture_output=True, text=True, env=env, timeout=120
        )

    def admin(self, *args: str, stdin: str | None = None) -> None:
        done = self.cli("admin", *args, "--data-dir", str(self.data_dir), stdin=stdin)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """`yardstick server` as a user runs it, its every request logged (to grep for secrets later)."""
    data_dir, log = tmp_path / "data", tmp_path / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("YARDSTICK_", "POSITRONIC_PLATFORM_"))}
    env["COLUMNS"] = "200"
    port = free_port()
    with log.open("w") as sink:
        process = subprocess.Popen(
            [
                YARDSTICK,
                "server",
                "--data-dir",
                str(data_dir),
                "--port",
                str(port),
                "--no-worker",
                "--log-level",
                "info",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    answering(url + "/healthz", process, log)
    found = Server(url, data_dir, log, env)
    found.admin("org", "create", "acme")
    found.admin("user", "create", "ada", "--org", "acme", "--password", stdin="correct horse battery\n")
    try:
        yield found
    finally:
        process.terminate()
        process.wait(timeout=30)


class Login:
    """`yardstick login` running, with the link and code it printed."""

    def __init__(self, server: Server, config: Path, *extra: str) -> None:
        env = dict(server.env, YARDSTICK_CONFIG_DIR=str(config))
        self.process = subprocess.Popen(
            [YARDSTICK, "login", "--platform-url", server.url, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stderr is not None
        seen = ""
        while "check that it shows the code" not in seen:
            line = self.process.stderr.readline()
            assert line, "login ended before printing its code: " + seen
            seen += line
        link = re.search(r"(http://\S+/device\?code=(\S+))", seen)
        assert link is not None, seen
        self.link, self.code = link.group(1), link.group(2)

    def finish(self) -> tuple[int, str]:
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, out + err


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (make test installs Debian's)")
def test_login_is_approved_in_chromium_and_keys_are_managed_from_the_cli(
    server: Server, tmp_path: Path
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    config = tmp_path / "config"
    secrets_seen: list[str] = ["correct horse battery"]

    login = Login(server, config, "--label", "lab-box")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto(login.link)
        # Not signed in yet: the sign-in form first, then back to the code.
        page.fill("input[name=login]", "ada")
        page.fill("input[name=password]", "wrong password")
        page.click("button[type=submit]")
        assert "Wrong login or password" in page.inner_text("[role=alert]")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        page.wait_for_selector("#user-code")
        assert page.inner_text("#user-code") == login.code
        assert "ada" in page.inner_text(".who")
        page.click("button[value=approve]")
        page.wait_for_selector("h1.ok")

        status, said = login.finish()
        assert status == 0, said
        assert "Signed in to" in said and "ada" in said

        record_file = config / "credentials.json"
        assert stat.S_IMODE(record_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(config.stat().st_mode) == 0o700
        record = json.loads(record_file.read_text())
        assert record["platform_url"] == server.url
        first_key = record["api_key"]
        secrets_seen.append(first_key)
        me = PlatformClient(server.url, api_key=ApiKey(first_key)).me()
        assert list(me.organizations) == ["acme"]

        # The saved key is what the other commands use, with no environment variable set.
        listed = server.cli("keys", "list", "--json", config=config)
        assert listed.returncode == 0, listed.stderr
        keys = json.loads(listed.stdout)["keys"]
        assert [(k["label"], k["current"]) for k in keys] == [("login: lab-box", True)]
        assert first_key.startswith(keys[0]["prefix"])
        catalog = server.cli("eval", "catalog", "--json", config=config)
        assert catalog.returncode == 0, catalog.stdout + catalog.stderr

        # A second sign-in, denied in the browser: nothing saved, the first key untouched.
        denied = Login(server, tmp_path / "other-config")
        page.goto(denied.link)  # the browser is signed in now: straight to the code
        assert page.inner_text("#user-code") == denied.code
        page.click("button[value=deny]")
        page.wait_for_selector("text=Denied")
        status, said = denied.finish()
        assert status == 1 and "denied" in said, said
        assert not (tmp_path / "other-config" / "credentials.json").exists()

        # A code typed by hand that nobody asked for is refused on the page.
        page.goto(server.url + "/device?code=BCDF-GHJK")
        assert "No sign-in is waiting" in page.inner_text("[role=alert]")
        browser.close()

    # The environment variable overrides the saved record.
    env_key = server.cli("keys", "list", "--json", config=config)
    overridden = subprocess.run(
        [YARDSTICK, "keys", "list", "--platform-url", server.url],
        capture_output=True,
        text=True,
        env=dict(server.env, YARDSTICK_CONFIG_DIR=str(config), YARDSTICK_API_KEY="yk_not-a-key"),
        timeout=60,
    )
    assert env_key.returncode == 0 and overridden.returncode == 1, overridden.stdout + overridden.stderr

    rotated = server.cli("keys", "rotate", config=config)
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    second_key = json.loads((config / "credentials.json").read_text())["api_key"]
    secrets_seen.append(second_key)
    assert second_key != first_key
    assert _refusal(lambda: PlatformClient(server.url, api_key=ApiKey(first_key)).me()).http_status == 401
    assert PlatformClient(server.url, api_key=ApiKey(second_key)).me().user_id == me.user_id

    out = server.cli("logout", config=config)
    assert out.returncode == 0 and "revoked" in out.stderr, out.stdout + out.stderr
    assert not (config / "credentials.json").exists()
    assert _refusal(lambda: PlatformClient(server.url, api_key=ApiKey(second_key)).me()).http_status == 401
    assert server.cli("keys", "list", config=config).returncode == 1

    # Nothing secret in the database or in the server's log, which did record every request.
    logged = server.log.read_text()
    assert "POST /oauth/token" in logged and "POST /v1/keys.rotate" in logged
    stored = database_text(f"sqlite:///{server.data_dir / 'yardstick.db'}")
    assert "ada" in stored
    for secret in secrets_seen:
        assert secret not in logged, secret[:6]
        assert secret not in stored, secret[:6]


# --- the device flow's endpoints (RFC 8628) ---------------------------------------------------------------

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code"


def test_the_device_endpoints_speak_rfc_8628(tmp_path: Path, database_url: str) -> None:
    with running_platform(
        tmp_path, database_url, workers=0, sign_in=SignInSettings(device_interval_s=1)
    ) as h:
        http = httpx.Client(base_url=h.url)

        def poll(started: dict[str, Any], **changes: str) -> httpx.Response:
            form = {"grant_type": GRANT_TYPE, "device_code": started["device_code"], "client_id": "cli"}
            return http.post("/oauth/token", data={**form, **changes})

        missing = http.post("/oauth/device/code", data={"scope": "keys"})
        assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
        assert "client_id" in missing.json()["error_description"]
        as_json = http.post("/oauth/device/code", json={"client_id": "cli"})
        assert as_json.status_code == 400 and "x-www-form-urlencoded" in as_json.json()["error_description"]

        started = http.post("/oauth/device/code", data={"client_id": "cli"}).json()
        assert re.fullmatch(r"[B-Z]{4}-[B-Z]{4}", started["user_code"])
        assert started["verification_uri"] == h.url + "/device"
        assert started["verification_uri_complete"].endswith("?code=" + started["user_code"])
        assert (started["expires_in"], started["interval"]) == (600, 1)

        assert poll(started).json()["error"] == "authorization_pending"
        too_fast = poll(started).json()
        assert too_fast["error"] == "slow_down" and too_fast["interval"] == 6  # raised by 5 s
        assert poll(started, client_id="other").json()["error"] == "invalid_grant"
        assert poll(started, grant_type="password").json()["error"] == "unsupported_grant_type"

        alice = int(PlatformClient(h.url, api_key=ApiKey(h.keys["alice"])).me().user_id)
        assert h.services.sign_in.grants.decide(started["user_code"], alice, approve=True)
        # The grants' clock moved past the slowed interval (6 s) instead of the test waiting it out.
        grants = h.services.sign_in.grants
        grants.clock = lambda: utcnow() + dt.timedelta(seconds=6)
        granted = poll(started)
        assert granted.status_code == 200 and granted.headers["cache-control"] == "no-store"
        token = granted.json()["access_token"]
        assert granted.json()["token_type"] == "bearer"
        assert poll(started).json()["error"] == "invalid_grant"  # the token is issued once

        # The token buys one key, once; the key is alice's.
        minted = http.post("/v1/keys.create", json={"credential": token, "label": "box"})
        assert minted.status_code == 200, minted.text
        assert minted.json()["login"] == "alice" and minted.json()["label"] == "login: box"
        again = http.post("/v1/keys.create", json={"credential": token, "label": "box"})
        assert again.status_code == 401
        key = ApiKey(minted.json()["api_key"])
        assert int(PlatformClient(h.url, api_key=key).me().user_id) == alice

        denied = http.post("/oauth/device/code", data={"client_id": "cli"}).json()
        assert h.services.sign_in.grants.decide(denied["user_code"], alice, approve=False)
        assert poll(denied).json()["error"] == "access_denied"
        forged = http.post("/v1/keys.create", json={"credential": token[:-4] + "0000"})
        assert forged.status_code == 401


def test_register_of_a_user_who_exists_answers_existing_and_changes_nothing(
    tmp_path: Path, database_url: str, providers: StandIn
) -> None:
    """Alice exists (an administrator made her, with her alias and a key); she registers through the
    platform's own sign-in, naming another alias: `existing`, no key, her alias and key as they were. Ada,
    registered once by GitHub, registers again naming another alias: the same."""
    providers.github["gho_ada"] = {"id": 4242, "login": "ada", "name": "Ada L.", "email": None}
    with running_platform(tmp_path, database_url, workers=0, sign_in=_sign_in_settings(providers)) as h:
        http = httpx.Client(base_url=h.url)
        alice = PlatformClient(h.url, api_key=ApiKey(h.keys["alice"]))
        alice_id = int(alice.me().user_id)
        started = http.post("/oauth/device/code", data={"client_id": "cli"}).json()
        assert h.services.sign_in.grants.decide(started["user_code"], alice_id, approve=True)
        h.services.sign_in.grants.clock = lambda: utcnow() + dt.timedelta(seconds=60)
        form = {"grant_type": GRANT_TYPE, "device_code": started["device_code"], "client_id": "cli"}
        token = http.post("/oauth/token", data=form).json()["access_token"]
        timeout = PlatformClient(h.url).register_timeout()

        again = PlatformClient(h.url).register(
            RegisterRequest(credential=token, alias="Impostor"), timeout=timeout
        )
        assert (again.key_status, again.api_key, int(again.user_id)) == (KeyStatus.existing, None, alice_id)
        me = alice.me()  # her key still works, and she is shown as before
        assert me.alias == "alice"

        first = PlatformClient(h.url).register(
            RegisterRequest(credential="gho_ada", alias="Ada"), timeout=timeout
        )
        assert first.key_status is KeyStatus.created and first.api_key is not None
        renamed = PlatformClient(h.url).register(
            RegisterRequest(credential="gho_ada", alias="Eve"), timeout=timeout
        )
        assert renamed.key_status is KeyStatus.existing and renamed.api_key is None
        assert PlatformClient(h.url, api_key=first.api_key).me().alias == "Ada"
