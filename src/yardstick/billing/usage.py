"""An org's usage statement: what its runs that ended in a window played, and what that costs under a tariff.

A `packaged` org holds no credits ("invoiced by its configured invoice terms"), so this is what an operator
invoices it from. Each run is priced exactly as `billing.settle` would charge a pay-as-you-go run of the same
plan: the episodes that landed (done, or failed with the policy's fault), each for its robot time capped at
its episode's cap, under the quote its episodes make (`credits.quote`, `credits.charge`); a run that errored
for a failure its caller is not charged for counts zero. The statement has one shape for either billing
mode: a run that was admitted pay-as-you-go also carries what its settlement actually took from the balance
(`Reservation.charged_units`) beside the price, so a pay-as-you-go org's statement reads as its charges, and
a difference between the two columns is a tariff that changed since the run was admitted.

`usage_window`, `month_window` and `instant` read the window an operator types (UTC).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.billing import credits as billing
from yardstick.billing.money import CREDIT_SCALE, NANOSECONDS_PER_SECOND, Tariff
from yardstick.core.ledger import PricedEpisodes
from yardstick.core.lifecycle import charged as is_charged
from yardstick.engine.failures import FailureKind
from yardstick.store.models import Eval, Org, Reservation, Run, RunEpisode
from yardstick.store.states import ENDED_RUNS, RunStatus

COMPOSED = "composed"
_MONTH = re.compile(r"(\d{4})-(\d{2})")


@dataclass(frozen=True)
class UsageLine:
    """One run that ended in the window. `units` is its price under the statement's tariff; `charged_units`
    what its settlement took (None: it held no credits, i.e. it was admitted packaged)."""

    submission: str  # hex, as the API shows ids
    eval: str  # the eval's slug, or "composed" for a plan of catalogue tasks
    ended_at: dt.datetime
    status: str
    failure: str | None  # what ended an errored run (a `FailureKind`)
    platform_fault: bool  # errored for a failure its caller is not charged for
    episodes: int
    robot_ns: int
    units: int
    charged_units: int | None

    @property
    def robot_seconds(self) -> float:
        return self.robot_ns / NANOSECONDS_PER_SECOND


@dataclass(frozen=True)
class Usage:
    """The statement of an org over [since, until) (UTC), its runs in the order they ended."""

    org: str
    billing_mode: str
    since: dt.datetime
    until: dt.datetime
    tariff: Tariff
    lines: tuple[UsageLine, ...] = field(default_factory=tuple)

    @property
    def episodes(self) -> int:
        return sum(line.episodes for line in self.lines)

    @property
    def robot_ns(self) -> int:
        return sum(line.robot_ns for line in self.lines)

    @property
    def robot_seconds(self) -> float:
        return self.robot_ns / NANOSECONDS_PER_SECOND

    @property
    def units(self) -> int:
        return sum(line.units for line in self.lines)

    @property
    def charged_units(self) -> int | None:
        """What settlements took in the window; None when no run of it held credits."""
        charged = [line.charged_units for line in self.lines if line.charged_units is not None]
        return sum(charged) if charged else None

    def as_json(self) -> dict[str, Any]:
        def amount(units: int | None) -> dict[str, Any] | None:
            return None if units is None else {"units": units, "credits": billing.credits(units)}

        return {
            "org": self.org,
            "billing_mode": self.billing_mode,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "tariff": self.tariff.model_dump(mode="json"),
            "credit_scale": CREDIT_SCALE,
            "runs": [
                {
                    "submission_id": line.submission,
                    "eval": line.eval,
                    "ended_at": line.ended_at.isoformat(),
                    "status": line.status,
                    "failure": line.failure,
                    "platform_fault": line.platform_fault,
                    "episodes": line.episodes,
                    "robot_ns": line.robot_ns,
                    "robot_seconds": line.robot_seconds,
                    "price": amount(line.units),
                    "charged": amount(line.charged_units),
                }
                for line in self.lines
            ],
            "total": {
                "runs": len(self.lines),
                "episodes": self.episodes,
                "robot_ns": self.robot_ns,
                "robot_seconds": self.robot_seconds,
                "price": amount(self.units),
                "charged": amount(self.charged_units),
            },
        }


def usage(session: Session, org_id: int, since: dt.datetime, until: dt.datetime, tariff: Tariff) -> Usage:
    """The statement of the org's runs (finished, errored or cancelled) whose `ended_at` is in
    [since, until): per run its episodes played, their robot time and their price under `tariff`."""
    if since.tzinfo is None or until.tzinfo is None:
        raise ValueError("since, until: a window's ends are aware times (naive ones say nothing of a zone)")
    since, until = since.astimezone(dt.UTC), until.astimezone(dt.UTC)
    if since >= until:
        raise ValueError(f"until: {until.isoformat()} is not after since {since.isoformat()}")
    org = session.get(Org, org_id)
    if org is None:
        raise ValueError(f"org: no org {org_id:x}")
    in_window = (
        (Run.org_id == org_id) & Run.status.in_(ENDED_RUNS) & (Run.ended_at >= since) & (Run.ended_at < until)
    )
    runs = session.execute(
        select(Run, Eval.slug, Reservation.charged_units)
        .outerjoin(Eval, Eval.id == Run.eval_id)
        .outerjoin(Reservation, Reservation.submission_id == Run.id)
        .where(in_window)
        .order_by(Run.ended_at, Run.id)
    ).all()
    of_window = RunEpisode.submission_id.in_(select(Run.id).where(in_window))
    played = billing.played_episodes(session, of_window)
    priced = _priced(session, of_window)
    lines = []
    for run, eval_slug, charged in runs:
        assert run.ended_at is not None  # the window's filter holds only runs that ended
        fault = (
            run.status == RunStatus.ERRORED
            and run.failure is not None
            and not is_charged(FailureKind(run.failure))
        )
        episodes = [] if fault else played.get(run.id, [])
        price = billing.charge(billing.quote(priced.get(run.id, []), tariff), episodes)
        lines.append(
            UsageLine(
                submission=f"{run.id:x}",
                eval=eval_slug or COMPOSED,
                ended_at=run.ended_at,
                status=run.status,
                failure=run.failure,
                platform_fault=fault,
                episodes=len(episodes),
                robot_ns=sum(duration for _, _, duration in episodes),
                units=price,
                charged_units=charged,
            )
        )
    return Usage(org.slug, org.billing_mode, since, until, tariff, tuple(lines))


def _priced(session: Session, *where: object) -> dict[int, list[PricedEpisodes]]:
    """Per run, its episodes as its quote priced them: counted per task position and endpoint, capped."""
    counts: dict[int, dict[tuple[int, str], tuple[int, float]]] = {}
    for run_id, task_pos, endpoint, cap_s in session.execute(
        select(RunEpisode.submission_id, RunEpisode.task_pos, RunEpisode.endpoint, RunEpisode.cap_s).where(
            *where  # type: ignore[arg-type]
        )
    ).all():
        lines = counts.setdefault(run_id, {})
        count, _ = lines.get((task_pos, endpoint), (0, 0.0))
        lines[(task_pos, endpoint)] = (count + 1, float(cap_s or 0.0))
    return {
        run_id: [PricedEpisodes(pos, endpoint, count, cap) for (pos, endpoint), (count, cap) in lines.items()]
        for run_id, lines in counts.items()
    }


# --- the window an operator names ------------------------------------------------------------------------


def month_window(text: str) -> tuple[dt.datetime, dt.datetime]:
    """`2026-11`: from the first of the month to the first of the next, UTC."""
    found = _MONTH.fullmatch(text.strip())
    if found is None or not 1 <= int(found[2]) <= 12:
        raise ValueError(f"{text!r} is not a month as YYYY-MM (2026-11)")
    year, month = int(found[1]), int(found[2])
    start = dt.datetime(year, month, 1, tzinfo=dt.UTC)
    return start, dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)


def instant(text: str) -> dt.datetime:
    """`2026-11-03` (midnight) or `2026-11-03T12:30[:00][+01:00]`; a time without a zone is UTC."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD) or time (YYYY-MM-DDTHH:MM, UTC)") from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def usage_window(
    month: str | None, since: str | None, until: str | None, now: dt.datetime
) -> tuple[dt.datetime, dt.datetime]:
    """The window of `--month`, or `--since` (to `--until`, else `now`), or else `now`'s month. A
    `UsageWindowError` names the option at fault."""
    if month is not None and (since is not None or until is not None):
        raise UsageWindowError("--month", "name a month or a --since/--until window, not both")
    if month is not None:
        try:
            return month_window(month)
        except ValueError as exc:
            raise UsageWindowError("--month", str(exc)) from None
    if since is None and until is not None:
        raise UsageWindowError("--since", "required with --until (the window's start)")
    if since is None:
        return month_window(f"{now.astimezone(dt.UTC):%Y-%m}")
    ends = []
    for option, text in (("--since", since), ("--until", until)):
        try:
            ends.append(instant(text) if text is not None else now.astimezone(dt.UTC))
        except ValueError as exc:
            raise UsageWindowError(option, str(exc)) from None
    start, end = ends
    if start >= end:
        raise UsageWindowError("--until", f"{end.isoformat()} is not after --since {start.isoformat()}")
    return start, end


class UsageWindowError(ValueError):
    """A window that cannot be read; `option` is the command-line option at fault."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option
        self.message = message
