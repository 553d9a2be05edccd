"""`yardstick server`, `yardstick worker`, `yardstick db upgrade` and `yardstick admin …`: running a
platform and administering it with direct access to its database."""

from __future__ import annotations

import multiprocessing as mp
import signal
from pathlib import Path
from typing import Any

import typer

from yardstick.cli.display import console
from yardstick.cli.exits import Exit
from yardstick.service.settings import Settings

DataDir = typer.Option(
    None,
    "--data-dir",
    help="Where the platform keeps its state (default: $YARDSTICK_DATA_DIR or ~/.local/share/yardstick).",
)
DatabaseUrl = typer.Option(
    None,
    "--database",
    help="postgresql://… or a SQLite path (default: a SQLite file in the "
    "data directory; $YARDSTICK_DATABASE_URL).",
)


def _settings(data_dir: Path | None, database: str | None) -> Settings:
    return Settings.from_env(data_dir, database)


def run_worker(settings: Settings, name: str | None = None) -> None:
    """A worker process's life: play episodes until SIGTERM/SIGINT, then hand back what it held."""
    from yardstick.service.worker import PlatformWorker

    worker = PlatformWorker(settings, name=name)
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    signal.signal(signal.SIGINT, lambda *_: worker.stop())
    worker.run()


def start_workers(settings: Settings, count: int) -> list[Any]:
    context = mp.get_context("spawn")
    processes = [context.Process(target=run_worker, args=(settings,), daemon=False) for _ in range(count)]
    for process in processes:
        process.start()
    return processes


def stop_workers(processes: list[Any]) -> None:
    for process in processes:
        process.terminate()  # SIGTERM: finish the episode in hand, hand the rest back
    for process in processes:
        process.join(timeout=60)
        if process.is_alive():
            process.kill()


def server(
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
    host: str = typer.Option("127.0.0.1", help="The address to bind."),
    port: int = typer.Option(8080, help="The HTTP port."),
    no_worker: bool = typer.Option(False, "--no-worker", help="Serve the API only; workers run elsewhere."),
    workers: int = typer.Option(1, min=1, help="Embedded worker processes."),
) -> None:
    """The whole platform on one machine: the API, workers, the database and the artifacts, migrations
    applied. OpenAPI at /docs."""
    import uvicorn

    from yardstick.service.gateway import create_app
    from yardstick.service.platform import Platform

    settings = _settings(data_dir, database)
    platform = Platform(settings)
    console.print(f"data: {settings.data_dir}  database: {settings.database.split('@')[-1]}")
    console.print(f"API:  http://{host}:{port}/v1  (OpenAPI at /docs)")
    embedded = [] if no_worker else start_workers(settings, workers)
    try:
        uvicorn.run(create_app(platform), host=host, port=port, log_level="warning")
    finally:
        stop_workers(embedded)
        platform.close()


def worker(
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
    concurrency: int = typer.Option(1, min=1, help="Worker processes on this machine."),
) -> None:
    """Play queued episodes from a platform's database (PostgreSQL for workers on other machines; the
    artifact folder must be shared with the server's)."""
    settings = _settings(data_dir, database)
    if concurrency == 1:
        run_worker(settings)
        return
    processes = start_workers(settings, concurrency)
    try:
        for process in processes:
            process.join()
    except KeyboardInterrupt:
        stop_workers(processes)


db_app = typer.Typer(help="The platform's database.", no_args_is_help=True)


@db_app.command("upgrade")
def db_upgrade(data_dir: Path | None = DataDir, database: str | None = DatabaseUrl) -> None:
    """Apply every migration not yet applied."""
    from yardstick.store.db import Database

    settings = _settings(data_dir, database)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    Database(settings.database).upgrade()
    console.print("database is up to date")


admin_app = typer.Typer(help="Administer a platform (direct database access).", no_args_is_help=True)
org_app = typer.Typer(help="Organizations.", no_args_is_help=True)
user_app = typer.Typer(help="Users.", no_args_is_help=True)
key_app = typer.Typer(help="API keys.", no_args_is_help=True)
eval_admin_app = typer.Typer(help="Catalogue evals.", no_args_is_help=True)
baseline_app = typer.Typer(help="Baselines on boards.", no_args_is_help=True)
for sub, name in (
    (org_app, "org"),
    (user_app, "user"),
    (key_app, "key"),
    (eval_admin_app, "eval"),
    (baseline_app, "baseline"),
):
    admin_app.add_typer(sub, name=name)


def _admin(data_dir: Path | None, database: str | None) -> Any:
    from yardstick.service.platform import Platform

    return Platform(_settings(data_dir, database))


def _do(data_dir: Path | None, database: str | None, action: Any) -> Any:
    from yardstick.service.admin import AdminError

    platform = _admin(data_dir, database)
    try:
        with platform.db.writing() as session:
            return action(session)
    except AdminError as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(Exit.CALLER) from None
    finally:
        platform.close()


@org_app.command("create")
def org_create(
    slug: str,
    name: str = "",
    per_day: int = typer.Option(20, help="Submissions a day per user."),
    concurrent: int = typer.Option(4, help="Submissions queued or running at once."),
    no_compose: bool = typer.Option(False, help="Its members may only name evals."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.service import admin

    _do(
        data_dir,
        database,
        lambda s: admin.create_org(
            s, slug, name=name, per_day=per_day, concurrent=concurrent, may_compose=not no_compose
        ),
    )
    console.print(f"org {slug} created")


@user_app.command("create")
def user_create(
    login: str,
    org: list[str] = typer.Option([], "--org", help="An org to join (repeatable)."),
    alias: str | None = None,
    is_admin: bool = typer.Option(False, "--admin"),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.service import admin

    _do(data_dir, database, lambda s: admin.create_user(s, login, orgs=org, alias=alias, is_admin=is_admin))
    console.print(f"user {login} created")


@key_app.command("create")
def key_create(
    login: str, label: str = "", data_dir: Path | None = DataDir, database: str | None = DatabaseUrl
) -> None:
    """Mint a key for a user. It is shown this once; only its hash is kept."""
    from yardstick.service import admin

    minted = _do(data_dir, database, lambda s: admin.create_key(s, login, label))
    console.print(f"key for {login} (shown once; store it now):", style="bold")
    print(minted.plaintext)


@key_app.command("revoke")
def key_revoke(prefix: str, data_dir: Path | None = DataDir, database: str | None = DatabaseUrl) -> None:
    from yardstick.service import admin

    _do(data_dir, database, lambda s: admin.revoke_key(s, prefix))
    console.print(f"key {prefix}… revoked")


@eval_admin_app.command("create")
def eval_create(
    slug: str,
    benchmark: str = typer.Option(..., help="mt10, gym:<id>, module:Class …"),
    task: list[str] = typer.Option([], "--task", help="Offer only these tasks (repeatable)."),
    trials: int = typer.Option(10, min=1, help="Trials per task when a plan names the eval."),
    org: str | None = typer.Option(None, help="Offer it to this org only (a tenant board)."),
    title: str = "",
    param: list[str] = typer.Option(
        [], "--param", help="A benchmark parameter, e.g. benchmark.cameras='[\"corner\"]' (repeatable)."
    ),
    record_video: bool = typer.Option(
        False, "--record-video", help="Record every episode (a video per camera, the trajectory)."
    ),
    record_fps: float | None = typer.Option(None, min=0.1, help="Video frame rate (default: the policy's)."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.cli.options import parse_params
    from yardstick.service import admin

    benchmark_params, policy_params = parse_params(param)
    if policy_params:
        raise typer.BadParameter("an eval takes benchmark.NAME=VALUE parameters only", param_hint="--param")
    _do(
        data_dir,
        database,
        lambda s: admin.create_eval(
            s,
            slug,
            benchmark,
            title=title,
            org_slug=org,
            choice=admin.EvalTasks(task or None, trials),
            params=benchmark_params,
            record_video=record_video,
            record_fps=record_fps,
        ),
    )
    console.print(f"eval {slug} created, with its board")


@baseline_app.command("add")
def baseline_add(
    board: str,
    submission: str,
    publisher: str = typer.Option(..., help="Who released the model."),
    name: str = typer.Option(..., help="The name the board shows."),
    data_dir: Path | None = DataDir,
    database: str | None = DatabaseUrl,
) -> None:
    from yardstick.service import admin

    _do(data_dir, database, lambda s: admin.add_baseline(s, board, int(submission, 16), publisher, name))
    console.print(f"baseline {name} added to {board}")
