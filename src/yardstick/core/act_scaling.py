"""How many act workers serve a deployment to robots: its scaling settings, as the contract names them.

`min_workers` (the deploy's `autoscaler.min_containers`) are kept serving, robot or not: filed when the
deployment can serve and never stopped for idling. `buffer_workers` (`buffer_containers`) spares are kept
serving beside the busy ones while robots are connected, so the next robot is seated at once. `max_gpus`
bounds them: on this install a worker takes no card, so it is read as the most workers serving the
deployment at once (one a card where cards are). A worker takes `seats_per_worker` robots before another is
filed for the next (the deploy's `concurrency.max_concurrent`, else its largest batch, `@seq.concurrent`,
else `SEATS_PER_WORKER`: where the contract has one robot a copy, a worker of ours batches the acts of the
robots it seats, as our policy server batches sessions); robots are seated on the least busy worker.
`seq policy set NAME min_workers=1 buffer_workers=1 max_gpus=2` changes them; the deploy's own values hold
until then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["KEYS", "MOST_WORKERS", "SEATS_PER_WORKER", "Scaling", "problems", "scaling_of"]

SEATS_PER_WORKER: Final = 8
# The most workers a deployment may keep on one install: each is a box and a server on a platform worker.
MOST_WORKERS: Final = 16
MIN, BUFFER, MAX = "min_workers", "buffer_workers", "max_gpus"
KEYS: Final = (MIN, BUFFER, MAX)
# The deploy's autoscaler field each setting starts from.
_DECLARED: Final = {MIN: "min_containers", BUFFER: "buffer_containers", MAX: "max_gpus"}


@dataclass(frozen=True)
class Scaling:
    min_workers: int = 0
    buffer_workers: int = 0
    max_workers: int = MOST_WORKERS
    seats_per_worker: int = SEATS_PER_WORKER

    def floor(self, robots: int) -> int:
        """The workers kept serving with `robots` connected: the minimum, or the busy ones and the spares."""
        if robots == 0:
            return min(self.min_workers, self.max_workers)
        busy = -(-robots // self.seats_per_worker)
        return min(max(self.min_workers, busy + self.buffer_workers), self.max_workers)


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def scaling_of(settings: Mapping[str, Any], declared: Mapping[str, Any]) -> Scaling:
    """A deployment's scaling: its settings (`seq policy set`) over what its serving version's deploy said."""
    autoscaler = declared.get("autoscaler") if isinstance(declared.get("autoscaler"), dict) else {}
    concurrency = declared.get("concurrency") if isinstance(declared.get("concurrency"), dict) else {}

    def read(key: str) -> int | None:
        set_ = _whole(settings.get(key))
        return set_ if set_ is not None else _whole((autoscaler or {}).get(_DECLARED[key]))

    most = read(MAX)
    sizes = (concurrency or {}).get("sizes")
    batch = max((n for n in sizes if _whole(n)), default=None) if isinstance(sizes, list) else None
    seats = _whole((concurrency or {}).get("max_concurrent")) or batch
    return Scaling(
        min_workers=max(0, read(MIN) or 0),
        buffer_workers=max(0, read(BUFFER) or 0),
        max_workers=min(MOST_WORKERS, most) if most is not None and most >= 1 else MOST_WORKERS,
        seats_per_worker=seats if seats is not None and seats >= 1 else SEATS_PER_WORKER,
    )


def problems(
    changes: Mapping[str, Any], settings: Mapping[str, Any], declared: Mapping[str, Any]
) -> list[str]:
    """What is wrong with changing the scaling settings by `changes` (None resets one to the deploy's)."""
    found = []
    for key in KEYS:
        if key not in changes or changes[key] is None:
            continue
        value = _whole(changes[key])
        low = 1 if key == MAX else 0
        if value is None or not low <= value <= MOST_WORKERS:
            found.append(f"changes[{key!r}]: a whole number, {low} to {MOST_WORKERS}")
    if found:
        return found
    after = scaling_of({**settings, **{k: v for k, v in changes.items() if k in KEYS}}, declared)
    if after.min_workers > after.max_workers:
        found.append(
            f"changes: min_workers {after.min_workers} is more than max_gpus {after.max_workers} (the most"
            " workers serving it at once here, where a worker takes no card)"
        )
    return found
