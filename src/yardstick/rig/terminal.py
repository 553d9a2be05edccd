"""The station console in a terminal (`yardstick rig run --terminal`), for a rig with no screen beside it but
a keyboard: the same `Station` as the page, one line a command.

    s                 Start (the scene laid out)
    x                 STOP: the robot stops at once, the episode is Safety
    e                 End the episode
    1-5               while playing: mark the ladder's rung; while judging: the verdict (Success, Fail, Ran
                      out of time, Safety, System), optionally followed by the items delivered and notes:
                      `1 1 clean grasp`
    d [notes]         Discard the attempt
    ?                 these lines again

What the terminal prints of an episode is what the page shows: its instruction and scene, never a policy.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final, TextIO

from eval_vocabulary.outcome import VERDICTS, Outcome
from eval_vocabulary.progress import LADDER

from yardstick.rig.station import Judgement, Station

HELP: Final = (
    "keys: s Start · x STOP · e End · 1-5 a rung while playing, a verdict while judging "
    "(`1 ITEMS NOTES`) · d Discard · ? help"
)
WATCH_EVERY_S: Final = 0.2


class TerminalConsole:
    def __init__(self, station: Station, read: TextIO, say: Callable[[str], None]) -> None:
        self.station, self.read, self.say = station, read, say
        self.done = threading.Event()
        self._threads = [
            threading.Thread(target=self._commands, name="terminal-commands", daemon=True),
            threading.Thread(target=self._watch, name="terminal-watch", daemon=True),
        ]

    def start(self) -> None:
        self.say(HELP)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self.done.set()

    def _commands(self) -> None:
        for line in self.read:
            if self.done.is_set():
                return
            said = self.command(line.strip())
            if said:
                self.say(said)

    def command(self, line: str) -> str:
        """Do what `line` asks of the station; what to tell the operator."""
        if not line:
            return ""
        word, _, rest = line.partition(" ")
        phase = self.station.snapshot()["phase"]
        if word == "?":
            return HELP
        if word == "s":
            return "started" if self.station.start() else "Start is not possible now"
        if word == "x":
            return "STOPPED" if self.station.stop() else "nothing is playing"
        if word == "e":
            return "ended" if self.station.end() else "nothing is playing"
        if word == "d":
            return self._judge(Judgement(Outcome.DISCARDED, notes=rest.strip() or None))
        if word in {"1", "2", "3", "4", "5"} and phase == "playing":
            stage = LADDER[int(word) - 1]
            return f"marked {stage}" if self.station.mark(stage) else "the ladder is not open now"
        if word in {"1", "2", "3", "4", "5"} and phase == "verdict":
            items_text, _, notes = rest.strip().partition(" ")
            items: int | None = None
            if items_text:
                if not items_text.isdigit():
                    return f"items: {items_text!r} is not a whole number (`{word} ITEMS NOTES`)"
                items = int(items_text)
            return self._judge(Judgement(VERDICTS[int(word) - 1], items, notes.strip() or None))
        return f"{line!r}: not a command now ({HELP})"

    def _judge(self, judgement: Judgement) -> str:
        if self.station.judge(judgement):
            return f"verdict: {judgement.outcome}"
        return "no episode waits for a verdict now"

    def _watch(self) -> None:
        """Print each phase as it comes: the episode to lay out, that it plays, that it wants a verdict."""
        seen: tuple[Any, ...] = ()
        while not self.done.wait(WATCH_EVERY_S):
            state = self.station.snapshot()
            episode = state["episode"] or {}
            now = (state["phase"], episode.get("index"))
            if now == seen:
                continue
            seen = now
            self.say(_describe(state))


def _describe(state: dict[str, Any]) -> str:
    phase, episode = state["phase"], state["episode"] or {}
    if phase == "idle":
        return f"phase: idle — {state['note']}"
    if phase == "layout":
        scene = ", ".join(
            f"{key.replace('_', ' ')}: {value}"
            for key, value in (episode.get("scene") or {}).items()
            if value not in (None, [], {})
        )
        items = f", items: {episode['items']}" if episode.get("items") else ""
        return (
            f"phase: layout — episode {episode.get('index')}: {episode.get('instruction')} "
            f"({scene}{items}); lay it out, then s"
        )
    if phase == "playing":
        return "phase: playing — x STOP, 1-5 the ladder, e End"
    verdicts = " ".join(f"{n}={v}" for n, v in enumerate(state["verdicts"], start=1))
    return f"phase: verdict — ended by {episode.get('why_ended')}; {verdicts}; d Discard"
