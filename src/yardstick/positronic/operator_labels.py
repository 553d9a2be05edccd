"""The operator's labeler, and the scoring of a rig run from the labels it gives.

At a station a person judges each episode of a rig plan, and the rig records it as the episode folder that the
Positronic vocabulary defines (`yardstick.rig.folders`). `operator_label` reads such a folder back into a
`positronic_evals` `Label` (it is a `Labeler`); `score_rig_run` scores a run with `positronic_evals.scoring`,
the rule a Positronic board ranks on; `endpoint_outcome` counts what the contract's `PlanOutcome` reports.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from eval_vocabulary.episode import (
    BENCHMARK_TASK,
    LEGACY_TIME_COLUMN,
    SIGNAL_FILE_SUFFIX,
    TIMESTAMP_COLUMN_PREFIX,
    VALUE_COLUMN,
)
from eval_vocabulary.outcome import ABSENT, OUTCOME, SUCCESSFUL_ITEMS, TOTAL_ITEMS, is_scored
from eval_vocabulary.outcome import Outcome as RecordedOutcome
from eval_vocabulary.progress import STATE_SIGNAL
from eval_vocabulary.progress import Stage as RecordedStage
from eval_vocabulary.timeline import EMITTED_WORLD, recording_timeline
from platform_client.responses import EndpointOutcome, PlanOutcome
from positronic_evals.labels import (
    PUBLIC_LABELERS,
    EndEvent,
    Fail,
    ItemsDelivered,
    Label,
    Labeler,
    LabelerRef,
    Outcome,
    Safety,
    Stage,
    StageReached,
    Success,
    label,
    read_static,
    recorded_span,
    recorded_uid,
)
from positronic_evals.scoring import EpisodeScore, MeanEpisodeScore, Scores, Scoring, score
from pydantic import ValidationError

log = logging.getLogger(__name__)

OPERATOR_LABELER = LabelerRef("operator")

# The rig's key for the operator's notes, as `yardstick.rig.folders.NOTES` writes it. This door may not import
# the rig (a layer above it), so the key is said twice, and tests/test_rig_folders.py holds the two together.
NOTES = "yardstick.notes"

_WORLD_TIME_COLUMN = f"{TIMESTAMP_COLUMN_PREFIX}{EMITTED_WORLD}"

# Each recorded ladder code as the labels' `Stage` names it. A code not here is ignored, as
# `eval_vocabulary.progress.highest_stage` ignores one, so a recording against a longer ladder still reads.
_STAGES: Mapping[str, Stage] = MappingProxyType(
    {
        RecordedStage.FLOATING: Stage.floating,
        RecordedStage.REACHING: Stage.reaching,
        RecordedStage.CONTACT: Stage.contact,
        RecordedStage.CONTROL: Stage.control,
        RecordedStage.AT_TARGET: Stage.at_target,
    }
)

# The end event of each verdict that judges the policy. `Ran out of time` has none: a label without an end
# event is `out_of_time`. `System` is not here: the rig failed, not the policy, so the episode has no label.
_END_EVENTS: Mapping[RecordedOutcome, type[EndEvent] | None] = MappingProxyType(
    {
        RecordedOutcome.SUCCESS: Success,
        RecordedOutcome.FAIL: Fail,
        RecordedOutcome.OUT_OF_TIME: None,
        RecordedOutcome.SAFETY: Safety,
    }
)


def recorded_outcome(folder: Path) -> RecordedOutcome | None:
    """The `eval.outcome` that `folder` records (`ABSENT` where its statics hold none), or None where it has
    no statics or the value is no outcome."""
    static = read_static(folder)
    return _outcome(static, folder) if static is not None else None


def _outcome(static: Mapping[str, object], folder: Path) -> RecordedOutcome | None:
    value = static.get(OUTCOME, ABSENT)
    if isinstance(value, str) and value in tuple(RecordedOutcome):
        return RecordedOutcome(value)
    log.error("%s=%r in %s is no outcome; this episode has no label", OUTCOME, value, folder)
    return None


def operator_label(folder: Path) -> Label | None:
    """The operator's label of a rig episode, or None where the operator gave it no verdict on the policy.

    The task is the benchmark's task id (`eval.task`), and the episode runs over the span of its signals, as
    the vocabulary's labelers read it. The events: a `StageReached` at each ladder mark, then at the end the
    items delivered where the statics count them, and the verdict's end event. `UNSCORED` (or none),
    `Discarded` and `System` give None, as does a folder that records no uid, no span or counts of the wrong
    kind (logged).
    """
    static = read_static(folder)
    outcome = _outcome(static, folder) if static is not None else None
    if static is None or outcome is None or outcome not in _END_EVENTS:
        return None
    task = static.get(BENCHMARK_TASK)
    if not isinstance(task, str):
        log.error("%s=%r in %s is not a task id; this episode has no label", BENCHMARK_TASK, task, folder)
        return None
    uid = recorded_uid(folder)
    span = recorded_span(folder) if uid is not None else None
    counts = _counts(static, folder)
    if uid is None or span is None or counts is None:
        return None
    start_ns, end_ns = span
    marks = _marks(folder, start_ns)
    if marks is None:
        return None
    seconds_to_end = (end_ns - start_ns) / 1e9
    successful_items, total_items = counts
    events: list[StageReached | ItemsDelivered | EndEvent] = list(marks)
    if successful_items is not None:
        events.append(ItemsDelivered(seconds=seconds_to_end, delivered=successful_items))
    end = _END_EVENTS[outcome]
    if end is not None:
        events.append(end(seconds=seconds_to_end))
    notes = static.get(NOTES)
    try:
        return Label(
            uid=uid,
            task=task,
            annotator=OPERATOR_LABELER,
            seconds_to_end=seconds_to_end,
            total_items=total_items,
            events=tuple(events),
            notes=notes if isinstance(notes, str) else None,
        )
    except ValidationError as exc:
        # One damaged record leaves the other episodes labelled, so this is logged, not raised.
        log.error("%s does not make a label (%s); this episode has no label", folder, exc)
        return None


def _counts(static: Mapping[str, object], folder: Path) -> tuple[int | None, int | None] | None:
    """The items delivered and the items in all, each None where not recorded; None where one is no count."""
    counts: list[int | None] = []
    for key in (SUCCESSFUL_ITEMS, TOTAL_ITEMS):
        value = static.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            log.error("%s=%r in %s is not a count; this episode has no label", key, value, folder)
            return None
        counts.append(value)
    return counts[0], counts[1]


def _marks(folder: Path, start_ns: int) -> list[StageReached] | None:
    """A `StageReached` at each ladder mark, in order of time, from the trial's start at `start_ns`.

    None where the signal does not parse, which `recorded_span` has already logged.
    """
    signal = folder / f"{STATE_SIGNAL}{SIGNAL_FILE_SUFFIX}"
    if not signal.is_file():
        return []
    try:
        names = pq.read_schema(signal).names
        # The timeline the vocabulary tells a reader to take (the harness's world clock first), then the
        # emitter's, which `recorded_span` reads, then the column of a recording from before timelines.
        timelines = [name.removeprefix(TIMESTAMP_COLUMN_PREFIX) for name in names]
        picked = f"{TIMESTAMP_COLUMN_PREFIX}{recording_timeline(timelines)}"
        order = (picked, _WORLD_TIME_COLUMN, LEGACY_TIME_COLUMN)
        column = next((name for name in order if name in names), None)
        if column is None or VALUE_COLUMN not in names:
            log.error("%s holds no world time or no value; this episode has no label", signal)
            return None
        table = pq.read_table(signal, columns=[column, VALUE_COLUMN])
    except pa.ArrowInvalid:
        return None
    times: list[object] = table.column(column).to_pylist()
    codes: list[object] = table.column(VALUE_COLUMN).to_pylist()
    marks = [
        (time_ns, _STAGES[code])
        for time_ns, code in zip(times, codes, strict=True)
        if isinstance(time_ns, int) and isinstance(code, str) and code in _STAGES
    ]
    marks.sort(key=lambda mark: mark[0])
    return [StageReached(seconds=(time_ns - start_ns) / 1e9, stage=stage) for time_ns, stage in marks]


# Whom `score_rig_run` may ask: the operator, and the labelers that `positronic_evals` publishes.
RIG_LABELERS: Mapping[LabelerRef, Labeler] = MappingProxyType(
    {
        **PUBLIC_LABELERS,
        OPERATOR_LABELER: operator_label,
    }
)

# Our numbers, not Positronic's: partial credit rises with the rung the arm reached and stays well below a
# success's 1.0, so no partial attempt ranks with a success. Moving free earns nothing (it shows nothing of
# the task); touching the object (.2) is worth more than getting near it (.1); holding and moving it (.4) is
# most of a pick-and-place's difficulty; at the target (.6) it is not yet placed, released or judged done. A
# task with items scores at least its share delivered. A safety stop scores 0 whatever came before: a policy
# that had to be stopped earns nothing for the progress it made on the way.
DEFAULT_RIG_SCORING = Scoring(
    labelers=(OPERATOR_LABELER,),
    primary=MeanEpisodeScore(
        episode_score=EpisodeScore(
            stage={Stage.reaching: 0.1, Stage.contact: 0.2, Stage.control: 0.4, Stage.at_target: 0.6},
            use_item_share=True,
            zero=frozenset({Outcome.safety}),
        )
    ),
)


def score_rig_run(folders: Sequence[Path], scoring: Scoring = DEFAULT_RIG_SCORING) -> Scores:
    """The scores of a rig run whose episodes recorded `folders`, under `scoring`: each folder labelled by
    the first labeler of `scoring` that labels it (`score_labelled`)."""
    recorded = []
    for folder in folders:
        given = label(folder, scoring.labelers, RIG_LABELERS)
        recorded.append((recorded_outcome(folder), given[1] if given is not None else None))
    return score_labelled(recorded, scoring)


def score_labelled(
    recorded: Iterable[tuple[str | None, Label | None]], scoring: Scoring = DEFAULT_RIG_SCORING
) -> Scores:
    """The scores of a rig run from each episode's recorded outcome and label (None: nobody labelled it). A
    `Discarded` episode is left out, as the vocabulary says (it is not scored at all); any other episode
    without a label counts as unscored, never as a failure."""
    return score(scoring, [given for outcome, given in recorded if outcome != RecordedOutcome.DISCARDED])


def endpoint_outcome(outcomes: Mapping[str, Iterable[str | None]]) -> PlanOutcome:
    """What a rig plan recorded per endpoint, from each endpoint's recorded outcomes (None: absent).

    The endpoints come in the order of `outcomes`, which is the plan's. `kept` leaves out the discarded
    episodes, `judged` counts the kept ones with a verdict (`is_scored`: `System` is one), and `succeeded` the
    judged ones whose verdict is a success.
    """
    entries = []
    for endpoint, recorded in outcomes.items():
        kept = [value for value in recorded if value != RecordedOutcome.DISCARDED]
        judged = [value for value in kept if is_scored(value)]
        entries.append(
            EndpointOutcome(
                endpoint=endpoint,
                kept=len(kept),
                judged=len(judged),
                succeeded=sum(value == RecordedOutcome.SUCCESS for value in judged),
            )
        )
    return PlanOutcome(endpoints=entries)
