"""How many threads a pool worker's numeric libraries may use.

OpenBLAS (numpy's and scipy's), MKL and OpenMP start one thread per core, and after each parallel call
those threads spin for a while waiting for the next. One worker per core with a thread per core each puts
twice as many busy threads as cores on the machine: measured on two cores with Meta-World, two such
processes each ran 1.5x slower than one alone, and with one thread each they ran as fast as one alone.
So a worker gets its share of the cores, unless the user set a thread count themselves.
"""

from __future__ import annotations

import os

# What the libraries read when they load; a user who set any of them chose for themselves.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def share_of_cores(workers: int, cores: int) -> int:
    """The threads each of `workers` processes may use on `cores` cores: at least one."""
    return max(1, cores // max(1, workers))


def limit_threads(threads: int) -> bool:
    """Cap this process's numeric libraries at `threads`: those loaded already (numpy's OpenBLAS, imported
    with the engine) now, and those loaded later (scipy's, a policy's torch) through the variables they read
    when they load. Does nothing, and returns False, when the environment sets a thread count already."""
    if any(name in os.environ for name in THREAD_VARIABLES):
        return False
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)
    return True
