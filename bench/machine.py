"""What every bench prints first: the machine's cores and how busy others keep them (on a shared machine the
figures move with the load)."""

from __future__ import annotations

import os


def machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min) at the start"
