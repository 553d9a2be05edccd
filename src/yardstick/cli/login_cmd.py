"""`yardstick login`, `yardstick logout` and `yardstick keys list|revoke|rotate`: signing this machine in to a
platform and managing the signed-in user's keys.

`login` runs the platform's own device flow (RFC 8628) with the contract client's `DeviceFlow` (the same
polling code `platform-register` runs against GitHub or WorkOS): it prints a link and a code, a person
signs in on the platform's `/device` page and approves the code, and the platform's access token is
exchanged (`keys.create`, spending it) for a key of this machine's own. Every login mints one, so a second
machine signs in without touching the first's key. The key is saved with the platform in the record of
`credentials.py` (mode 0600); a key this machine held before for the same platform is revoked.

Exit statuses as in `client_cmd.py`: 1 the caller (a denied or expired code, a refused key), 2 usage,
3 the platform (unreachable, failing).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys

import httpx
import typer
from platform_client.device_flow import (
    DeviceFlow,
    DeviceFlowError,
    ProviderFailed,
    require_allowed_platform_url,
)
from platform_client.errors import PlatformError
from platform_client.identity_providers import IdentityProvider
from rich.markup import escape
from rich.table import Table

from yardstick.cli import credentials
from yardstick.cli.client_cmd import URL_ENVS, explained_calls, platform_and_key
from yardstick.cli.display import console, fail, print_table
from yardstick.cli.exits import Exit
from yardstick.cli.own_calls import call, http_to
from yardstick.core.keys import PREFIX_LEN  # as the platform cuts a key's prefix

CLIENT_ID = "yardstick-cli"

LoginUrl = typer.Option(
    None,
    "--platform-url",
    envvar=URL_ENVS,
    show_envvar=True,
    show_default=False,
    help="The platform to sign in to [default: the one saved, else http://127.0.0.1:8080].",
)
AsJson = typer.Option(False, "--json", help="Print the answer as JSON on stdout.")


def _saved() -> credentials.Credentials | None:
    try:
        return credentials.read()
    except credentials.RecordUnreadable:
        return None  # login replaces it; the other commands say what is wrong with it


# --- login ---------------------------------------------------------------------------------------


def _why(exc: DeviceFlowError) -> str:
    text = str(exc)
    if "refused the authorization" in text:
        return "the sign-in was denied in the browser; nothing was saved"
    if "expired" in text or "in time" in text:
        return "the code expired before it was approved: run `yardstick login` again"
    return f"the sign-in did not complete: {text}"


def _sign_in(flow: DeviceFlow, url: str) -> str:
    """The platform's access token, once a person approved the code in a browser."""
    try:
        authorization = flow.start_device_authorization()
    except ProviderFailed as exc:
        fail(Exit.PLATFORM, f"the platform at {url} could not start a sign-in: {exc}")
    except DeviceFlowError as exc:
        fail(Exit.CALLER, str(exc))
    code = authorization.user_code
    link = f"{authorization.verification_uri}?code={code}"
    minutes = max(1, round(authorization.expires_in / 60))
    # To stderr: a prompt for the person at the terminal.
    print(
        f"To sign in, open this page in a browser:\n\n    {link}\n\n"
        f"and check that it shows the code  {code}\n"
        f"Waiting for approval (the code expires in {minutes} minutes)…",
        file=sys.stderr,
        flush=True,
    )
    try:
        return flow.poll_for_token(authorization)
    except ProviderFailed as exc:
        fail(Exit.PLATFORM, f"the platform at {url} failed during the sign-in: {exc}")
    except DeviceFlowError as exc:
        fail(Exit.CALLER, _why(exc))
    except KeyboardInterrupt:
        fail(Exit.INTERRUPTED, "sign-in abandoned")


def login(
    platform_url: str | None = LoginUrl,
    label: str | None = typer.Option(
        None, "--label", help="Names this machine's key [default: the host name]."
    ),
    plaintext_http: bool = typer.Option(
        False,
        "--plaintext-http",
        help="Sign in to an http platform that is not loopback, on a link you trust.",
    ),
) -> None:
    """Sign this machine in: approve a code in the browser, and keep a key of this machine's own."""
    previous = _saved()
    url = (platform_url or (previous.platform_url if previous else credentials.DEFAULT_PLATFORM_URL)).rstrip(
        "/"
    )
    try:
        require_allowed_platform_url(url, plaintext_http=plaintext_http, flag="--plaintext-http")
    except (ValueError, httpx.InvalidURL) as exc:
        fail(Exit.USAGE, str(exc))
    provider = IdentityProvider(
        name=f"the platform at {url}",
        device_authorization_url=f"{url}/oauth/device/code",
        token_url=f"{url}/oauth/token",
        scope=None,
    )
    with http_to(url) as http:
        token = _sign_in(DeviceFlow(provider, CLIENT_ID, http), url)
        with explained_calls(url, False):
            minted = call(
                http,
                "POST",
                "/v1/keys.create",
                body={"credential": token, "label": label or socket.gethostname()},
            )
        path = credentials.write(credentials.Credentials(platform_url=url, api_key=minted["api_key"]))
        replaced = previous is not None and credentials.same_platform(previous.platform_url, url)
        if replaced and previous is not None and previous.api_key != minted["api_key"]:
            # The key this machine held before: its own to end (if it is still live).
            with contextlib.suppress(PlatformError, httpx.HTTPError):
                call(
                    http,
                    "POST",
                    "/v1/keys.revoke",
                    key=previous.api_key,
                    body={"prefix": previous.api_key[:PREFIX_LEN]},
                )
    console.print(
        f"Signed in to {escape(url)} as [bold]{escape(minted['login'])}[/bold]. This machine's key "
        f"({escape(minted['prefix'])}…, {escape(minted['label'])!r}) is saved in {escape(str(path))}.",
        soft_wrap=True,
    )


# --- logout --------------------------------------------------------------------------------------


def logout() -> None:
    """Revoke this machine's key on the platform and forget it here."""
    path = credentials.record_path()
    try:
        record = credentials.read()
    except credentials.RecordUnreadable as exc:
        credentials.remove()
        console.print(f"{escape(str(exc))}; removed it", soft_wrap=True)
        return
    if record is None:
        console.print(f"Not signed in: no record at {escape(str(path))}.", soft_wrap=True)
        return
    prefix = record.api_key[:PREFIX_LEN]
    try:
        with http_to(record.platform_url) as http:
            call(http, "POST", "/v1/keys.revoke", key=record.api_key, body={"prefix": prefix})
    except PlatformError as exc:
        if exc.http_status >= 500:
            credentials.remove()
            fail(Exit.PLATFORM, f"the record is removed, but the platform failed to revoke {prefix}…: {exc}")
        # The key was already revoked (or never valid there): nothing left to end on the platform.
    except httpx.HTTPError as exc:
        credentials.remove()
        fail(
            Exit.PLATFORM,
            f"the record is removed, but {record.platform_url} could not be reached to revoke key {prefix}… "
            f"({type(exc).__name__}): revoke it later with `yardstick keys revoke {prefix}`",
        )
    credentials.remove()
    console.print(
        f"Signed out of {escape(record.platform_url)}: key {prefix}… revoked, record removed.", soft_wrap=True
    )


# --- keys ----------------------------------------------------------------------------------------

keys_app = typer.Typer(help="The signed-in user's API keys.", no_args_is_help=True)


def _key_for(given_url: str | None) -> tuple[str, str]:
    url, key = platform_and_key(given_url)
    if key is None:
        fail(Exit.CALLER, f"no API key for {url}: run `yardstick login`")
    return url, key


@keys_app.command("list")
def keys_list(platform_url: str | None = LoginUrl, as_json: bool = AsJson) -> None:
    """Your live keys: prefix, label, when made and last used (a key's plaintext is never kept)."""
    url, key = _key_for(platform_url)
    with http_to(url) as http, explained_calls(url, as_json):
        listed = call(http, "GET", "/v1/keys.list", key=key)
    if as_json:
        print(json.dumps(listed, indent=2))
        return
    table = Table(title=f"{len(listed['keys'])} live keys", title_justify="left")
    for column in ("prefix", "label", "created", "last used", ""):
        table.add_column(column, no_wrap=column != "label")
    for row in listed["keys"]:
        table.add_row(
            row["prefix"] + "…",
            escape(row["label"]),
            row["created_at"][:16].replace("T", " "),
            (row["last_used_at"] or "–")[:16].replace("T", " "),
            "this one" if row["current"] else "",
        )
    print_table(table)


@keys_app.command("revoke")
def keys_revoke(
    prefix: str = typer.Argument(..., help="The key's prefix, as `yardstick keys list` shows it."),
    platform_url: str | None = LoginUrl,
) -> None:
    """Revoke one of your keys (a lost machine's, say)."""
    url, key = _key_for(platform_url)
    prefix = prefix.strip().rstrip("…").rstrip(".")
    with http_to(url) as http, explained_calls(url, False):
        call(http, "POST", "/v1/keys.revoke", key=key, body={"prefix": prefix})
    saved = _saved()
    if (
        saved is not None
        and saved.api_key.startswith(prefix)
        and credentials.same_platform(saved.platform_url, url)
    ):
        credentials.remove()
        console.print(f"key {escape(prefix)}… revoked: it was this machine's, so its record is removed too")
        return
    console.print(f"key {escape(prefix)}… revoked")


@keys_app.command("rotate")
def keys_rotate(platform_url: str | None = LoginUrl) -> None:
    """Replace the key in use with a new one (the old one stops working). A saved key is saved anew; a key
    from the environment is printed once, for you to put where it came from."""
    url, key = _key_for(platform_url)
    from_env = credentials.key_from_env() is not None
    with http_to(url) as http, explained_calls(url, False):
        minted = call(http, "POST", "/v1/keys.rotate", key=key)
    if from_env:
        console.print(f"key rotated; the old one is revoked. The new key ({minted['prefix']}…), shown once:")
        print(minted["api_key"])
        return
    path = credentials.write(credentials.Credentials(platform_url=url, api_key=minted["api_key"]))
    console.print(
        f"key rotated: the new key ({minted['prefix']}…) is saved in {escape(str(path))}", soft_wrap=True
    )
