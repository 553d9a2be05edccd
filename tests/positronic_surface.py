"""The whole surface of the installed `positronic-platform-client`, driven as its users drive it: run by the
Python of a venv that holds one client version (`.venv-positronic-<version>`), against a running server.

    python positronic_surface.py URL API_KEY PLAN_JSON SLOW_PLAN_JSON

PLAN_JSON is run to its end; SLOW_PLAN_JSON, a plan that plays for a while, is filed and cancelled.

Every call is made with the client's own methods, and its outcome written as one JSON object on stdout:
`{"call": ..., "ok": bool, "code": error code or null, "said": a few facts, "platform_version": the header of
every answer the call read}`. The test that runs it asserts on those lines; this script asserts nothing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
from platform_client.client import PlatformClient
from platform_client.errors import PlatformError
from platform_client.eval_plan import EvalPlan
from platform_client.ids import OrgSlug
from platform_client.requests import CancelRequest, RegisterRequest

from deadlines import give_up_at

HEADER = "X-Positronic-Platform-Version"


def main(url: str, api_key: str, plan_json: str, slow_plan_json: str) -> None:
    seen: list[str | None] = []

    def note(response: httpx.Response) -> None:
        seen.append(response.headers.get(HEADER))

    client = PlatformClient(url, api_key=api_key)  # type: ignore[arg-type]
    # Built as a user builds it; only a hook added, to read what each answer names.
    client._client.event_hooks["response"].append(note)

    def call(name: str, fn: Callable[[], Any], said: Callable[[Any], Any] = lambda _: None) -> Any:
        seen.clear()
        row: dict[str, Any] = {"call": name}
        try:
            value = fn()
        except PlatformError as exc:
            row |= {"ok": False, "code": exc.code.name if exc.code else None, "message": exc.message}
            value = None
        else:
            row |= {"ok": True, "code": None, "said": said(value)}
        row["platform_version"] = list(seen)
        print(json.dumps(row), flush=True)
        return value

    call("auth.config", client.auth_config, lambda c: {"github": c.github_registration is not None})
    call("users.me", client.me, lambda me: {"tenant": me.tenant, "orgs": list(me.organizations)})
    call("catalog.evals", client.catalog_evals, lambda e: sorted(str(ev.id) for ev in e.evals))
    call(
        "catalog.tasks",
        client.catalog_tasks,
        lambda t: [
            {"id": str(task.id), "embodiments": [s.name for s in getattr(task, "embodiments", [])]}
            | ({"embodiment": task.embodiment} if hasattr(task, "embodiment") else {})
            for task in t.tasks
        ],
    )
    plan = EvalPlan.model_validate_json(plan_json)
    resolved = call("submissions.resolve", lambda: client.resolve_plan(plan), lambda r: r.episodes_total)
    created = call(
        "submissions.create", lambda: client.create_submission(plan), lambda c: str(c.submission_id)
    )
    again = call(
        "submissions.create again", lambda: client.create_submission(plan), lambda c: str(c.submission_id)
    )
    del resolved, again
    deadline = give_up_at(240)
    view = None
    while created is not None and time.monotonic() < deadline:
        view = call(
            "submissions.get",
            lambda: client.get_submission(created.submission_id),
            lambda v: {
                "status": v.status.name,
                "primary": getattr(getattr(v, "scores", None), "primary", None),
            },
        )
        if view is None or view.status.name in ("finished", "errored", "cancelled"):
            break
        time.sleep(0.5)
    call(
        "submissions.list",
        lambda: client.list_submissions(limit=50),
        lambda page: [str(s.id) for s in page.submissions],
    )
    if created is not None:
        artifacts = call(
            "submissions.artifacts",
            lambda: client.list_artifacts(created.submission_id),
            lambda page: [a.key for a in page.artifacts],
        )
        if artifacts is not None:
            signed = next(a.url for a in artifacts.artifacts if a.key == "result.json")
            answer = httpx.get(signed, timeout=60)
            ok = answer.status_code == 200
            row = {
                "call": "signed url",
                "ok": ok,
                "code": None,
                "said": answer.json()["scores"]["primary"] if ok else None,
            }
            print(json.dumps(row | {"platform_version": [answer.headers.get(HEADER)]}), flush=True)
    boards = call("rankings.list", client.list_boards, lambda b: [str(board.board) for board in b.boards])
    if boards is not None and boards.boards:
        call(
            "rankings.get",
            lambda: client.rankings(board=boards.boards[0].board),
            lambda r: len(r.rankings),
        )
    call("billing.account", lambda: client.billing_account(OrgSlug("acme")), lambda a: str(a.mode))
    call("billing.purchases.list", lambda: client.list_purchases(OrgSlug("acme")), lambda p: len(p.purchases))
    call(
        "users.register",
        lambda: client.register(RegisterRequest(credential="not-a-token")),
    )
    if created is not None:
        call(
            "submissions.cancel ended",
            lambda: client.cancel_submission(CancelRequest(id=created.submission_id)),
            lambda c: c.status.name,
        )
    slow = client.create_submission(EvalPlan.model_validate_json(slow_plan_json))
    call(
        "submissions.cancel",
        lambda: client.cancel_submission(CancelRequest(id=slow.submission_id)),
        lambda c: {"status": c.status.name, "refunded": c.refunded, "id": str(slow.submission_id)},
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
