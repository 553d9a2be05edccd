"""Parsing of the option values typer cannot parse itself: lists, seed ranges, `--param` pairs, and
`--executor pool|ray` with `--ray-address` (read the same way by `eval run`, `server` and `worker`)."""

from __future__ import annotations

import json
from typing import Any

import typer


def split_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [part.strip() for part in value.split(",") if part.strip()]
    return items or None


def parse_seeds(value: str | None) -> list[int] | None:
    """ "0,1,5" or "0..9" (inclusive) or a mix: "0..4,10"."""
    if value is None:
        return None
    seeds: list[int] = []
    for part in split_list(value) or []:
        try:
            if ".." in part:
                first, last = part.split("..", 1)
                seeds.extend(range(int(first), int(last) + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise typer.BadParameter(
                f"{part!r}: seeds are integers, listed (0,1,5) or as a range (0..9)", param_hint="--seeds"
            ) from None
    return seeds


def parse_params(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`--param benchmark.NAME=VALUE` / `--param policy.NAME=VALUE`, VALUE read as JSON when it parses
    (numbers, lists, true/false/null), else taken as text."""
    found: dict[str, dict[str, Any]] = {"benchmark": {}, "policy": {}}
    for pair in pairs:
        key, equals, raw = pair.partition("=")
        owner, dot, name = key.partition(".")
        if not equals or not dot or owner not in found or not name.isidentifier():
            raise typer.BadParameter(
                f"{pair!r}: a parameter is benchmark.NAME=VALUE or policy.NAME=VALUE", param_hint="--param"
            )
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        found[owner][name] = value
    return found["benchmark"], found["policy"]


def chosen_cluster(executor: str, address: str | None) -> str | None:
    """The Ray cluster episodes play on (`auto` when none is named), or None for this machine; a misused
    flag refused by name."""
    if executor not in ("pool", "ray"):
        raise typer.BadParameter(f"{executor!r} is none of pool, ray", param_hint="--executor")
    if executor == "pool":
        if address is not None:
            raise typer.BadParameter("is for --executor ray", param_hint="--ray-address")
        return None
    return address or "auto"


ExecutorOption = typer.Option(
    "pool",
    "--executor",
    help="Where episodes play: pool (worker processes on this machine) or ray (actors on a Ray "
    "cluster, one CPU each; --workers of them, default one per CPU of the cluster).",
)
RayAddressOption = typer.Option(
    None,
    "--ray-address",
    help="With --executor ray: the cluster, auto (RAY_ADDRESS, or the one `ray start` began on this "
    "machine) or its head's HOST:PORT. Default auto.",
)


def run_cluster(executor: str, address: str | None, in_process: bool) -> str | None:
    """The Ray cluster a local run plays on, or None for this machine; a misused flag refused by name, and
    an address where nothing answers refused before anything is drawn (exit 1)."""
    from yardstick.cli.display import fail
    from yardstick.cli.exits import Exit
    from yardstick.engine.ray_executor import check_answers

    cluster = chosen_cluster(executor, address)
    if cluster is not None and in_process:
        raise typer.BadParameter("plays on a Ray cluster, not in this process", param_hint="--executor ray")
    if cluster is not None:
        try:
            check_answers(cluster)
        except ConnectionError as exc:
            fail(Exit.CALLER, no_cluster(cluster, exc))
    return cluster


def no_cluster(address: str, exc: Exception) -> str:
    """What a local run says when no Ray cluster answers (at its start, or as Ray connects)."""
    return f"--executor ray: no Ray cluster at {address}: {exc}"
