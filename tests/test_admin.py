"""What an administrator may put in the catalogue: refusals name the problem and change nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from yardstick.core import admin
from yardstick.core.install import open_install
from yardstick.core.settings import Settings
from yardstick.store.models import Eval

TOYS = Path(__file__).parent / "toys.py"


def test_an_eval_whose_task_ids_break_the_contract_is_refused(tmp_path: Path) -> None:
    platform = open_install(Settings(data_dir=tmp_path))
    try:
        # Gymnasium's ids (Pendulum-v1) are not task ids as the contract writes them (lowercase).
        pendulum = "task 'Pendulum-v1' of gym:Pendulum-v1: not a task id"
        with pytest.raises(admin.AdminError, match=pendulum), platform.db.writing() as session:
            admin.create_eval(session, "gym.pendulum", "gym:Pendulum-v1")
        # A benchmark the catalogue cannot build is refused the same way, with its reason.
        cartpole = r"benchmark 'gym:CartPole-v1': .* Box action space"
        with pytest.raises(admin.AdminError, match=cartpole), platform.db.writing() as session:
            admin.create_eval(session, "gym.cartpole", "gym:CartPole-v1")
        with platform.db.writing() as session:
            admin.create_eval(session, "toys.tally", f"{TOYS}:Tally")
        with platform.db.reading() as session:
            slugs = set(session.execute(select(Eval.slug)).scalars())
        assert slugs.isdisjoint({"gym.pendulum", "gym.cartpole"}) and "toys.tally" in slugs
    finally:
        platform.close()
