"""Hostile tenants, what a box may do: org `globex` (the rival) deploys code that takes what it can — every
process, all the memory, the disk, the worker for ever, the builders — or lies to the platform about what it
did, with the real `seq` CLI against a `yardstick server` whose boxes hold 1 GiB and 128 processes and whose
episodes may take 12 s of wall-clock time.

Each attack fails its own episode with a reason saying what it hit; the lab (`acme`) deploys and evaluates
as before; no box outlives its episode, build or cancel; the robot time counted is the platform's own
arithmetic; installs run no tenant code and take nothing but names from the index; and stopping the server
leaves no process of it, defunct or alive."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hosted_helpers import needs_bwrap, processes_mentioning
from hostile_helpers import LAB, LAB_BENCH, RIVAL, Tenants, tenants, until

pytestmark = needs_bwrap

CONFIGS = [("sqlite", "home"), ("postgresql", "var")]
EPISODE_TIMEOUT_S = 12
BOX_PROCESSES = 128
LIMITS = (
    "--box-memory",
    "1",
    "--box-processes",
    str(BOX_PROCESSES),
    "--episode-timeout",
    str(EPISODE_TIMEOUT_S),
)


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    """A TCP server of this machine's that whatever a tenant's install might run would report home to."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    yield server
    server.close()


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{db}-{place}" for db, place in CONFIGS])
def hostile(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, listener: socket.socket
) -> Iterator[Tenants]:
    db, place = request.param
    tmp = tmp_path_factory.mktemp(f"{db}-{place}")
    links = tmp / "find-links"
    links.mkdir()
    sdist_only(links, listener.getsockname()[1])
    # The index the server's installs see has a package that comes as source only (a build would run it).
    extra = (*LIMITS, "--call-timeout", "3")
    with tenants(db, place, tmp, extra=extra, env={"PIP_FIND_LINKS": str(links)}) as found:
        yield found


def bench(
    name: str, step: str, *, head: str = "", seeds: int = 1, max_seconds: float = 60.0
) -> dict[str, str]:
    """A benchmark whose one task's step is `step` (a function body of `self`), after module code `head`."""
    body = "\n".join("        " + line for line in step.strip().splitlines())
    return {
        "benchmark.py": f"""\
import os
import sys

import seq

# Which program of the platform's imports this file: its build check, or an eval's player.
RUNNER = str(getattr(sys.modules["__main__"], "__spec__", None))
{head}

@seq.benchmark(name={name!r}, tasks={{"a": "an attack"}}, seeds=range({seeds}), max_seconds={max_seconds})
class Attack:
    @seq.reset
    def reset(self, task, seed):
        self.t = 0
        return {{"x": 0.0, "target": 0.0}}

    @seq.step
    def step(self, action):
        self.t += 1
        if "play_runner" not in RUNNER:  # the platform's build check: the attack is for the eval
            return {{"x": 0.0, "target": 0.0}}, True, True
{body}
"""
    }


def failed_with(hostile: Tenants, eval_id: str) -> str:
    """The reason the rival's eval failed, as the rival reads it."""
    report = hostile.report(RIVAL, eval_id)
    assert report["status"] in ("failed", "canceled"), report
    return str(report.get("error") or report)


def served(hostile: Tenants, marker: str) -> list[int]:
    """The processes under this suite's server whose command line holds `marker` (another suite on the
    machine may play the same benchmarks at once; the server adopts its orphans, so none escapes)."""
    server = hostile.server.process
    assert server is not None
    return processes_mentioning(marker, under=server.pid)


def boxes_of(hostile: Tenants, name: str) -> list[int]:
    """The processes of the rival's benchmark `name` alive now."""
    return served(hostile, f"/benchmark/{name}/")


def lab_still_works(hostile: Tenants) -> None:
    _, said = hostile.run_eval(LAB, "reach-policy", "lab-bench", "--trials", "1")
    assert "success: overall 100.0%" in said, said


def test_a_fork_bomb_stops_at_the_boxs_process_limit_and_fails_its_episode(hostile: Tenants) -> None:
    hostile.deploy(RIVAL, "bomb", bench("bomb", BOMB))
    counts: list[int] = []
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            counts.append(len(boxes_of(hostile, "bomb")))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        eval_id, _ = hostile.run_eval(RIVAL, "reach-policy", "bomb")
    finally:
        watching.set()
        watcher.join()
    reason = failed_with(hostile, eval_id)
    assert "the box said no" in reason or "killed" in reason, reason
    assert 0 < max(counts) <= BOX_PROCESSES, max(counts)  # seen under the server, and never past the limit
    until(lambda: boxes_of(hostile, "bomb") == [], 15, "the failed run's box and its children are gone")
    lab_still_works(hostile)


BOMB = """
import time
forked = 0
try:
    while True:
        if os.fork() == 0:
            while True:  # every child forks too, until the box says no, then sleeps
                try:
                    os.fork()
                except OSError:
                    time.sleep(600)
        forked += 1
except OSError as exc:
    raise RuntimeError(f"forked {forked} before the box said no: {exc}") from None
"""


@pytest.mark.parametrize(
    ("attack", "step"),
    [
        ("memory", 'hog = b"x" * (20 * 1024**3)\nreturn {"x": float(len(hog)), "target": 0.0}, True, True'),
        (
            "disk",
            'with open("/tmp/fill", "wb") as out:\n    while True:\n        out.write(b"x" * (64 * 1024**2))',
        ),
    ],
)
def test_twenty_gigabytes_or_a_disk_filling_write_end_at_the_boxs_memory(
    hostile: Tenants, attack: str, step: str
) -> None:
    before = _size(hostile.data)
    hostile.deploy(RIVAL, attack, bench(attack, step))
    eval_id, _ = hostile.run_eval(RIVAL, "reach-policy", attack)
    reason = failed_with(hostile, eval_id)
    assert "memory limit (1 GiB)" in reason or "No space left" in reason, reason
    assert _size(hostile.data) - before < 20 * 1024**2  # the machine's disk took none of it
    until(lambda: boxes_of(hostile, attack) == [], 15, "the failed run's box is gone")
    lab_still_works(hostile)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


# Deaf to the call's alarm, and telling the platform through the runner's own beat that no call is in
# progress: only a deadline kept outside the box can end it.
SILENT = """
import gc
import signal
import threading
import time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})

def quiet():
    beacons = [o for o in gc.get_objects() if type(o).__name__ == "_Beacon"]
    while True:
        for beacon in beacons:
            beacon.value = 0.0
        time.sleep(0.01)

threading.Thread(target=quiet, daemon=True).start()
while True:
    time.sleep(1)
"""


def test_an_episode_deaf_to_its_alarm_and_silencing_its_beacon_is_cut_at_its_wall_clock_deadline(
    hostile: Tenants,
) -> None:
    hostile.deploy(RIVAL, "silent", bench("silent", SILENT))
    # Deaf and silent, it would play forever: the eval ends only by the wall-clock cut, which says so.
    eval_id, _ = hostile.run_eval(RIVAL, "reach-policy", "silent")
    reason = failed_with(hostile, eval_id)
    assert f"ran past its {EPISODE_TIMEOUT_S} s of wall-clock time" in reason, reason
    until(lambda: boxes_of(hostile, "silent") == [], 15, "the cut episode's box is gone")


def test_cancel_kills_a_running_box_at_once(hostile: Tenants) -> None:
    hostile.deploy(RIVAL, "stuck", bench("stuck", SILENT))
    done = hostile.seq(RIVAL, "eval", "run", "reach-policy", "--benchmark", "stuck", "--no-wait")
    eval_id = done.stdout.split("eval ", 1)[1].split()[0].rstrip(":,")
    until(lambda: boxes_of(hostile, "stuck") != [], 30, "the eval's box starts")
    hostile.ok(RIVAL, "eval", "cancel", eval_id)
    until(lambda: boxes_of(hostile, "stuck") == [], 5, "the cancelled eval's box is gone")
    report = hostile.report(RIVAL, eval_id)
    assert report["status"] == "canceled"
    # The cancel ended the box, not the episode's wall-clock deadline (whose cut says so).
    assert "wall-clock" not in json.dumps(report), report


# The benchmark's module rewrites what the runner sends of each episode: a quarter of its robot time.
UNDERSTATED = """
if "play_runner" in RUNNER:
    from yardstick.engine.results import EpisodeResult

    _sent = EpisodeResult.to_dict

    def _understated(self):
        sent = _sent(self)
        sent["robot_seconds"] = sent["robot_seconds"] / 4
        return sent

    EpisodeResult.to_dict = _understated
"""


def test_the_robot_time_counted_is_the_platforms_own_arithmetic_not_the_boxs_word(hostile: Tenants) -> None:
    step = 'return {"x": 0.0, "target": 0.0}, self.t >= 20, True'
    hostile.deploy(RIVAL, "understated", bench("understated", step, head=UNDERSTATED))
    eval_id, said = hostile.run_eval(RIVAL, "reach-policy", "understated", "--trials", "2")
    assert "success: overall 100.0% (n=2)" in said, said
    rows = hostile.rows(RIVAL, eval_id)
    # 20 steps of a 10 Hz policy are 2 s of robot time, whatever the box said (0.5 s).
    assert [(row["steps"], float(row["seconds"])) for row in rows] == [("20", 2.0), ("20", 2.0)], rows


def test_one_orgs_slow_builds_do_not_hold_another_orgs_deploy(hostile: Tenants) -> None:
    slow = "import time\nif 'check_runner' in RUNNER:\n    time.sleep(600)\n"
    # Both at once, as a rival would (a registration waits up to 20 s for its build to end before it answers).
    folders = [hostile.folder(n, bench(n, "return {}, True, True", head=slow)) for n in ("slow-a", "slow-b")]
    deploys = [
        threading.Thread(target=hostile.ok, args=(RIVAL, "deploy", str(f), "--no-wait")) for f in folders
    ]
    for deploy in deploys:
        deploy.start()
    until(lambda: len(served(hostile, "check_runner benchmark")) >= 1, 30, "the rival's builds start")
    # The deploy waits for its build, done while the rival's (ten minutes each) are still building: it did
    # not queue behind them.
    hostile.deploy(LAB, "lab-bench-2", {"benchmark.py": LAB_BENCH.replace('"lab-bench"', '"lab-bench-2"')})
    for deploy in deploys:
        deploy.join()
    listed = hostile.ok(RIVAL, "benchmark", "ls")
    assert listed.count("building") >= 2, listed  # the rival's both still building (one waits its turn)
    mine = [line for line in hostile.ok(LAB, "benchmark", "ls").splitlines() if "lab-bench-2" in line]
    assert mine and "building" not in mine[0], mine
    for name in ("slow-a", "slow-b"):
        hostile.ok(RIVAL, "benchmark", "cancel", name)
    until(lambda: served(hostile, "/benchmark/slow-") == [], 60, "a cancelled build's box is gone")


def test_installs_take_names_from_the_index_and_build_no_source(
    hostile: Tenants, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    image = "seq.Image.debian_slim().uv_pip_install({!r})"
    for requirement, words in [
        (f"evil @ http://127.0.0.1:{port}/evil-1.0-py3-none-any.whl", "names a URL"),
        ("evil @ file:///etc/passwd", "names a URL"),
        ("evil @ git+https://example.com/evil.git", "names a URL"),
        (f"{SDIST}==1.0", "no wheel"),
    ]:
        files = bench("installs", "return {}, True, True")
        files["benchmark.py"] = files["benchmark.py"].replace(
            "tasks=", f"image={image.format(requirement)}, tasks="
        )
        done = hostile.seq(RIVAL, "deploy", str(hostile.folder("installs", files)))
        said = done.stdout + done.stderr
        assert words in said and done.returncode != 0, said
        if SDIST in requirement:
            assert SDIST in said, said  # the refusal names the package
    try:
        listener.accept()[0].close()
        reached = True
    except OSError:
        reached = False
    assert not reached  # nothing was fetched from this machine's server, and the sdist's setup.py never ran


SDIST = "yardstick-hostile-sdist-only"


def sdist_only(folder: Path, port: int) -> None:
    """A package on the index as source only, whose setup.py would report home (to `port`) if it ever ran."""
    import io
    import tarfile

    setup = (
        f"import socket\nsocket.create_connection(('127.0.0.1', {port})).close()\n"
        "from setuptools import setup\nsetup()\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in [
            ("setup.py", setup),
            ("PKG-INFO", f"Metadata-Version: 2.1\nName: {SDIST}\nVersion: 1.0\n"),
        ]:
            data = text.encode()
            info = tarfile.TarInfo(f"{SDIST.replace('-', '_')}-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (folder / f"{SDIST.replace('-', '_')}-1.0.tar.gz").write_bytes(buffer.getvalue())
