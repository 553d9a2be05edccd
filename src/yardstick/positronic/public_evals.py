"""The contract's public evals whose simulator this platform does not run: listed, and refused by name.

`positronic-evals` defines the public evals every Positronic platform offers. Those on ABC's bimanual YAM
simulator (`abc.yam_bimanual`, `abc.yam_bimanual_multitask`) need positronic's ABC backend, which is not
installable here. A caller reading `catalog.evals` still sees them, so a plan naming one is answered with
why it cannot run here (`eval_unavailable`, the contract's word for an eval that exists but takes no
submission) rather than with "no such eval".
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from platform_client.catalog import EvalSummary
from positronic_evals.evals import ABC_CONFIG, PUBLIC_EVALS, EvalDefinition, EvalRef, public_eval

from yardstick.core.refusals import Refusal, RefusalKind

# What each public eval's config runs on, for the configs whose simulator this platform lacks.
_MISSING_SIMULATORS = MappingProxyType({ABC_CONFIG: f"ABC's simulator (positronic's `{ABC_CONFIG}`)"})
# The embodiment a simulated eval names, as the platform's own simulated evals do.
SIMULATED = "sim"

UNHOSTED: Mapping[str, EvalDefinition] = MappingProxyType(
    {
        str(name): definition
        for name in PUBLIC_EVALS
        if (definition := public_eval(name)).config in _MISSING_SIMULATORS
    }
)


def unhosted_summaries() -> list[EvalSummary]:
    """`catalog.evals`' entries for the public evals that cannot run here, each saying so."""
    return [
        EvalSummary(
            id=EvalRef(name),
            embodiment=SIMULATED,
            tasks=[task.name for task in definition.tasks],
            composable=False,
            primary_metric=definition.scoring.primary.kind,
            description=(
                f"A public Positronic eval: {len(definition.tasks)} tasks, "
                f"{len(definition.tasks[0].trials)} scenes each, "
                f"on {_MISSING_SIMULATORS[definition.config]}, "
                "which is not installed on this platform: a plan naming it is refused (eval_unavailable)."
            ),
        )
        for name, definition in UNHOSTED.items()
    ]


def refuse_unhosted(slug: str) -> None:
    """`eval_unavailable` naming the eval and its missing simulator, where `slug` is such an eval."""
    definition = UNHOSTED.get(slug)
    if definition is not None:
        raise Refusal(
            RefusalKind.EVAL_UNAVAILABLE,
            f"eval {slug!r} runs on {_MISSING_SIMULATORS[definition.config]}, which is not installed on "
            "this platform, so no run of it can start here; name an eval this platform runs "
            "(catalog.evals lists them; those it cannot run say so)",
        )
