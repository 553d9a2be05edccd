"""The `yardstick` command's first step: `--version` answered before the CLI (typer, every command's
module: about 3 s of CPU) is imported; anything else goes on to the whole CLI."""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from yardstick import __version__

        print(__version__)
        return
    from yardstick.cli.main import main as whole

    whole()
