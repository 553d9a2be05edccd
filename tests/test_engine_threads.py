"""A pool worker's share of the cores for its numeric libraries' threads (yardstick.engine.threads)."""

from __future__ import annotations

import os
import subprocess
import sys

from yardstick.engine.threads import THREAD_VARIABLES, share_of_cores

PROBE = """
import numpy
from threadpoolctl import threadpool_info
from yardstick.engine.threads import limit_threads
limited = limit_threads(1)
import os
print(limited, max(i["num_threads"] for i in threadpool_info()), os.environ.get("OMP_NUM_THREADS"))
"""


def _probe(**env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_each_worker_gets_its_share_of_the_cores_and_at_least_one() -> None:
    assert share_of_cores(2, 2) == 1
    assert share_of_cores(1, 2) == 2
    assert share_of_cores(3, 8) == 2
    assert share_of_cores(4, 2) == 1
    assert share_of_cores(0, 2) == 2


def test_limit_caps_the_libraries_already_loaded_and_tells_those_loaded_later() -> None:
    limited, most_threads, omp = _probe()
    assert limited == "True"
    assert most_threads == "1"  # numpy's OpenBLAS, loaded before the limit
    assert omp == "1"  # read by a library loaded later (a policy's torch)


def test_a_thread_count_the_user_set_is_left_as_it_is() -> None:
    limited, _, omp = _probe(OPENBLAS_NUM_THREADS="2")
    assert limited == "False"
    assert omp == "None"
