"""An image endpoint at submission: its tag pinned to the digest it names now, its credential sealed for the
worker's pull, before the run is filed (`core.registries` asks the registry).

What cannot be pulled is the caller's fault, as the contract says: the submission is still filed, so it is
counted and charged, and comes back `errored` with `image_unpullable` or `image_too_large` and the reason,
before any episode is played. The credential is used for the registry's answer and sealed with the
install's secret; the request a run keeps is the client's, whose credential shows its password masked.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from platform_client.eval_plan import EvalPlan

from yardstick.core.platform import Platform
from yardstick.core.registries import ImageRefused
from yardstick.core.runs import RunPlan
from yardstick.engine.failures import FailureKind
from yardstick.store.states import TargetKind

__all__ = ["Pinning", "pin_images"]


@dataclass(frozen=True)
class Pinning:
    """The run plan with its images pinned, the digest a one-image run reports (`policy_image_digest`), or
    why an image cannot be played (`refused`, with its kind)."""

    plan: RunPlan
    digest: str | None = None
    refused: tuple[FailureKind, str] | None = None


def pin_images(plat: Platform, run_plan: RunPlan, plan: EvalPlan) -> Pinning:
    credentials = {
        entry.name: entry.image_credential
        for entry in plan.endpoints
        if entry.image is not None and entry.image_credential is not None
    }
    endpoints = dict(run_plan.endpoints)
    digests: list[str] = []
    for name, target in run_plan.endpoints.items():
        if target.kind != TargetKind.IMAGE or target.spec is None:
            continue
        credential = credentials.get(name)
        pair = None
        if credential is not None:
            pair = (credential.username, credential.password.get_secret_value())
        try:
            pinned = plat.registries.pin(target.spec, pair)
        except ImageRefused as refused:
            kind = FailureKind.IMAGE_TOO_LARGE if refused.too_large else FailureKind.IMAGE_UNPULLABLE
            return Pinning(run_plan, refused=(kind, f"endpoint {name!r}: {refused}"))
        sealed = plat.secrets.seal({"username": pair[0], "password": pair[1]}) if pair is not None else None
        endpoints[name] = dataclasses.replace(target, spec=pinned.reference, credential=sealed)
        digests.append(pinned.digest)
    return Pinning(
        dataclasses.replace(run_plan, endpoints=endpoints), digest=digests[0] if len(digests) == 1 else None
    )
