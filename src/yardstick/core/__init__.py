"""The platform's core, in its own types: runs and their episodes, admission and quotas, the ledger's seam,
how a run ends, boards, artifacts and links, accounts and keys, the catalogue, hosted versions' records,
volumes. No contract's documents or codes (the front doors, `positronic` and `sequences`, translate to and
from these), and nothing that starts a process: the execution plane (`worker`) plays what the core queues.
Each module's public surface is its `__all__`."""
