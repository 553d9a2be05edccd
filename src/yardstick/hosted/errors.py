"""How hosting someone's code says no: each refusal names the field and the rule it breaks."""

from __future__ import annotations


class Refused(ValueError):
    """Input that cannot be hosted as it is: `field` names what is wrong, the message says the rule. The
    caller's fault; nothing was changed."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class BundleRefused(Refused):
    """A code bundle that is not a safe, well-formed gzip tar of at most the allowed size."""


class ImageRefused(Refused):
    """An image declaration Yardstick cannot honour yet."""


class SandboxUnavailable(RuntimeError):
    """This machine cannot box untrusted code (bubblewrap is missing or cannot make its namespaces)."""
