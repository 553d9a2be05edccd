"""`yardstick`: evaluate policies on benchmarks, and look at what they declare."""

from __future__ import annotations

import sys

import typer

from yardstick import __version__
from yardstick.cli import client_cmd, login_cmd
from yardstick.cli.credits_cmd import credits_app
from yardstick.cli.eval_cmd import eval_app
from yardstick.cli.image_cmd import image_app
from yardstick.cli.platform_cmd import admin_app, db_app, server, worker
from yardstick.cli.rig_cmd import rig_app
from yardstick.cli.serve_cmd import serve
from yardstick.cli.show_cmd import benchmark_app, policy_app

app = typer.Typer(
    help="Evaluate robot policies on benchmarks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
app.add_typer(eval_app, name="eval")
# The platform's client commands sit beside `eval run` (`yardstick eval submit`, ...).
eval_app.command("submit")(client_cmd.submit)
eval_app.command("resolve")(client_cmd.resolve)
eval_app.command("status")(client_cmd.status)
eval_app.command("list")(client_cmd.list_submissions)
eval_app.command("cancel")(client_cmd.cancel)
eval_app.command("artifacts")(client_cmd.artifacts)
eval_app.command("catalog")(client_cmd.catalog)
app.command("boards")(client_cmd.boards)
app.command("login")(login_cmd.login)
app.command("logout")(login_cmd.logout)
app.add_typer(login_cmd.keys_app, name="keys")
app.add_typer(credits_app, name="credits")
app.add_typer(benchmark_app, name="benchmark")
app.add_typer(policy_app, name="policy")
app.add_typer(image_app, name="image")
app.add_typer(rig_app, name="rig")
policy_app.command("serve")(serve)
app.command("server")(server)
app.command("worker")(worker)
app.add_typer(db_app, name="db")
app.add_typer(admin_app, name="admin")


def _version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Evaluate robot policies on benchmarks: per-task scores with intervals, reproducible to the seed."""


def main() -> None:
    sys.exit(app())
