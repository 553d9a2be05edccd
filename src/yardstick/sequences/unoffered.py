"""What the Sequences contract describes and this install does not serve, each refused by name and why.

A request on one of the contract's paths that no route of ours takes used to answer the framework's bare
`404 Not Found`, which the SDK prints as `error[not_found]: Not Found` (exit 4): "your thing does not
exist", when the truth is "Yardstick has no such service". `refusal(method, path)` finds the feature a
path belongs to and refuses it with the contract's `dependency_missing` code (424, not retryable, the CLI's
exit 1), the detail naming the feature and the reason, `details` carrying `feature` and `reason`
(for a program).

One keeps `not_found` on purpose, because the SDK reads a 404 there as "this platform has none" and goes
on: a deployment's `fleet` (the dry run's price then has no measured capacity). Its detail still says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from yardstick.core.refusals import Feature, Refusal, RefusalKind
from yardstick.sequences import paths

__all__ = ["TABLE", "Unoffered", "refusal"]

_NAME = r"[^/]+"


@dataclass(frozen=True)
class Unoffered:
    """One feature of the contract this install does not serve: the paths that reach it, and why."""

    feature: str
    why: str
    patterns: tuple[str, ...]
    # The SDK reads a 404 on these paths as "none here" and carries on; any other answer would break it.
    kind: RefusalKind = RefusalKind.NOT_OFFERED

    def matches(self, path: str) -> bool:
        return any(re.fullmatch(f"{paths.API}/{pattern}", path) for pattern in self.patterns)


TABLE: tuple[Unoffered, ...] = (
    Unoffered(
        "VLM models (seq models, chat, decide)",
        "this install runs no model service: a policy brings its own model in its code or its weights volume",
        ("models(/.*)?", "chat", "decide"),
    ),
    Unoffered(
        "promoting a dev policy to production (seq prod promote)",
        "this install keeps no dev and production policies apart: every deployment is evaluated alike",
        (f"deployments/{_NAME}/promote",),
    ),
    Unoffered(
        "a deployment's diagnostics (seq policy doctor)",
        "this install keeps no per-act diagnostics of its workers: bench/connect.py times their acts",
        (f"deployments/{_NAME}/diagnostics",),
    ),
    Unoffered(
        "a deployment's serving fleet",
        "this install measures no GPU fleet: a deployment is played by the install's CPU workers",
        (f"deployments/{_NAME}/fleet",),
        kind=RefusalKind.NOT_FOUND,
    ),
    Unoffered(
        "bills and a deployment's serving usage (seq account billing, a deployment's usage)",
        "this install charges credits per episode and minute of robot time, and serves a deployment only "
        "inside evals: seq usage shows what its evals were charged, seq account the balance",
        ("account/billing", f"deployments/{_NAME}/usage"),
    ),
    Unoffered(
        "upgrading from a template (seq benchmark upgrade, seq policy upgrade)",
        "this install's templates have one version each (v1), so there is no other to move to: edit the "
        "folder seq init wrote and seq deploy it",
        (f"(deployments|benchmarks)/{_NAME}/upgrade",),
    ),
    Unoffered(
        "a deployment's serving logs (seq policy logs)",
        "this install serves a deployment only inside evals: its output is in seq eval logs --side policy",
        (f"deployments/{_NAME}/logs",),
    ),
)


def refusal(method: str, path: str) -> Refusal:
    """The refusal of a request on the contract's `path` that no route serves: the feature it reaches and why,
    or, for a path of the contract's no feature here names, what is served instead of `method path`."""
    for unoffered in TABLE:
        if unoffered.matches(path):
            return Refusal(
                unoffered.kind,
                f"{unoffered.feature}: {unoffered.why}",
                feature=Feature(unoffered.feature, unoffered.why),
            )
    return Refusal(
        RefusalKind.NOT_OFFERED,
        f"{method} {path} is not a request this install serves (Yardstick serves evals, benchmarks, "
        "deployments, secrets and volumes of the Sequences contract)",
        feature=Feature(f"{method} {path}", "not served by Yardstick"),
    )
