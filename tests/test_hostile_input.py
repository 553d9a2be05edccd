"""Bad input, sent as a hostile caller would, is a 4xx in the envelope naming the field and the rule, and
changes nothing — the same on SQLite and PostgreSQL: values the contract's models refuse (validators that
raise TypeError included), text no column can hold (NUL, an unpaired surrogate, past the column's length),
plans past the platform's limits, bodies past the size limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from conftest import fresh_database
from deadlines import patience
from platform_harness import Harness, running_platform
from yardstick.core import limits
from yardstick.store.models import RunEpisode


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def platform(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    folder = tmp_path_factory.mktemp(request.param)
    with fresh_database(request.param, folder) as url, running_platform(folder, url, workers=0) as harness:
        yield harness


def _auth(platform: Harness, login: str = "alice") -> dict[str, str]:
    return {"Authorization": f"Bearer {platform.keys[login]}"}


def _plan(**fields: Any) -> dict[str, Any]:
    return {
        "request_type": {"type": "private_eval", "org": "acme"},
        "eval": "toys.tally",
        "endpoints": [{"name": "policy", "kind": "served", "wire": "websocket", "spec": "rows"}],
        "episodes_per_endpoint": 1,
        **fields,
    }


def _composed(**fields: Any) -> dict[str, Any]:
    plan = _plan(**fields)
    del plan["eval"]
    return {"rig_shape": "sim", "tasks": ["three"], **plan}


def _refused(answer: httpx.Response, status: int | None = None) -> dict[str, Any]:
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:500])
    if status is not None:
        assert answer.status_code == status, answer.text[:500]
    error: dict[str, Any] = answer.json()["error"]
    assert error["code"] and error["message"]
    return error


def _episode_rows(platform: Harness) -> int:
    with platform.platform.db.reading() as session:
        return int(session.scalar(select(func.count()).select_from(RunEpisode)) or 0)


def _submissions(platform: Harness) -> list[Any]:
    answer = httpx.get(f"{platform.url}/v1/submissions.list", headers=_auth(platform))
    assert answer.status_code == 200
    return list(answer.json()["submissions"])


@pytest.mark.parametrize("body", [{"id": None}, {}, [], True, {"id": "zz"}, {"id": [1]}])
def test_a_cancel_with_no_id_or_a_wrong_one_is_refused_not_a_server_error(
    platform: Harness, body: Any
) -> None:
    answer = httpx.post(f"{platform.url}/v1/submissions.cancel", json=body, headers=_auth(platform))
    error = _refused(answer, 422)
    assert error["code"] == "bad_request"


NUL_REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/rankings.get?board=a%00b", {}),
    ("GET", "/boards/a%00b", {"anonymous": True}),
    ("GET", "/v/a%00b/", {"anonymous": True}),
    ("GET", "/v/a%00b/data.json", {"anonymous": True}),
    ("GET", "/v1/billing.purchases.get?id=pur_%00", {}),
    ("GET", "/v1/billing.account?org=ac%00me", {}),
    ("GET", "/device?code=AB%00C", {"anonymous": True, "page": True}),  # first, the sign-in page
    ("GET", "/checkout/pur_%00", {"anonymous": True}),
    ("POST", "/v1/keys.revoke", {"json": {"prefix": "ys_\u0000"}}),
    ("POST", "/v1/keys.create", {"json": {"credential": "a\u0000b"}, "anonymous": True}),
    ("POST", "/oauth/device/code", {"form": "client_id=a%00b"}),
    (
        "POST",
        "/oauth/token",
        {
            "form": "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code"
            "&device_code=a%00&client_id=x"
        },
    ),
    ("POST", "/v1/submissions.create", {"json": _plan(alias="a\u0000b")}),
    ("POST", "/v1/submissions.create", {"json": _plan(transaction_key="k\u0000")}),
    ("POST", "/v1/submissions.create", {"raw": json.dumps(_plan(alias="x")).replace('"x"', '"\\ud800"')}),
    (
        "POST",
        "/v1/billing.purchases.create",
        {"json": {"org": "acme", "package_id": "credits-100", "transaction_key": "t\u0000"}},
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "how"), NUL_REQUESTS, ids=[f"{m} {p}" for m, p, _ in NUL_REQUESTS]
)
def test_text_no_column_can_hold_is_refused_by_rule_on_both_databases(
    platform: Harness, method: str, path: str, how: dict[str, Any]
) -> None:
    headers = {} if how.get("anonymous") else _auth(platform)
    content: str | None = how.get("raw")
    if "form" in how:
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        content = how["form"]
    elif content is not None:
        headers["Content-Type"] = "application/json"
    answer = httpx.request(
        method, platform.url + path, headers=headers, json=how.get("json"), content=content
    )
    assert answer.status_code < 500, answer.text[:500]
    assert answer.status_code >= 400 or how.get("page")
    assert _submissions(platform) == []


def test_a_text_over_its_columns_length_is_refused_the_same_on_both_databases(platform: Harness) -> None:
    long = "a" * (limits.ALIAS_CHARS + 1)
    for plan, field in ((_plan(alias=long), "alias"), (_plan(transaction_key=long), "transaction_key")):
        for route in ("submissions.resolve", "submissions.create"):
            answer = httpx.post(f"{platform.url}/v1/{route}", json=plan, headers=_auth(platform))
            error = _refused(answer, 400)
            assert error["details"]["errors"] == [
                {"field": field, "rule": f"text of at most {limits.ALIAS_CHARS} characters, not {len(long)}"}
            ]
    label = "l" * (limits.KEY_LABEL_CHARS + 1)
    device = httpx.post(f"{platform.url}/oauth/device/code", data={"client_id": label})
    assert 400 <= device.status_code < 500
    assert _submissions(platform) == []
    # At the limit, it is stored and read back whole.
    fits = _plan(alias="a" * limits.ALIAS_CHARS, transaction_key="k" * limits.TRANSACTION_KEY_CHARS)
    created = httpx.post(f"{platform.url}/v1/submissions.create", json=fits, headers=_auth(platform))
    assert created.status_code == 200, created.text[:300]
    [row] = _submissions(platform)
    assert row["alias"] == fits["alias"]
    cancelled = httpx.post(
        f"{platform.url}/v1/submissions.cancel", json={"id": row["id"]}, headers=_auth(platform)
    )
    assert cancelled.status_code == 200
    _forget_runs(platform)


def _forget_runs(platform: Harness) -> None:
    """Drop the runs a test filed, so the next test on this platform starts from none."""
    from sqlalchemy import delete

    from yardstick.store.models import QuotaEvent, Run

    with platform.platform.db.writing() as session:
        session.execute(delete(QuotaEvent))
        session.execute(delete(Run))


def test_a_body_past_the_limit_is_a_413_before_it_is_parsed(platform: Harness) -> None:
    huge = _plan(alias="a" * (10 * 1024 * 1024))
    for route in ("/v1/submissions.create", "/v1/no-such-route", "/oauth/device/code"):
        answer = httpx.post(platform.url + route, json=huge, headers=_auth(platform))
        error = _refused(answer, 413)
        assert error["details"]["errors"] == [
            {"field": "body", "rule": f"at most {limits.BODY_BYTES:,} bytes"}
        ]

    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b" " * 100_000  # JSON whitespace: 2 MB of it, sent without a length

    chunked = httpx.post(
        f"{platform.url}/v1/submissions.create",
        content=chunks(),
        headers={**_auth(platform), "Content-Type": "application/json"},
    )
    _refused(chunked, 413)
    assert _submissions(platform) == []


PAST_LIMITS: list[tuple[dict[str, Any], str]] = [
    (_composed(episodes_per_endpoint=10**6), "episodes_per_endpoint"),
    (_composed(episodes_per_endpoint=10**9), "episodes_per_endpoint"),
    (_composed(episodes_per_endpoint=2**63), "episodes_per_endpoint"),
    (_plan(episodes_per_endpoint=2**63 + 5), "episodes_per_endpoint"),
    (_composed(episodes_per_endpoint=6_000, tasks=["three", "ten"]), "episodes_per_endpoint"),
    (_composed(tasks=["three"] * 10_000), "tasks"),
    (_composed(cap_per_episode_sec=10**9), "cap_per_episode_sec"),
    (_composed(tasks=[{"task_id": "three", "cap_per_episode_sec": 10**9}]), "tasks[0].cap_per_episode_sec"),
    (
        _composed(
            endpoints=[
                {"name": f"p{k}", "kind": "served", "wire": "websocket", "spec": "rows"} for k in range(40)
            ]
        ),
        "endpoints",
    ),
]


@pytest.mark.parametrize(("plan", "field"), PAST_LIMITS, ids=[f for _, f in PAST_LIMITS])
def test_a_plan_past_the_limits_is_refused_quickly_naming_the_field_and_the_rule(
    platform: Harness, plan: dict[str, Any], field: str
) -> None:
    rows_before = _episode_rows(platform)
    for route in ("submissions.resolve", "submissions.create"):
        # Counted, never expanded: a plan of 10**9 episodes expanded would not answer within the deadline,
        # and would leave rows behind.
        answer = httpx.post(
            f"{platform.url}/v1/{route}", json=plan, headers=_auth(platform), timeout=patience(30)
        )
        error = _refused(answer, 400)
        fields = [problem["field"] for problem in error["details"]["errors"]]
        assert field in fields, error
        assert "at most" in error["message"]
    assert _submissions(platform) == []
    assert _episode_rows(platform) == rows_before


def test_a_plan_at_the_limits_resolves(platform: Harness) -> None:
    plan = _composed(episodes_per_endpoint=limits.EPISODES_PER_PLAN // 2, tasks=["three", "ten"])
    answer = httpx.post(f"{platform.url}/v1/submissions.resolve", json=plan, headers=_auth(platform))
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["episodes_total"] == limits.EPISODES_PER_PLAN
