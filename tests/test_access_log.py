"""No access log holds a credential: `yardstick server --log-level info` logs every request, and the
credentials that travel in URLs by design (a run page's token, an artifact link's signature, a device
sign-in's user code) are blanked in it."""

from __future__ import annotations

from pathlib import Path

import httpx

from platform_harness import server_process, toy_plan, wait_for
from yardstick.gateway.access_log import REDACTED, redact


def test_redact_blanks_tokens_signatures_and_codes_and_leaves_the_rest() -> None:
    assert redact("/v/AbC-12_x/data.json") == f"/v/{REDACTED}/data.json"
    assert redact("/v1/artifacts/1f/result.json?expires=99&sig=abcdef") == (
        f"/v1/artifacts/1f/result.json?expires=99&sig={REDACTED}"
    )
    assert redact("/device?code=KQWT-MHXR") == f"/device?code={REDACTED}"
    assert redact("/v1/submissions.get?id=1f") == "/v1/submissions.get?id=1f"


def test_the_servers_access_log_holds_no_replay_token_signature_or_user_code(tmp_path: Path) -> None:
    with server_process(tmp_path, None, extra=("--log-level", "info")) as served:
        served.start()
        alice = served.client()
        view = wait_for(alice, alice.create_submission(toy_plan("logged", episodes=1)).submission_id)
        assert view.status.name == "finished"
        page = view.replay.url
        token = page.rstrip("/").rsplit("/", 1)[1]
        signature = view.artifacts.result.split("sig=")[1]
        assert httpx.get(page).status_code == 200
        assert httpx.get(page + "data.json").status_code == 200
        assert httpx.get(view.artifacts.result).status_code == 200
        started = httpx.post(f"{served.url}/oauth/device/code", data={"client_id": "cli"}).json()
        httpx.get(started["verification_uri_complete"])
        assert served.stop() == 0
        log = served.log.read_text()
        assert '"GET /v/' in log and "GET /v1/artifacts/" in log and "GET /device?code=" in log
        for secret in (token, signature, started["user_code"], started["device_code"]):
            assert secret not in log
