"""What every boxed Python process of Yardstick's does first: find the user's code, keep a channel of its own.

The bundle's folder is the import root, first on the path, then Yardstick's `seq` (the same order as
`yardstick.sdk.load` gives a file reference). The process's real stdout becomes a private channel for its
answers, and file descriptor 1 is pointed at stderr: whatever the user's code prints lands in the log and
never in the middle of a message.
"""

from __future__ import annotations

import importlib
import io
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any, Final, TextIO

import yardstick
from yardstick.sdk.load import SEQ_SHIM

HANDLER_REF: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_.]*")
HANDLER_RULE: Final = '"module:Class", the module\'s path in the folder with dots (pkg.sub:Class)'


# Where this process imports Yardstick from, when that is a checkout's src/ rather than an installation's
# site-packages: a box imports the same Yardstick as the worker that starts it (an interpreter's editable
# install may name another checkout).
_CHECKOUT: Final = str(Path(yardstick.__file__).resolve().parents[1])
_OWN_SRC: Final = [] if Path(_CHECKOUT).name == "site-packages" else [_CHECKOUT]


def python_path(folder: Path) -> str:
    """PYTHONPATH for a process that runs code from `folder`: the folder, then Yardstick's seq (and the
    checkout this Yardstick runs from, where it runs from one)."""
    return os.pathsep.join([str(folder), SEQ_SHIM, *_OWN_SRC])


def import_root(folder: Path) -> None:
    for path in (SEQ_SHIM, str(folder)):
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)


def private_channel() -> TextIO:
    """This process's stdout, kept for its answers; fd 1 (and sys.stdout) now go to stderr."""
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    # Line by line, as stderr is: what the user's code prints reaches the run's logs as it prints it.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    return os.fdopen(kept, "w", buffering=1, encoding="utf-8")


def private_input() -> TextIO:
    """This process's stdin, kept for the messages it is handed; fd 0 now reads nothing."""
    kept = os.dup(0)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    return os.fdopen(kept, "r", encoding="utf-8")


def load_class(handler_ref: str) -> type:
    """The class "module:Class" names, its module imported from the import root."""
    if not HANDLER_REF.fullmatch(handler_ref):
        raise ValueError(f"handler_ref: {handler_ref!r} is not {HANDLER_RULE}")
    module_name, _, qualname = handler_ref.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        if not hasattr(found, part):
            raise LookupError(f"handler_ref: module {module_name} has no {qualname!r}")
        found = getattr(found, part)
    if not isinstance(found, type):
        raise TypeError(f"handler_ref: {handler_ref} names a {type(found).__name__}, not a class")
    return found


def said(what: str, exc: BaseException, folder: Path) -> str:
    """`what` raised `exc`, and where in the user's files (relative to `folder`) it was raised."""
    where = _where(exc, folder)
    message = str(exc) or type(exc).__name__
    return f"{what} raised {type(exc).__name__}: {message}" + (f" (at {where})" if where else "")


def _where(exc: BaseException, folder: Path) -> str | None:
    root = str(folder.resolve()) + os.sep
    if isinstance(exc, SyntaxError) and exc.filename and os.path.abspath(exc.filename).startswith(root):
        return f"{os.path.relpath(exc.filename, root)}:{exc.lineno}"
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename).startswith(root)
    ]
    if not frames:
        return None
    last = frames[-1]
    return f"{os.path.relpath(last.filename, root)}:{last.lineno}"
