"""Run a command beside busy processes, as on a shared, loaded machine: `make test-loaded` runs `make test`
beside two processes spinning per core. They are started before the command and killed and reaped after it,
however it ends; the exit status is the command's.

    .venv/bin/python bench/beside_busy.py [--per-core N] -- COMMAND ..."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--per-core", type=int, default=2, help="busy processes per core (default 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the command to run after --")
    if args.per_core < 0:
        parser.error("--per-core: must be 0 or more")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    count = args.per_core * cores
    print(f"beside_busy: {count} busy processes ({args.per_core} per core on {cores})", flush=True)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        return subprocess.call(command)
    finally:
        for process in busy:
            process.kill()
        for process in busy:
            process.wait()


if __name__ == "__main__":
    sys.exit(main())
