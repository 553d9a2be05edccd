"""Episodes on a Ray cluster (`yardstick eval run --executor ray`): a head and a second node on this machine,
each its own `ray start` process with one CPU, a temporary folder of their own, auth off. A run plays the
same episodes as the local pool; misused flags are refused by name; and last (it leaves the cluster one node
short), a run whose second node's raylet is SIGKILLed mid-run still gets every episode, each once."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from platform_client.eval_plan import EvalPlan

import toys
from conftest import free_port
from deadlines import patience, until
from hosted_helpers import eval_id_of, processes_mentioning, seq_cli, set_secret
from platform_harness import server_process, toy_plan
from yardstick.engine.ray_executor import RayExecutor, RayPlayer, served_here
from yardstick.engine.results import EpisodeResult, EpisodeSpec
from yardstick.engine.run import RunRequest, evaluate
from yardstick.engine.runtime import Component, Runtime, Work
from yardstick.wire.server.host import PolicyHost
from yardstick.wire.server.serve import PolicyServer, ServeOptions
from yardstick.worker.processes import descendants

ray = pytest.importorskip("ray")

ROOT = Path(__file__).parent.parent
RAY = Path(sys.executable).with_name("ray")
REACH = f"{ROOT / 'examples' / 'reach2d.py'}"
TOYS = f"{Path(__file__).parent / 'toys.py'}"
# Generous for a loaded two-core machine: a Ray node starts in ~3 s idle, several times that under load.
START_S = 180.0
# The platform's episode deadline in its test: far past a toy episode's second on a loaded machine.
WEDGED_S = 30.0


@dataclass
class Cluster:
    address: str
    head: subprocess.Popen[bytes]
    second: subprocess.Popen[bytes]
    env: dict[str, str]

    def raylet_of_second(self) -> int:
        """The second node's raylet (the process its `ray start --block` runs for the node)."""
        for pid in descendants(self.second.pid):
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if name == "raylet":
                return pid
        raise AssertionError("the second node has no raylet")


def _node(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(RAY), "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the node's processes are one group: stopped together
        )


def _stop(node: subprocess.Popen[bytes]) -> None:
    # A node whose raylet was killed sits out SIGTERM's whole wait: a short one, then the whole group killed.
    for sig, wait_s in ((signal.SIGTERM, patience(5)), (signal.SIGKILL, patience(30))):
        try:
            os.killpg(node.pid, sig)
        except ProcessLookupError:
            return
        try:
            node.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _until(what: Callable[[], Any], timeout: float, why: str) -> Any:
    return until(what, timeout, why, every=0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    folder = Path(tempfile.mkdtemp(prefix="ys-ray-", dir="/tmp"))  # short: Ray's sockets live under it
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    port = free_port()
    head = _node(
        ["--head", f"--port={port}", f"--temp-dir={folder}", "--include-dashboard=false"],
        env,
        folder / "head.log",
    )
    second: subprocess.Popen[bytes] | None = None
    try:
        address = f"127.0.0.1:{port}"
        second = _node([f"--address={address}"], env, folder / "second.log")
        os.environ["RAY_AUTH_MODE"] = "disabled"
        _until(lambda: _connected(address), START_S, f"a Ray driver connected to {address}")
        _until(
            lambda: len([n for n in ray.nodes() if n["Alive"]]) == 2,
            START_S,
            f"both nodes alive: {(folder / 'second.log').read_text(errors='replace')[-2000:]}",
        )
        yield Cluster(address, head, second, env)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for node in (second, head):
            if node is not None:
                _stop(node)
        shutil.rmtree(folder, ignore_errors=True)


def _connected(address: str) -> bool:
    try:
        ray.init(address=address, log_to_driver=False, logging_level="warning")
    except ConnectionError:
        return False
    return True


def _played(results: list[EpisodeResult]) -> list[tuple[Any, ...]]:
    return [(r.index, r.task, r.seed, r.trial, r.success, r.steps, r.error) for r in results]


def test_mt10_on_the_cluster_plays_the_episodes_the_local_pool_plays(cluster: Cluster) -> None:
    work = Work(benchmark=Component("mt10"), policy=Component("expert"))
    asked = {"tasks": ["reach-v3", "push-v3"], "trials": 2}
    on_ray = evaluate(RunRequest(work, **asked, ray_address=cluster.address))
    in_pool = evaluate(RunRequest(work, **asked, workers=2))
    assert on_ray.executor == "ray" and len(on_ray.results) == 4
    assert all(r.finished for r in on_ray.results)
    assert _played(on_ray.results) == _played(in_pool.results)
    assert on_ray.cold_starts and len(on_ray.cold_starts) <= 2


def test_replays_and_their_scenes_recorded_on_actors_come_back_into_the_run_folder(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`--record replay` on Ray: each episode's .seqreplay and the scene it names travel back from the actors
    with the episode, into the driver's run folder."""
    from yardstick.engine.recording import Recording
    from yardstick.replay3d import format as replay_format

    recording = Recording(replay=True, folder=str(tmp_path))
    work = Work(benchmark=Component("mt10"), policy=Component("expert"), recording=recording)
    outcome = evaluate(RunRequest(work, tasks=["reach-v3"], trials=2, ray_address=cluster.address))
    assert outcome.executor == "ray" and all(
        r.finished and r.recording_error is None for r in outcome.results
    )
    replays = sorted(tmp_path.glob("episodes/*/replay.seqreplay"))
    assert len(replays) == 2
    for path in replays:
        replay = replay_format.read(path)
        assert replay.frames > 1 and (tmp_path / "scenes" / f"{replay.scene_sha256}.glb").is_file()


def test_the_cli_plays_on_the_cluster_and_refuses_misused_flags(cluster: Cluster, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "yardstick.cli", "eval", "run", "-b", f"{REACH}:Reach2D", "-p",
             f"{REACH}:GoTo", "--trials", "2", *args],
            capture_output=True, text=True, timeout=600, env=cluster.env,
        )  # fmt: skip

    played = cli(
        "--executor", "ray", "--ray-address", cluster.address, "--json", "--out", str(tmp_path / "r")
    )
    assert played.returncode == 0, played.stderr
    report = json.loads(played.stdout)
    assert report["config"]["executor"] == "ray", report["config"]
    assert report["episodes"]["finished"] == 4 and not report["errors"]

    for args, hint, rule in (
        (["--executor", "slurm"], "--executor", "none of pool, ray"),
        (["--ray-address", cluster.address], "--ray-address", "is for --executor ray"),
        (["--executor", "ray", "--in-process"], "--executor ray", "not in this process"),
    ):
        refused = cli(*args)
        said = " ".join(refused.stderr.replace("│", " ").split())  # rich's box wraps the message
        assert refused.returncode == 2 and hint in said and rule in said, refused.stderr
    nobody = cli("--executor", "ray", "--ray-address", f"127.0.0.1:{free_port()}")
    assert nobody.returncode == 1 and "no Ray cluster at" in nobody.stderr, nobody.stderr


def test_compare_on_the_cluster_decides_as_the_pool_does(cluster: Cluster, tmp_path: Path) -> None:
    """`eval compare --until decided` plays its rounds on the cluster: the same pairs, the same verdict."""

    def compare(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "yardstick.cli", "eval", "compare", "-b", f"{TOYS}:Coins", "-p",
             f"{TOYS}:Skill", "-p", f"{TOYS}:Steady", "--until", "decided", "--max-trials", "60", "--json",
             *args],
            capture_output=True, text=True, timeout=900, env=cluster.env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout)["comparison"])

    on_ray = compare("--executor", "ray", "--ray-address", cluster.address, "--out", str(tmp_path / "r"))
    in_pool = compare("--workers", "2", "--out", str(tmp_path / "p"))
    assert on_ray["decided"] and on_ray["better"] == f"{TOYS}:Steady"
    assert on_ray == in_pool


def test_compare_in_rounds_on_the_cluster_builds_each_policys_actors_once(cluster: Cluster) -> None:
    """The rounds of `compare_until` keep each policy's actors (one in two of the cluster's CPUs each, so
    both are placed): each actor starts once for the whole eval, not once a round, and the pairs and the
    verdict are the local pool's."""
    from yardstick.engine.rounds import compare_until
    from yardstick.scoring.compare import PairedTest

    def requests(**where: Any) -> tuple[RunRequest, RunRequest]:
        made = (
            RunRequest(Work(Component(f"{TOYS}:Coins"), Component(f"{TOYS}:{name}")), **where)
            for name in ("Skill", "Steady")
        )
        return next(made), next(made)

    on_ray = compare_until(*requests(ray_address=cluster.address), PairedTest(alpha=0.05), 60)
    in_pool = compare_until(*requests(workers=2), PairedTest(alpha=0.05), 60)
    rounds = len({r.trial // 10 for r in on_ray.a.results})
    assert rounds >= 2, "the eval decided in its first round: nothing to keep between rounds"
    for outcome in (on_ray.a, on_ray.b):
        assert outcome.workers == 1  # one CPU of the two each
        assert len(outcome.cold_starts) == 1, outcome.cold_starts  # built at the first round only
    assert _played(on_ray.a.results) == _played(in_pool.a.results)
    assert _played(on_ray.b.results) == _played(in_pool.b.results)
    assert on_ray.test.decided == in_pool.test.decided
    _until(
        lambda: ray.available_resources().get("CPU", 0) >= 2,
        60,
        "the kept actors were ended after the last round (the cluster's CPUs free again)",
    )


def test_a_policy_on_a_unix_socket_is_played_by_actors_on_this_node_only(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A deployment's box or an image's container serves on a unix socket of the worker's machine: the actors
    that dial it are placed on the worker's node, though the cluster has two (and they play as in process)."""
    socket = tmp_path / "rows.sock"
    host = PolicyHost(toys.Rows, model_id="rows", reference=f"{TOYS}:Rows")
    server = PolicyServer({"rows": host}, ServeOptions(port=None, uds=str(socket))).start()
    try:
        url = f"ws+unix://{socket}/api/v1/session"
        assert served_here(url) and not served_here(f"{TOYS}:Rows")
        work = Work(Component(f"{TOYS}:Tally"), Component(url), startup_timeout_s=30.0)
        player = RayPlayer(work, workers=2, here=True)
        try:
            player.start()
            episodes = [EpisodeSpec(index=i, task="ten", trial=i, seed=i) for i in range(4)]
            results = sorted(player.run(episodes), key=lambda r: r.index)
        finally:
            player.close()
    finally:
        server.stop()
    assert set(player.nodes.values()) == {ray.get_runtime_context().get_node_id()}
    # As many actors as the node has CPUs (one), though two were asked for: the others could not be placed.
    assert player.workers == 1 and len(player.cold_starts) == 1
    runtime = Runtime(Work(Component(f"{TOYS}:Tally"), Component(f"{TOYS}:Rows")))
    try:
        in_process = list(runtime.run(episodes))
    finally:
        runtime.close()
    assert [r.outcome() for r in results] == [r.outcome() for r in in_process]


def _records(artifacts: Path, run: str = "*") -> list[dict[str, Any]]:
    """Every episode record the platform stored (a finished run's; `run`: one run's only)."""
    found = sorted(artifacts.glob(f"{run}/attempts/1/episodes/*/record.json"))
    return [json.loads(path.read_text()) for path in found]


def test_the_platform_on_the_cluster_plays_a_positronic_submission_and_a_sequences_eval(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`yardstick server --executor ray`: one worker process, its episodes on actors across both nodes. A
    submission made with the real Positronic client (two endpoints, videos recorded on the actors and carried
    back) and an eval made with the real `seq` CLI finish with the episodes the platform plays in process. A
    policy that hangs where no alarm reaches fails its run once its episode is past `--episode-timeout`,
    and the worker goes on (the `seq` eval comes after it)."""
    nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    extra = ("--executor", "ray", "--ray-address", cluster.address, "--episode-timeout", str(WEDGED_S))
    with server_process(tmp_path, None, extra=extra, env=cluster.env) as server:
        server.start()
        said = server.log.read_text()
        assert f"episodes: the Ray cluster at {cluster.address}" in " ".join(said.split()), said
        client = server.client("alice")
        plan = EvalPlan.model_validate(
            {
                "request_type": {"type": "private_eval", "org": "acme"},
                "eval": "toys.canvas",
                "endpoints": [
                    {"name": name, "kind": "served", "wire": "websocket", "spec": name}
                    for name in ("rows", "sampler")
                ],
                "episodes_per_endpoint": 2,  # a task
                "transaction_key": "on-ray",
            }
        )
        submission = client.create_submission(plan).submission_id
        view = server.wait(client, submission, timeout=START_S * 2)
        assert view.status.name == "finished", view
        wedged = client.create_submission(toy_plan("wedged-on-ray", spec="wedge", episodes=1)).submission_id
        stuck = server.wait(client, wedged, timeout=START_S * 2)
        assert stuck.status.name == "errored", stuck
        assert f"ran past its {WEDGED_S:g} s of wall-clock time on its Ray actor" in (stuck.reason or "")
        ran = seq_cli(server.url, server.keys["alice"], "eval", "run", "rows", "--benchmark", "toys.tally",
                      "--trials", "2")  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert server.stop() == 0
        assert "SIGTERM received" not in server.log.read_text()  # a clean stop, not a crash's dump

    records = [r for r in _records(server.settings.artifact_root) if r["endpoint"] != "policy"]  # not wedged
    canvas = [r for r in records if r["task"] in ("left", "right")]
    tally = [r for r in records if r["task"] in ("three", "ten")]
    assert len(canvas) == 8 and len(tally) == 4, [(r["task"], r["endpoint"]) for r in records]
    # Played by the cluster's actors (on its nodes), each episode once, as the engine in process plays them.
    assert {r["ray_node"] for r in records} <= nodes and all(r["ray_node"] for r in records)
    assert all(r["error"] is None for r in records), [r["error"] for r in records if r["error"]]
    for endpoint, policy in (("rows", "Rows"), ("sampler", "Sampler")):
        played = sorted(
            (r["task"], r["seed"], r["success"], r["steps"]) for r in canvas if r["endpoint"] == endpoint
        )
        in_process = evaluate(
            RunRequest(Work(Component(f"{TOYS}:Canvas"), Component(f"{TOYS}:{policy}")), trials=2, workers=0)
        )
        assert played == sorted((r.task, r.seed, r.success, r.steps) for r in in_process.results)
    # Each episode's videos came back from its actor into the run's artifacts, described for the pages.
    for record in canvas:
        cameras = sorted(video["camera"] for video in record["videos"])
        assert cameras == ["side", "top"], record["videos"]


def test_a_server_or_worker_refuses_a_misused_executor_by_name(cluster: Cluster, tmp_path: Path) -> None:
    def start(command: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "yardstick.cli", command, "--data-dir", str(tmp_path), *args],
            capture_output=True, text=True, timeout=120, env=cluster.env,
        )  # fmt: skip

    for command, args, hint, rule in (
        ("server", ["--executor", "slurm"], "--executor", "none of pool, ray"),
        ("worker", ["--ray-address", cluster.address], "--ray-address", "is for --executor ray"),
        ("server", ["--executor", "ray", "--workers", "2"], "--workers", "one worker process drives"),
        ("worker", ["--executor", "ray", "--concurrency", "3"], "--concurrency", "add machines"),
        ("worker", ["--executor", "ray", "--ray-address", f"127.0.0.1:{free_port()}"], "--ray-address",
         "no Ray cluster at"),
    ):  # fmt: skip
        refused = start(command, *args)
        said = " ".join(refused.stderr.replace("│", " ").split())  # rich's box wraps the message
        assert refused.returncode == 2 and hint in said and rule in said, (command, args, refused.stderr)


REPLICA_POLICY = """
import os
import uuid

import seq

BOX = uuid.uuid4().hex  # one a box: each box's process is pid 2 in its own namespace

@seq.policy(
    name="replica-policy", gpu="cpu", hz=10, action_chunk_valid_len=1, action_chunk_replan_at=1,
    secrets=[seq.Secret.from_name("replica-token")],
)
class ReplicaPolicy(seq.Policy):
    \"\"\"Says which box serves each episode, and plays the length of its secret. Its one listed size seats
    one session a replica.\"\"\"

    @seq.sample
    def sample(self):
        return [("act", {"t": 0, "seed": 0, "task": "three"})]

    @seq.infer
    @seq.concurrent(sizes=[1])
    def infer(self, observations, *, episode):
        for each in episode:
            if not each.state.get("greeted"):  # an episode's first act
                each.state["greeted"] = True
                print(f"replica box {BOX} says {os.environ['REPLICA_TOKEN']}", flush=True)
        return [[[float(len(os.environ["REPLICA_TOKEN"]))]] for _ in observations]
"""
TOKEN = "replica-secret-0451"
# In the command line of a box serving this deployment (`policy serve policy:ReplicaPolicy --uds-fd N`), and
# of no other test's box.
BOXED_SERVER = "serve policy:ReplicaPolicy"


def test_a_deployment_is_served_by_replicas_on_the_cluster_its_sessions_spread_over_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`yardstick server --executor ray` and a deployment evaluated with the real `seq` CLI on a catalogue
    benchmark: its scaling (one session a replica, as its one batch size says) asks for a replica for each
    of the cluster's two CPUs, one on each node, and the episodes' actors are spread over both nodes, each
    dialling the replica on its own. Each box was handed the deployment's secret (it plays its length) and
    what it printed reaches the eval's logs, the secret masked. `seq policy set ... max_gpus=1` then holds
    it to one replica: every episode on that replica's node."""
    nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    folder = tmp_path / "replica-policy"
    folder.mkdir()
    (folder / "policy.py").write_text(REPLICA_POLICY)
    extra = ("--executor", "ray", "--ray-address", cluster.address)
    with server_process(tmp_path, None, extra=extra, env=cluster.env) as server:
        server.start()
        key = server.keys["alice"]

        def ok(*args: str) -> str:
            done = seq_cli(server.url, key, *args)
            assert done.returncode == 0, (args, done.stdout + done.stderr)
            return done.stdout

        def evaluated() -> tuple[list[dict[str, Any]], str]:
            before = set(server.settings.artifact_root.glob("[!.]*"))
            ran = ok("eval", "run", "replica-policy", "--benchmark", "toys.tally", "--trials", "2")
            eval_id = eval_id_of(ran)
            (run,) = set(server.settings.artifact_root.glob("[!.]*")) - before
            return _records(run.parent, run.name), ok("eval", "logs", eval_id, "--side", "policy")

        set_secret(server.url, key, "replica-token", "REPLICA_TOKEN", TOKEN)
        ok("deploy", str(folder))
        # The replicas' boxes, seen while the eval plays.
        seen, done = threading.Event(), threading.Event()

        def watch() -> None:
            while not done.is_set():
                if processes_mentioning(BOXED_SERVER):
                    seen.set()
                done.wait(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        spread, spread_logs = evaluated()
        done.set()
        watcher.join(timeout=60)
        ok("policy", "set", "replica-policy", "max_gpus=1")
        held, held_logs = evaluated()
        assert server.stop() == 0
    assert seen.is_set(), "no replica's box was seen while the eval played"
    _until(lambda: not processes_mentioning(BOXED_SERVER), START_S, "the replicas' boxes ended")

    for records in (spread, held):
        assert len(records) == 4 and all(r["error"] is None for r in records), records
        # Every step played the secret's length: each box was handed the secret.
        assert all(r["metrics"]["total"] == r["steps"] * len(TOKEN) for r in records), records
    assert {r["ray_node"] for r in spread} == nodes
    assert len({r["ray_node"] for r in held}) == 1
    boxes = [set(re.findall(r"replica box ([0-9a-f]{32})", logs)) for logs in (spread_logs, held_logs)]
    assert [len(found) for found in boxes] == [2, 1], (spread_logs, held_logs)
    for logs in (spread_logs, held_logs):
        assert TOKEN not in logs and "says ***" in logs


def test_a_node_killed_mid_run_has_its_episodes_played_again_elsewhere_each_once(cluster: Cluster) -> None:
    """Each episode takes half a second (the policy thinks 100 ms a step), so a quarter of a second after a
    result both actors are mid-episode. The second node's actor dies with its raylet (its process checks
    for its raylet each second) before the run ends: its episode is played again on the head."""
    work = Work(benchmark=Component(f"{TOYS}:Tally"), policy=Component(f"{TOYS}:SlowRows", {"delay": 0.1}))
    request = RunRequest(work, tasks=["ten"], trials=16, ray_address=cluster.address)
    landed: list[int] = []
    a_result = threading.Event()
    executor = RayExecutor(cluster.address)

    def on_result(result: EpisodeResult) -> None:
        landed.append(result.index)
        a_result.set()

    def kill_mid_episode() -> None:
        # Both actors built (one on each node) and three episodes in: then a quarter of a second after the
        # next result, both are mid-episode.
        _until(lambda: len(executor.cold_starts) == 2 and len(landed) >= 3, START_S, "both actors playing")
        a_result.clear()
        if a_result.wait(timeout=START_S):
            threading.Event().wait(0.25)
            os.kill(cluster.raylet_of_second(), signal.SIGKILL)
            killed.set()

    killed = threading.Event()
    killer = threading.Thread(target=kill_mid_episode, daemon=True)
    killer.start()
    outcome = evaluate(request, executor=executor, on_result=on_result)
    killer.join(timeout=60)
    assert killed.is_set() and not killer.is_alive()
    assert executor.replayed >= 1, "the second node's episode was not played again"
    assert sorted(landed) == sorted(set(landed)), "an episode landed twice"
    assert len(landed) == len(outcome.planned) == 16
    assert all(r.finished and r.error is None for r in outcome.results), [
        r.error for r in outcome.results if r.error
    ]
    in_pool = evaluate(RunRequest(work, tasks=["ten"], trials=16, workers=2))
    assert _played(outcome.results) == _played(in_pool.results)
