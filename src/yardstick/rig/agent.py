"""The rig process's loop: say hello, claim a run, and play its episodes on the robot with the operator.

Each episode: the station shows the scene to lay out; on Start the platform is told the episode began, the
robot goes to its start pose, and the loop runs at the robot's rate on the wall clock — observe, ask the
policy for a chunk when the last one is spent, act one row — until the operator's Stop (`Safety`) or End,
the episode's cap (`Ran out of time`), or the policy failing (the robot is stopped first). The operator's
verdict follows (none within `verdict_wait_s`: `UNSCORED`, never a failure); the folder is written in the
vocabulary's format and landed, and the next episode is shown.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import numpy as np
from eval_vocabulary.episode import ENDED_BY_OPERATOR
from eval_vocabulary.outcome import Outcome

from yardstick.core.runs import EndpointTarget
from yardstick.engine.failures import Failed, FailureKind
from yardstick.engine.remote import RemotePolicy
from yardstick.rig.client import TIMEOUT_S, PlatformLink, Playbook, RigRefused
from yardstick.rig.folders import EpisodeWriter, Verdict
from yardstick.rig.station import Judgement, Station
from yardstick.sdk.episode import Episode
from yardstick.sdk.robots import RobotSpec
from yardstick.wire.address import RemoteEndpoint

log = logging.getLogger(__name__)

# How long the loop waits for Start, a verdict or a claim before it says hello again: within `ONLINE_S`.
HELLO_EVERY_S: Final = 5.0
# How often the cameras are shown while the operator lays the scene out (before Start).
PREVIEW_EVERY_S: Final = 0.2


@dataclass(frozen=True)
class RigOptions:
    verdict_wait_s: float = 300.0  # an operator who walks away: the episode stays UNSCORED
    once: bool = False  # stop after the first run (tests and demos)


class RigAgent:
    def __init__(
        self,
        link: PlatformLink,
        make_robot: Callable[[], Any],
        spec: RobotSpec,
        station: Station,
        options: RigOptions = RigOptions(),
    ) -> None:
        self.link, self.make_robot, self.spec, self.station, self.options = (
            link,
            make_robot,
            spec,
            station,
            options,
        )
        self.quit = threading.Event()
        self.robot: Any = None

    def stop_robot(self) -> None:
        """Stop the robot at once, from any thread (a signal, the console's Stop)."""
        if self.robot is not None:
            self.robot.stop()

    def run(self) -> None:
        """Play runs until `quit` is set (or, `once`, after one run). The robot is built here, in the thread
        that drives it: a simulator's renderer (EGL) belongs to the thread that made it."""
        self.robot = self.make_robot()
        beating = threading.Thread(target=self._heartbeat, name="rig-heartbeat", daemon=True)
        beating.start()
        try:
            self._serve()
        finally:
            self.quit.set()
            self.robot.stop()
            self.robot.close()
            beating.join(timeout=HELLO_EVERY_S + TIMEOUT_S)

    def _heartbeat(self) -> None:
        """Say hello every `HELLO_EVERY_S` while the rig runs, apart from the control loop (which must not
        wait on the network): a rig playing a long episode stays online, and keeps the run it holds."""
        while not self.quit.wait(HELLO_EVERY_S):
            try:
                self.link.hello()
            except (RigRefused, httpx.HTTPError) as exc:
                log.warning("the platform did not hear the rig's hello: %s", exc)

    def _serve(self) -> None:
        self.link.hello()
        while not self.quit.is_set():
            playbook = self.link.claim()
            if playbook is None:
                self.station.waiting("waiting for a rig plan")
                self.quit.wait(HELLO_EVERY_S)
                self.link.hello()
                continue
            self.play(playbook)
            if self.options.once:
                return

    def play(self, playbook: Playbook) -> None:
        policies: dict[str, RemotePolicy] = {}
        try:
            for position, episode in enumerate(playbook.episodes):
                if self.quit.is_set():
                    return
                queue = [_shown(e) for e in playbook.episodes[position + 1 :]]
                try:
                    self._episode(playbook, episode, queue, policies)
                except RigRefused as refused:
                    # The run is no longer this rig's (it was silent too long and another rig took it on,
                    # or it was cancelled): claim afresh rather than play on.
                    log.warning("submission %s: %s", playbook.submission, refused)
                    return
        finally:
            for policy in policies.values():
                policy.close()

    def _episode(
        self,
        playbook: Playbook,
        episode: dict[str, Any],
        queue: list[dict[str, Any]],
        policies: dict[str, RemotePolicy],
    ) -> None:
        self.station.show(_shown(episode), queue, self.stop_robot)
        said = time.monotonic()
        while not self.station.wait_start(PREVIEW_EVERY_S):
            if self.quit.is_set():
                return
            self._preview()
            if time.monotonic() - said >= HELLO_EVERY_S:
                self.link.hello()
                said = time.monotonic()
        self.link.begin(playbook.submission, episode["index"])
        scratch = Path(tempfile.mkdtemp(prefix="ys-rig-"))
        try:
            folder = scratch / f"{episode['index']:06d}"
            verdict = self._play(playbook, episode, folder, policies)
            if verdict is None:
                return  # the rig is shutting down mid-episode: its next claim records the episode System
            self.link.land(playbook.submission, episode["index"], folder)
            log.info("episode %s: %s", episode["index"], verdict.outcome)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _play(
        self,
        playbook: Playbook,
        episode: dict[str, Any],
        folder: Path,
        policies: dict[str, RemotePolicy],
    ) -> Verdict | None:
        spec, robot, station = self.spec, self.robot, self.station
        scene = episode.get("scene") or {}
        robot.move_to(str(scene.get("start_pose") or "nominal"))
        writer = EpisodeWriter(
            folder,
            uid=f"{playbook.submission}-{episode['index']:06d}",
            task=episode.get("instruction") or episode["task_id"],
            benchmark_task=episode["benchmark_task"],
            hz=spec.hz,
            started_wall_ns=time.time_ns(),
            cameras=spec.cameras,
            endpoint_token=episode["endpoint"],
            scene=scene,
            rig=station.rig,
            shape=spec.shape,
            seed=episode.get("seed"),
        )
        period, cap = 1.0 / spec.hz, float(episode.get("cap_s") or 60.0)
        why, fault = "cap", None
        chunk: list[Any] = []
        step = 0
        started = time.monotonic()
        try:
            policy = self._policy(playbook, episode, policies)
            seen = Episode(
                id=f"{playbook.submission}-{episode['index']}",
                task=episode["benchmark_task"],
                description=episode.get("instruction") or "",
                seed=int(episode["index"]),
                trial=int(episode["index"]),
            )
            policy.start(seen)
            while True:
                now = time.monotonic() - started
                if (asked := station.should_end()) is not None:
                    why = asked
                    break
                if self.quit.is_set():
                    robot.stop()
                    writer.abort()
                    return None
                if now >= cap:
                    break
                observation = robot.observe()
                if not chunk:
                    seen.step = step
                    answer = policy.infer([observation], [seen], [seen.seed])[0]
                    if isinstance(answer, Failed):
                        raise answer  # a remote policy hands its failure back in the answer's place
                    seen.inferences += 1
                    chunk = list(np.asarray(answer, dtype=np.float64).reshape(-1, spec.action_dim))
                row = chunk.pop(0)
                if station.should_end() is not None:
                    continue  # Stop came while the policy thought: nothing more is played
                robot.act(row)
                writer.sample(
                    step * period,
                    {f"robot.{name}": value for name, value in observation["state"].items()},
                    dict(observation["images"]),
                    row,
                    wall_ns=time.time_ns(),
                )
                for camera, image in observation["images"].items():
                    station.frame(camera, image)  # the console encodes a view only when the page asks
                step += 1
                _sleep_until(started + step * period, station.should_end)
            policy.finish(seen)
        except Failed as failed:
            robot.stop()  # the robot first: a policy that failed must not leave the arm moving
            why, fault = "policy", failed.reason
        if why == "stop":
            robot.stop()
        # The operator's marks at their own times from Start (a mark may come before the robot's first
        # step, when the policy is slow to answer): the episode ends no earlier than its last mark.
        marks = station.marks()
        for seconds, stage in marks:
            writer.mark(seconds, stage, wall_ns=time.time_ns())
        ended_at = max([step * period, *(seconds + 1e-6 for seconds, _ in marks)])
        station.ended(why)
        judgement = self._judgement()
        robot.stop()
        return self._close(writer, episode, why, fault, judgement, ended_at)

    def _preview(self) -> None:
        """The cameras' views as the robot stands, for the operator laying the scene out."""
        for camera, image in self.robot.observe()["images"].items():
            self.station.frame(camera, image)

    def _judgement(self) -> Judgement | None:
        """The operator's judgement within `verdict_wait_s`, or None (also when the rig is shutting down)."""
        deadline = time.monotonic() + self.options.verdict_wait_s
        while (left := deadline - time.monotonic()) > 0 and not self.quit.is_set():
            judgement = self.station.wait_judgement(min(left, HELLO_EVERY_S))
            if judgement is not None:
                return judgement
            self.link.hello()
        return None

    def _close(
        self,
        writer: EpisodeWriter,
        episode: dict[str, Any],
        why: str,
        fault: str | None,
        judgement: Judgement | None,
        seconds: float,
    ) -> Verdict:
        if judgement is None:
            outcome = Outcome.SAFETY if why == "stop" else Outcome.UNSCORED
        else:
            outcome = judgement.outcome
        if why == "stop" and judgement is not None and judgement.outcome is not Outcome.DISCARDED:
            outcome = Outcome.SAFETY  # Stop is the operator's safety verdict, whatever else was clicked
        items = episode.get("items")
        notes = "; ".join(
            part for part in ((judgement.notes if judgement else None), fault and f"policy: {fault}") if part
        )
        verdict = Verdict(
            outcome=outcome,
            seconds_to_end=seconds,
            ended_by=ENDED_BY_OPERATOR if why in ("stop", "end") else None,
            successful_items=(
                min(judgement.successful_items, items)
                if judgement and items and judgement.successful_items is not None
                else None
            ),
            total_items=items if items else None,
            notes=notes or None,
        )
        writer.close(verdict)
        return verdict

    def _policy(
        self, playbook: Playbook, episode: dict[str, Any], policies: dict[str, RemotePolicy]
    ) -> RemotePolicy:
        token = episode["endpoint"]
        if token not in policies:
            target = EndpointTarget.from_json(token, playbook.endpoints[token])
            if target.address is None:
                raise Failed(
                    f"endpoint {token}: a rig dials a remote policy, not a {target.kind} one",
                    FailureKind.SESSION_REFUSED,
                )
            endpoint = RemoteEndpoint(wire=target.wire, address=target.address)
            policies[token] = RemotePolicy(endpoint, dict(target.params), reply_timeout=30.0)
        return policies[token]


def _shown(episode: dict[str, Any]) -> dict[str, Any]:
    """What the console shows of an episode: not its endpoint's token, so nothing tells policies apart."""
    return {key: value for key, value in episode.items() if key != "endpoint"}


def _sleep_until(deadline: float, interrupted: Callable[[], str | None]) -> None:
    """Wait for the next control period, waking early when the operator ends the episode."""
    while (left := deadline - time.monotonic()) > 0:
        if interrupted() is not None:
            return
        time.sleep(min(left, 0.01))


__all__ = ["RigAgent", "RigOptions", "RigRefused"]
