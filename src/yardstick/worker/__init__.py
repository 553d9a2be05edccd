"""The execution plane: what leases a platform's episodes and plays them, and everything that starts a
process or a box. Above the core (which it calls for the domain: runs, lifecycle, the queue, hosted versions'
records), beside the pages; nothing below it starts a process (an import contract says so).

    platform_worker  PlatformWorker: lease a batch, play it on its player, write what came of each episode
    players          Players: what plays a batch, kept warm — the engine in process, a box for hosted code,
                     a boxed policy server for a deployment, a remote endpoint dialled
    supervisor       Supervisor: a server's worker (and HTTP) processes, replaced when they die, stopped whole
    processes        descendants, dying with a parent, adopting orphans: stopping one stops all it started
    builds           BoxBuilds: a registered version's environment and build check, run fairly between orgs
    fair             FairPool: a few threads shared fairly between owners
    boxes/           the boxes uploaded code runs in (bwrap): what they see and may use, the programs that run
                     inside them, episodes and policy servers played in them, recordings taken out of them

The seams the next executors plug into: `engine.executors.Executor` (episodes of one run: the process pool,
a box today; a container, Ray next) under `players.Player`, and the hosted versions' `core.hosting.Builds`.
"""

from yardstick.worker.builds import BoxBuilds
from yardstick.worker.platform_worker import PlatformWorker
from yardstick.worker.players import Player, Players
from yardstick.worker.supervisor import Supervisor

__all__ = ["BoxBuilds", "PlatformWorker", "Player", "Players", "Supervisor"]
