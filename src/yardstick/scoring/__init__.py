"""Scoring: per-task and overall scores with confidence intervals, and gates on them.

Depends on nothing else of ours: it takes plain numbers and mappings.
"""

from yardstick.scoring.aggregate import Estimate, Summary, TaskSummary, summarize
from yardstick.scoring.gate import Gate, parse_gate
from yardstick.scoring.intervals import (
    bootstrap_mean,
    stratified_bootstrap_mean_of_means,
    stratified_wilson,
    wilson,
)

__all__ = [
    "Estimate",
    "Gate",
    "Summary",
    "TaskSummary",
    "bootstrap_mean",
    "parse_gate",
    "stratified_bootstrap_mean_of_means",
    "stratified_wilson",
    "summarize",
    "wilson",
]
