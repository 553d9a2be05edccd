"""A platform run that stops by a rule grows in rounds on the durable queue.

It is filed with every episode up to its cap, the first round's queued and the rest held (`EpisodeState.HELD`,
never leased). When the last released episode lands, in the transaction that lands it, the rule looks at
every episode played so far, in trial order, and either releases the next round (held -> queued, for the
tasks still open) or stops the run: the held episodes are deleted and the run's total becomes what it played,
so the landing is the run's last and it finishes as any run does.

Why this is safe: the look happens under the run row's lock (the landing's `UPDATE submissions` takes it), so
two workers landing a round's last two episodes look once, in turn, and the second sees the first's episode;
the rule is a function of the played episodes alone, and episodes are deterministic, so a worker killed
mid-round (its lease runs out, its episodes are played again) leaves the same rounds and the same decision,
each episode counted once (a lease that ran out cannot land).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from yardstick.scoring.gate import parse_gate
from yardstick.scoring.sequential import SequentialEval, checkpoints, parse_until
from yardstick.store.models import Run, RunEpisode
from yardstick.store.states import EpisodeState


def new_stopping(
    until: str, gates: Sequence[str], alpha: float, tasks: Sequence[str], cap: int
) -> dict[str, Any]:
    """A run's `stopping` as filed: the rule (checked: a ValueError names what is wrong), its first round."""
    rule_of({"until": until, "gates": list(gates), "alpha": alpha, "tasks": list(tasks)})
    first = checkpoints(cap)[0]
    return {
        "until": until,
        "gates": list(gates),
        "alpha": alpha,
        "tasks": list(tasks),
        "max_trials": cap,
        "released_trials": first,
        "open": list(tasks),
        "rounds": [first],
        "decided": False,
        "state": None,
    }


def rule_of(stopping: dict[str, Any]) -> SequentialEval:
    return SequentialEval(
        list(stopping["tasks"]),
        parse_until(str(stopping["until"])),
        [parse_gate(text) for text in stopping.get("gates") or []],
        float(stopping["alpha"]),
    )


def held_at_filing(trial: int, stopping: dict[str, Any]) -> bool:
    """Whether an episode of this trial waits for a later round."""
    return trial >= int(stopping["released_trials"])


def released(session: Session, run_id: int) -> int:
    """The run's episodes not held: those its rounds so far let play."""
    counted = select(func.count()).where(
        RunEpisode.submission_id == run_id, RunEpisode.state != EpisodeState.HELD
    )
    return int(session.execute(counted).scalar_one())


def after_round(session: Session, run_id: int, stopping: dict[str, Any]) -> bool:
    """The look after a round, in the caller's transaction (which holds the run's row): release the next
    round of the open tasks, or stop the run. True when it stopped."""
    rule = rule_of(stopping)
    played = session.execute(
        select(RunEpisode.task_id, RunEpisode.trial, RunEpisode.result)
        .where(RunEpisode.submission_id == run_id, RunEpisode.state == EpisodeState.DONE)
        .order_by(RunEpisode.trial, RunEpisode.task_pos)
    ).all()
    for task, _, result in played:
        rule.observe(task, 1.0 if (result or {}).get("success") else 0.0)
    rule.look()
    open_tasks = [task for task in stopping["tasks"] if rule.is_open(task)]
    reached = int(stopping["released_trials"])
    later = [end for end in checkpoints(int(stopping["max_trials"])) if end > reached]
    state = {**stopping, "state": rule.to_dict(), "open": open_tasks}
    if open_tasks and later:
        state.update(released_trials=later[0], rounds=[*stopping["rounds"], later[0]])
        session.execute(
            update(RunEpisode)
            .where(
                RunEpisode.submission_id == run_id,
                RunEpisode.state == EpisodeState.HELD,
                RunEpisode.task_id.in_(open_tasks),
                RunEpisode.trial < later[0],
            )
            .values(state=EpisodeState.QUEUED)
        )
        session.execute(update(Run).where(Run.id == run_id).values(stopping=state))
        return False
    session.execute(
        delete(RunEpisode).where(RunEpisode.submission_id == run_id, RunEpisode.state == EpisodeState.HELD)
    )
    state["decided"] = not open_tasks
    session.execute(
        update(Run).where(Run.id == run_id).values(stopping=state, episodes_total=Run.episodes_done)
    )
    return True
