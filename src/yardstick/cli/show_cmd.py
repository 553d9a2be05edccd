"""`yardstick benchmark show` and `yardstick policy show`: what a class declares, without building it."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from yardstick.cli.display import console, print_error, print_table
from yardstick.cli.exits import Exit
from yardstick.sdk.decorators import benchmark_spec, policy_spec
from yardstick.sdk.errors import AuthoringError

benchmark_app = typer.Typer(help="Benchmarks.", no_args_is_help=True)
policy_app = typer.Typer(help="Policies.", no_args_is_help=True)


def _resolve(kind: str, ref: str) -> type:
    from yardstick.catalog import resolve

    try:
        return resolve(kind, ref)  # type: ignore[arg-type]
    except AuthoringError as exc:
        print_error(str(exc))
        raise typer.Exit(Exit.CALLER) from None


def _seeds(seeds: tuple[int, ...]) -> str:
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{len(seeds)} seeds, {seeds[0]}..{seeds[-1]}"
    return f"{len(seeds)} seeds: {', '.join(map(str, seeds))}"


@benchmark_app.command("show")
def show_benchmark(
    ref: str = typer.Argument(..., help="A built-in name (mt10, mt50, gym:<id>) or module:Class."),
    as_json: bool = typer.Option(False, "--json", help="Print the declaration as JSON."),
) -> None:
    """The tasks, seeds, time limits and constructor a benchmark declares."""
    spec = benchmark_spec(_resolve("benchmark", ref))
    if as_json:
        print(json.dumps(spec.model_dump(mode="json"), indent=2))
        return
    console.print(f"[bold]{spec.name}[/bold]  ({ref})")
    console.print(f"seeds: {_seeds(spec.seeds)}")
    if spec.worlds:
        console.print(f"vectorized: up to {spec.worlds} worlds a step call")
    if spec.action_space:
        console.print(
            f"action space: {len(spec.action_space[0])} dims, low {list(spec.action_space[0])}, "
            f"high {list(spec.action_space[1])}"
        )
    console.print(f"constructor: {_constructor(spec.constructor.model_dump())}")
    table = Table("task", "max seconds", "description")
    for task, description in spec.tasks.items():
        table.add_row(task, f"{spec.limit(task):g}", description)
    print_table(table)


@policy_app.command("show")
def show_policy(
    ref: str = typer.Argument(..., help="A built-in name (expert, random) or module:Class."),
    as_json: bool = typer.Option(False, "--json", help="Print the declaration as JSON."),
) -> None:
    """The rate, chunking, batching and constructor a policy declares."""
    spec = policy_spec(_resolve("policy", ref))
    if as_json:
        print(json.dumps(spec.model_dump(mode="json"), indent=2))
        return
    table = Table(show_header=False, title=f"{spec.name}  ({ref})", title_justify="left")
    rows: list[tuple[str, Any]] = [
        ("hz", f"{spec.hz:g} steps a second"),
        ("action_chunk_len", f"{spec.action_chunk_len} rows may play open-loop"),
        ("action_chunk_exec_len", f"asks again after {spec.replan_every} steps"),
        (
            "batch_sizes",
            ", ".join(map(str, spec.batch_sizes)) if spec.batch_sizes else "one observation a call",
        ),
        ("infer", f"{spec.infer_method}(obs{''.join(', ' + k + '=' for k in sorted(spec.infer_keywords))})"),
        ("on_episode", spec.on_episode_method or "-"),
        ("weights", spec.weights or "-"),
        ("constructor", _constructor(spec.constructor.model_dump())),
    ]
    for key, value in rows:
        table.add_row(key, str(value))
    print_table(table)


def _constructor(constructor: dict[str, Any]) -> str:
    args = [json.dumps(a) for a in constructor["args"]]
    args += [f"{k}={json.dumps(v)}" for k, v in constructor["kwargs"].items()]
    maker = constructor["make"] or "Class"
    return f"{maker}({', '.join(args)})"
