from __future__ import annotations

import os
from pathlib import Path

import pytest

# Headless rendering for every test that builds a simulator.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

TOYS = Path(__file__).parent / "toys.py"


def toy(name: str) -> str:
    """A reference to a class of tests/toys.py that a fresh worker process can load."""
    return f"{TOYS}:{name}"


@pytest.fixture
def toys_ref() -> object:
    return toy
