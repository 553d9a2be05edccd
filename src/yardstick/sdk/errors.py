"""The refusals of authoring: each names what is wrong and the rule it breaks."""

from __future__ import annotations


class AuthoringError(ValueError):
    """A benchmark or policy that cannot be used as written. The caller's fault."""


class InstallIncomplete(AuthoringError):
    """Something this install lacks (a simulator a built-in needs). Fixing it is the user's in a local run,
    and the platform's when a platform's worker lacks it."""


class SpecError(AuthoringError):
    """A declaration that breaks a rule: `field` names what is wrong, the message says the rule."""

    def __init__(self, owner: str, field: str, rule: str) -> None:
        self.owner = owner
        self.field = field
        self.rule = rule
        super().__init__(f"{owner}: {field}: {rule}")


class ConstructError(AuthoringError):
    """Constructor arguments that cannot be filled in (a config file, a form, a factory)."""


class LoadError(AuthoringError):
    """A reference ("package.module:Class" or "path/to/file.py:Class") that names nothing loadable."""
