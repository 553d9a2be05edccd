"""Find a class (or function) by reference: "package.module:Name" or "path/to/file.py:Name"."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Any

from yardstick.sdk.errors import LoadError

REFERENCE_RULE = '"package.module:Name" or "path/to/file.py:Name"'

# Yardstick's own `seq` (the Sequences SDK's authoring API, in yardstick/hosted/shim), found by its place in
# this package rather than imported: authoring imports nothing above it. A file written for that SDK
# (`import seq`) loads with it. It goes on the path after the file's own folder (a `seq.py` of the user's
# wins, as it would for `python file.py`) and before site-packages, so it wins over an installed sequence-ai:
# the real SDK's decorators build registrations only its own platform reads, and the same file must mean the
# same benchmark here, in a pool worker and in a box, whatever else the machine has installed.
SEQ_SHIM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "hosted", "shim")


def load_object(reference: str) -> Any:
    """The object `reference` names. A file path is imported as a module of its own, its folder first on
    the import path so that the file's sibling modules import as they do when it runs as a script."""
    if not isinstance(reference, str) or reference.count(":") < 1:
        raise LoadError(f"{reference!r}: a reference is {REFERENCE_RULE}")
    where, _, attribute = reference.rpartition(":")
    if not where or not attribute:
        raise LoadError(f"{reference!r}: a reference is {REFERENCE_RULE}")
    module = _module_of_file(where) if where.endswith(".py") else _module_named(where, reference)
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise LoadError(f"{reference!r}: {where} has no {attribute!r}")
        found = getattr(found, part)
    return found


def _module_named(name: str, reference: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and name.startswith(exc.name):
            raise LoadError(f"{reference!r}: no module named {exc.name!r}") from None
        raise LoadError(f"{reference!r}: importing {name} failed: {exc}") from exc
    except Exception as exc:  # the user's module raised while importing
        raise LoadError(f"{reference!r}: importing {name} raised {type(exc).__name__}: {exc}") from exc


def _module_of_file(path: str) -> Any:
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise LoadError(f"{path}: no such file")
    # One module per file, named after its path, so two files called policy.py don't collide and a
    # second load (another worker in this process) reuses the first.
    name = "yardstick_user_" + hashlib.sha1(full.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    folder = os.path.dirname(full)
    if SEQ_SHIM not in sys.path and os.path.isdir(SEQ_SHIM):
        sys.path.insert(0, SEQ_SHIM)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise LoadError(f"{path}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise LoadError(f"{path}: importing it raised {type(exc).__name__}: {exc}") from exc
    return module


def source_dir(obj: Any) -> str:
    """The folder of the file `obj` is defined in: where its config files are read from."""
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    file = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(file)) if file else os.getcwd()
