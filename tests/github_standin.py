"""A stand-in for GitHub at the network's edge: its device flow (`github.com/login/...`) and its API
(`api.github.com/user`) over HTTPS with a certificate from a `trustme` CA, reached through a CONNECT proxy.

A process that is handed `HTTPS_PROXY` (the proxy) and `SSL_CERT_FILE` (the CA) reaches this for
`https://github.com` and `https://api.github.com` exactly as it would reach GitHub: the URLs, the TLS and the
proxy are its own settings, so nothing of the process under test is bent to the test. The proxy records every
host it is asked for, so a test can tell that only GitHub went through it.
"""

from __future__ import annotations

import secrets
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import trustme

from json_answers import JsonHandler

GITHUB_HOSTS = ("github.com", "api.github.com")
# What the stand-in tells the device to wait between polls: the client honours it, so the test is quick.
POLL_INTERVAL_S = 0.1


@dataclass
class GitHubStandIn:
    """One account; a device code is approved as soon as it is issued (the person at the browser is not
    what these tests are about), and its first poll is answered `authorization_pending` as GitHub does."""

    login: str = "ada"
    account_id: int = 4242
    client_ids: list[str] = field(default_factory=list)  # the OAuth app each device-code request named
    tokens: set[str] = field(default_factory=set)
    polls: int = 0
    tunnelled: list[str] = field(default_factory=list)  # host:port of every CONNECT the proxy took
    proxy_url: str = ""
    ca_file: Path = Path()

    def env(self) -> dict[str, str]:
        """What a process sets to reach GitHub through the proxy and trust the stand-in's certificate."""
        return {
            "HTTPS_PROXY": self.proxy_url,
            "https_proxy": self.proxy_url,
            "SSL_CERT_FILE": str(self.ca_file),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }


def _github_handler(stand_in: GitHubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _form(self) -> dict[str, str]:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
            return {key: values[0] for key, values in parse_qs(raw).items()}

        def do_POST(self) -> None:
            host = self.headers.get("Host", "").split(":")[0]
            form = self._form()
            if host == "github.com" and self.path == "/login/device/code":
                stand_in.client_ids.append(form.get("client_id", ""))
                self._answer(
                    200,
                    {
                        "device_code": "device-" + secrets.token_hex(8),
                        "user_code": "WDJB-MJHT",
                        "verification_uri": "https://github.com/login/device",
                        "expires_in": 900,
                        "interval": POLL_INTERVAL_S,
                    },
                )
            elif host == "github.com" and self.path == "/login/oauth/access_token":
                stand_in.polls += 1
                if stand_in.polls == 1:
                    self._answer(200, {"error": "authorization_pending"})
                    return
                token = "gho_" + secrets.token_hex(16)
                stand_in.tokens.add(token)
                self._answer(
                    200, {"access_token": token, "token_type": "bearer", "scope": "read:user,user:email"}
                )
            else:
                self._answer(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            host = self.headers.get("Host", "").split(":")[0]
            token = self.headers.get("Authorization", "").split(" ")[-1]
            if host == "api.github.com" and self.path == "/user" and token in stand_in.tokens:
                body = {
                    "id": stand_in.account_id,
                    "login": stand_in.login,
                    "name": "Ada L.",
                    "email": "ada@x.org",
                }
                self._answer(200, body)
            else:
                self._answer(401, {"message": "Bad credentials"})

    return Handler


def _proxy_handler(stand_in: GitHubStandIn, github_port: int) -> type[BaseHTTPRequestHandler]:
    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_CONNECT(self) -> None:
            stand_in.tunnelled.append(self.path)
            host = self.path.rsplit(":", 1)[0]
            if host not in GITHUB_HOSTS:
                self.send_error(502, "this proxy reaches GitHub only")
                return
            upstream = socket.create_connection(("127.0.0.1", github_port))
            self.send_response(200, "Connection established")
            self.end_headers()
            sockets = [self.connection, upstream]
            try:
                while True:
                    readable, _, _ = select.select(sockets, [], [], 30)
                    if not readable:
                        return
                    for sock in readable:
                        data = sock.recv(65536)
                        if not data:
                            return
                        (upstream if sock is self.connection else self.connection).sendall(data)
            finally:
                upstream.close()

    return Proxy


@contextmanager
def github_stand_in(folder: Path) -> Iterator[GitHubStandIn]:
    """The stand-in and its proxy, running on loopback until the block ends."""
    ca = trustme.CA()
    stand_in = GitHubStandIn(ca_file=folder / "github-ca.pem")
    ca.cert_pem.write_to_path(str(stand_in.ca_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*GITHUB_HOSTS).configure_cert(context)
    github = ThreadingHTTPServer(("127.0.0.1", 0), _github_handler(stand_in))
    github.socket = context.wrap_socket(github.socket, server_side=True)
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(stand_in, github.server_address[1]))
    stand_in.proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
    servers = (github, proxy)
    threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in servers]
    for thread in threads:
        thread.start()
    try:
        yield stand_in
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
