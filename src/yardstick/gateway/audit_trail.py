"""The audit trail: every change a door accepted, written to the install's audit log (`core.audit`) as its
answer starts, so a caller told of a change finds it in the log (one insert, after the change is made).

A change is a request that writes (POST, PUT, PATCH, DELETE), answered below 400, by a caller with a key
(`http.auth` leaves the caller on the request). A check that changes nothing (`/validate`, an eval's dry
run) is left out, as is a robot's traffic on the act plane (connect, keepalive, release), and so are the
signed upload targets, which carry no key. Each is named by `ACTIONS`
(the Sequences door's changes, as `seq audit` reads them), the Positronic door's by their calls' names
(`submissions.create`), anything else by its method and route. The key is kept as its last four
characters, as the SDK shows keys.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from platform_client import routes
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yardstick.core.accounts import Caller
from yardstick.core.audit import Audit, Change
from yardstick.sequences import paths

log = logging.getLogger("yardstick.audit")

WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
ACTIONS: Final[dict[tuple[str, str], str]] = {
    ("POST", paths.EVALS): "eval.run",
    ("POST", paths.EVAL_CANCEL): "eval.cancel",
    ("POST", paths.BENCHMARKS): "benchmark.register",
    ("DELETE", paths.BENCHMARK): "benchmark.delete",
    ("POST", paths.BENCHMARK_CANCEL): "benchmark.cancel",
    ("POST", paths.DEPLOYMENTS): "deployment.deploy",
    ("DELETE", paths.DEPLOYMENT): "deployment.delete",
    ("POST", paths.DEPLOYMENT_STOP): "deployment.stop",
    ("POST", paths.DEPLOYMENT_START): "deployment.start",
    ("PATCH", paths.DEPLOYMENT_SETTINGS): "deployment.settings",
    ("PUT", paths.DEPLOYMENT_SETTINGS): "deployment.settings",
    ("POST", paths.SECRETS): "secret.set",
    ("DELETE", paths.SECRET): "secret.delete",
    ("POST", paths.VOLUME_UPLOADS): "volume.upload",
    ("POST", paths.VOLUME_UPLOAD_COMMIT): "volume.commit",
    ("DELETE", paths.VOLUME): "volume.delete",
    ("POST", paths.DEPLOYMENT_ROLLBACK): "deployment.rollback",
    ("POST", paths.DEPLOYMENT_RENAME): "deployment.rename",
    ("POST", paths.DEPLOYMENT_FORK): "deployment.fork",
    ("POST", paths.version_freeze("deployments")): "deployment.freeze",
    ("POST", paths.version_freeze("benchmarks")): "benchmark.freeze",
    ("POST", paths.DEPLOYMENT_ROBOTS): "robot.add",
    ("DELETE", paths.ROBOT): "robot.revoke",
    ("POST", paths.DEPLOYMENT_LABEL): "episode.label",
}
# Checks that change nothing (a registration validated, a Positronic plan resolved), and a robot's own
# traffic on the act plane (a seat taken, kept every few seconds, given back; its timings), which is no
# change to the account.
UNCHANGED: Final = frozenset(
    {
        paths.BENCHMARKS_VALIDATE,
        paths.DEPLOYMENTS_VALIDATE,
        routes.SUBMISSIONS_RESOLVE,
        paths.ACT_CONNECT,
        paths.ACT_KEEPALIVE,
        paths.ACT_RELEASE,
        paths.LATENCY,
    }
)
KEY_SHOWN: Final = 4


class AuditTrail:
    """ASGI middleware: as a change's answer starts, one `AuditEvent` for it."""

    def __init__(self, app: ASGIApp, audit: Audit) -> None:
        self.app = app
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES:
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Written before the caller hears the answer: a change it was told of is in the log.
                await self._record(_change(scope, int(message["status"])))
            await send(message)

        await self.app(scope, receive, sending)

    async def _record(self, change: Change | None) -> None:
        if change is None:
            return
        try:
            await run_in_threadpool(self.audit.record, change)
        except Exception:  # the change stands: a log that cannot be written is the operator's to see
            log.exception("the audit log could not record %s %s", change.method, change.path)


def _change(scope: Scope, status: int) -> Change | None:
    state: dict[str, Any] = scope.get("state") or {}
    caller: Caller | None = state.get("yardstick_caller")
    route = getattr(scope.get("route"), "path", None)
    if caller is None or status >= 400 or state.get("yardstick_unaudited") or route in UNCHANGED:
        return None
    method, path = scope["method"], scope["path"]
    template = route or path
    door = "sequences" if paths.ours(path) else "positronic" if path.startswith(paths.API + "/") else "web"
    # The Positronic door's routes are named as calls already (`/v1/submissions.create`).
    last = template.rsplit("/", 1)[-1]
    named = last if door == "positronic" and "." in last else f"{method.lower()} {template}"
    params: dict[str, Any] = scope.get("path_params") or {}
    key = str(state.get("yardstick_key") or "")
    return Change(
        org_id=caller.orgs[0].id if caller.orgs else None,
        user_id=caller.user_id,
        actor=caller.login,
        actor_key=f"…{key[-KEY_SHOWN:]}" if key else None,
        door=door,
        action=ACTIONS.get((method, template)) or named,
        target=state.get("yardstick_target") or (str(next(iter(params.values()))) if params else None),
        method=method,
        path=path,
        status=status,
    )
