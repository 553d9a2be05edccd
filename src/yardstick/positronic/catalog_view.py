"""`catalog.evals` and `catalog.tasks`: what a caller's `Catalog` offers, in the contract's own models.

The evals list every eval the caller may name; the tasks list the tasks of the composable evals, which only
a caller whose org holds the grant to compose may read (`forbidden` otherwise, as the contract says).
"""

from __future__ import annotations

from platform_client.catalog import EvalListResponse, EvalSummary, TaskListResponse, TaskSummary
from platform_client.enums import RigShape, StartPose
from platform_client.tasks import TaskRef
from positronic_evals.evals import EvalRef
from positronic_evals.slug import members_by_slug

from yardstick.core.catalog import Catalog, CatalogEval, CatalogTask
from yardstick.core.refusals import forbidden
from yardstick.positronic.plans import TaskScene

# The metric every board of ours ranks on: the share of episodes that succeed.
PRIMARY_METRIC = "success_rate"


def eval_summary(evaluation: CatalogEval) -> EvalSummary:
    return EvalSummary(
        id=EvalRef(evaluation.slug),
        embodiment=evaluation.embodiment,
        tasks=[task.benchmark_task for task in evaluation.tasks],
        composable=evaluation.composable,
        primary_metric=PRIMARY_METRIC,
        description=evaluation.description,
    )


class TaskRow(TaskSummary):
    """A task as both clients read it: 0.41.2 reads `embodiments`, 0.37.1 the one `embodiment` it had (each
    client's model ignores the field it does not know)."""

    embodiment: str


class TaskRows(TaskListResponse):
    tasks: list[TaskRow]  # type: ignore[assignment]  # the contract's list, each row carrying both fields


def task_summary(evaluation: CatalogEval, task: CatalogTask) -> TaskRow:
    scene = TaskScene.of(task)
    shape = members_by_slug(RigShape).get(evaluation.embodiment)
    return TaskRow(
        id=TaskRef(task.task_id),
        embodiments=[] if shape is None else [shape],
        embodiment=evaluation.embodiment,
        task=task.description,
        objects=[name for name, _ in scene.objects],
        tote_placement=list(scene.tote_sides or ()),
        camera_vantage=scene.vantage,
        external_cameras={mount: list(sides) for mount, sides in scene.cameras.items()},
        default_cap_per_episode_sec=task.default_cap_sec,
        clutter=scene.clutter,
        start_pose=scene.start_pose or StartPose.nominal,
    )


def evals_view(catalog: Catalog) -> EvalListResponse:
    """`catalog.evals`: every eval the caller may name, in the catalogue's order."""
    return EvalListResponse(evals=[eval_summary(evaluation) for evaluation in catalog.evals.values()])


def tasks_view(catalog: Catalog) -> TaskRows:
    """`catalog.tasks`: the tasks a plan of the caller's may state, by id; refused without the grant to
    compose."""
    if not catalog.may_compose:
        raise forbidden(
            "the catalogue's tasks are for composing plans, which takes a grant your organisation does not "
            "hold: name an eval from catalog.evals instead"
        )
    return TaskRows(
        tasks=[
            task_summary(evaluation, task)
            for _, (evaluation, task) in sorted(catalog.tasks.items())
            if evaluation.composable
        ]
    )
