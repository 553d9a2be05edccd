"""What an operator configures about credits: the tariff runs are charged by and the packages on sale.

Read from `$YARDSTICK_BILLING_FILE`, else `billing.toml` or `billing.json` in the data directory, else the
defaults below. Amounts are exact integer units (one credit is `CREDIT_SCALE` units) or decimal credits:

    [tariff]
    episode_credits = "0.1"         # or episode_units = 6000000000
    minute_credits = 1              # or minute_units = 60000000000
    duration_rounding_sec = 30      # each episode's duration is rounded up to this; 0 prices it exactly

    [[packages]]
    id = "credits-100"
    credits = 100                   # or credit_units = 6000000000000
    amount_minor = 1000             # in the currency's minor unit: 1000 is $10.00 in usd, ¥1000 in jpy
    currency = "usd"                # lowercase ISO 4217

Everything is checked against the contract's own models when the platform starts, so a bad file stops it
with a message naming the key and the rule rather than reaching a caller as a malformed account.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from yardstick.billing.money import CREDIT_SCALE, CreditPackage, Tariff

BILLING_FILE_ENV = "YARDSTICK_BILLING_FILE"
FILE_NAMES = ("billing.toml", "billing.json")


class BillingConfigError(ValueError):
    """A billing configuration the platform cannot run with; the message names the source, key and rule."""


@dataclass(frozen=True)
class PackageTerms:
    id: str
    credit_units: int
    amount_minor: int
    currency: str


# The contract's own example rates: a sixth of a credit an episode, a credit a minute, rounded to 30 s.
DEFAULT_PACKAGES = (
    PackageTerms("credits-100", 100 * CREDIT_SCALE, 1_000, "usd"),
    PackageTerms("credits-1000", 1_000 * CREDIT_SCALE, 9_000, "usd"),
)


@dataclass(frozen=True)
class BillingTerms:
    episode_units: int = CREDIT_SCALE // 6
    minute_units: int = CREDIT_SCALE
    duration_rounding_sec: int = 30
    packages: tuple[PackageTerms, ...] = DEFAULT_PACKAGES

    def __post_init__(self) -> None:
        self.tariff()
        seen: set[str] = set()
        for position, package in enumerate(self.packages):
            if package.id in seen:
                raise BillingConfigError(f"packages[{position}].id: {package.id!r} is offered twice")
            seen.add(package.id)
            self.package(position)

    def tariff(self) -> Tariff:
        try:
            return Tariff.for_rates(
                self.episode_units, self.minute_units, duration_rounding_sec=self.duration_rounding_sec
            )
        except ValidationError as exc:
            raise BillingConfigError(f"tariff: {_problems(exc)}") from None

    def package(self, position: int) -> CreditPackage:
        terms = self.packages[position]
        try:
            return CreditPackage.model_validate(
                {
                    "id": terms.id,
                    "credit_units": terms.credit_units,
                    "amount_minor": terms.amount_minor,
                    "currency": terms.currency,
                }
            )
        except ValidationError as exc:
            raise BillingConfigError(f"packages[{position}]: {_problems(exc)}") from None

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> BillingTerms:
        _only(data, {"tariff", "packages"}, "")
        tariff = data.get("tariff", {})
        if not isinstance(tariff, dict):
            raise BillingConfigError("tariff: must be a table of rates")
        rates = {
            "episode_units",
            "episode_credits",
            "minute_units",
            "minute_credits",
            "duration_rounding_sec",
        }
        _only(tariff, rates, "tariff.")
        defaults = cls()
        rounding = tariff.get("duration_rounding_sec", defaults.duration_rounding_sec)
        if type(rounding) is not int:
            raise BillingConfigError(
                f"tariff.duration_rounding_sec: {rounding!r} is not a whole number of seconds"
            )
        packages = data.get("packages")
        if packages is not None and not isinstance(packages, list):
            raise BillingConfigError("packages: must be a list of packages")
        return cls(
            episode_units=_units(tariff, "episode", "tariff.", defaults.episode_units),
            minute_units=_units(tariff, "minute", "tariff.", defaults.minute_units),
            duration_rounding_sec=rounding,
            packages=defaults.packages
            if packages is None
            else tuple(_package(entry, f"packages[{i}].") for i, entry in enumerate(packages)),
        )

    @classmethod
    def from_file(cls, path: Path) -> BillingTerms:
        try:
            text = path.read_text()
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, ValueError) as exc:
            raise BillingConfigError(f"{path}: {exc}") from None
        if not isinstance(data, dict):
            raise BillingConfigError(f"{path}: must hold a table (tariff, packages)")
        try:
            return cls.from_mapping(data)
        except BillingConfigError as exc:
            raise BillingConfigError(f"{path}: {exc}") from None

    @classmethod
    def locate(cls, data_dir: Path) -> BillingTerms:
        """The file `$YARDSTICK_BILLING_FILE` names, else the first of `FILE_NAMES` in `data_dir`, else the
        defaults."""
        named = os.environ.get(BILLING_FILE_ENV)
        if named:
            return cls.from_file(Path(named).expanduser())
        for name in FILE_NAMES:
            if (data_dir / name).is_file():
                return cls.from_file(data_dir / name)
        return cls()


def credits(units: int) -> str:
    """Units as credits for a person: exact where the decimal ends (1.5), else to six places (~0.166667)."""
    amount = Decimal(units) / CREDIT_SCALE
    exact = format(amount.normalize(), "f")
    return exact if len(exact.partition(".")[2]) <= 11 else f"~{amount:.6f}"


def credits_value(units: int) -> float:
    """Units as a number of credits, for a contract that carries amounts as floats."""
    return units / CREDIT_SCALE


def parse_credits(text: str, field: str = "amount") -> int:
    """Units from `2.5` (credits) or `150000000000u` (integer units); a credit amount must come to whole
    units."""
    raw = text.strip()
    if raw.endswith("u"):
        try:
            return int(raw[:-1])
        except ValueError:
            raise BillingConfigError(f"{field}: {text!r} is not a whole number of units") from None
    return _credit_units(raw, field)


def _credit_units(value: object, field: str) -> int:
    if isinstance(value, bool):
        raise BillingConfigError(f"{field}: {value!r} is not a number of credits")
    try:
        exact = Decimal(str(value)) * CREDIT_SCALE
    except InvalidOperation:
        raise BillingConfigError(f"{field}: {value!r} is not a number of credits") from None
    if not exact.is_finite() or exact != exact.to_integral_value():
        raise BillingConfigError(f"{field}: {value!r} credits is not a whole number of units")
    return int(exact)


def _units(table: dict[str, Any], name: str, prefix: str, default: int) -> int:
    units, credits = table.get(f"{name}_units"), table.get(f"{name}_credits")
    if units is not None and credits is not None:
        raise BillingConfigError(f"{prefix}{name}_units, {prefix}{name}_credits: state one of the two")
    if credits is not None:
        return _credit_units(credits, f"{prefix}{name}_credits")
    if units is None:
        return default
    if type(units) is not int:
        raise BillingConfigError(f"{prefix}{name}_units: {units!r} is not a whole number of units")
    return units


def _package(entry: object, prefix: str) -> PackageTerms:
    if not isinstance(entry, dict):
        raise BillingConfigError(f"{prefix[:-1]}: must be a table (id, credits, amount_minor, currency)")
    _only(entry, {"id", "credits", "credit_units", "amount_minor", "currency"}, prefix)
    for key in ("id", "amount_minor", "currency"):
        if key not in entry:
            raise BillingConfigError(f"{prefix}{key}: required")
    if ("credits" in entry) == ("credit_units" in entry):
        raise BillingConfigError(f"{prefix}credits, {prefix}credit_units: state one of the two")
    units = entry.get("credit_units")
    if units is not None and type(units) is not int:
        raise BillingConfigError(f"{prefix}credit_units: {units!r} is not a whole number of units")
    return PackageTerms(
        id=str(entry["id"]),
        credit_units=units if units is not None else _credit_units(entry["credits"], f"{prefix}credits"),
        amount_minor=entry["amount_minor"],
        currency=entry["currency"],
    )


def _only(table: dict[str, Any], known: set[str], prefix: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise BillingConfigError(f"{prefix}{unknown[0]}: not a setting (known: {', '.join(sorted(known))})")


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'value'}: {error['msg']}" for error in exc.errors()
    )
