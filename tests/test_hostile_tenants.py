"""Hostile tenants, what a box sees: org `globex` (the rival) deploys code that looks everywhere and hands
back what it finds, against org `acme` (the lab) on the same `yardstick server`, with the real `seq` CLI.

On SQLite and PostgreSQL, with the data folder in /tmp, in a home folder and under /var: nothing of the
platform's data folder, another org's code, the machine's files, sockets, network or the server's
environment is readable from a box; a box's recordings cannot be swapped for links, FIFOs or files of the
platform's; a remote endpoint on the platform's own machine, and a bundle name past the filesystem's limits,
are refused naming the field; and nothing of the lab's or the platform's secrets reaches anything the
rival can read."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from platform_client.errors import PlatformError
from platform_client.eval_plan import EvalPlan

from deadlines import give_up_at
from hosted_helpers import needs_bwrap, processes_mentioning
from hostile_helpers import HOST_MARKER, PLACES, RIVAL, Tenants, tenants
from yardstick.worker.processes import descendants, zombie_children

pytestmark = needs_bwrap

# Each place a data folder is kept once; SQLite, whose database file lies in that folder, at two of them,
# PostgreSQL at the third. test_hostile_limits.py pairs them the other way.
CONFIGS = [("sqlite", "tmp"), ("postgresql", "home"), ("sqlite", "var")]
assert {place for _, place in CONFIGS} == set(PLACES)


@pytest.fixture(scope="module", params=CONFIGS, ids=[f"{db}-{place}" for db, place in CONFIGS])
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    db, place = request.param
    with tenants(db, place, tmp_path_factory.mktemp(f"{db}-{place}")) as found:
        yield found


# Each task one look, each metric what it found (0: nothing). The rival learns where the data folder is as an
# attacker would (its own code's mount names it); the test also hands it the path, to be sure of the answer.
PROBE = """\
import ctypes
import glob
import os
import socket
import stat

import seq

LOOKS = ["data_folder", "other_code", "environments", "host_files", "host_sockets", "network", "identity",
         "writes"]


@seq.benchmark(name="probe", tasks={name: name for name in LOOKS}, seeds=[0], max_seconds=1.0)
class Probe:
    def __init__(self, data: str = "", lab: str = "", port: int = 0, marker: str = ""):
        self.data, self.lab, self.port, self.marker = data, lab, port, marker

    @seq.reset
    def reset(self, task, seed):
        self.task = task
        return {"x": 0.0, "target": 0.0}

    @seq.step
    def step(self, action):
        return {"x": 0.0, "target": 0.0}, True, True, getattr(self, self.task)()

    def data_folder(self):
        # Where the data folder is, as this box's own mounts tell it; what it holds beside this code's folder.
        own = os.path.dirname(os.path.abspath(__file__))
        mounted = [line.split()[4] for line in open("/proc/self/mountinfo")]
        named = [point for point in mounted if point.startswith(self.data)]
        seen = read = 0
        for name in ("secret.key", "yardstick.db", "yardstick.db-wal", "artifacts", "volumes"):
            path = os.path.join(self.data, name)
            seen += os.path.lexists(path)
            read += _read(path)
        return {"named": float(bool(named)), "seen": float(seen), "read": float(read),
                "own": float(own.startswith(self.data))}

    def other_code(self):
        # Every folder between the data folder and this code, listed: only this code's own chain shows.
        own = os.path.dirname(os.path.abspath(__file__))
        others = 0
        folder = own
        while self.data and folder.startswith(self.data) and folder != self.data:
            parent = os.path.dirname(folder)
            others += len([n for n in _names(parent) if os.path.join(parent, n) != folder])
            folder = parent
        return {"others": float(others), "lab": float(os.path.lexists(self.lab)), "lab_read": float(_read(
            os.path.join(self.lab, "benchmark.py")))}

    def environments(self):
        found = b""
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                for what in ("environ", "cmdline"):
                    try:
                        found += open(f"/proc/{pid}/{what}", "rb").read()
                    except OSError:
                        pass
        database = b"postgresql://" in found or b"sqlite:" in found
        processes = len([p for p in os.listdir("/proc") if p.isdigit()])
        return {"marker": float(self.marker.encode() in found), "database": float(database),
                "processes": float(processes)}

    def host_files(self):
        # (/var, /root, /home show where its own code or interpreter lies under them: only that path shows.)
        paths = ["/etc/shadow", "/etc/pip.conf", "/etc/ssh", "/root/.bashrc", "/root/.pyenv/version",
                 "/var/lib", "/var/log", "/run", "/var/run", "/opt", "/srv", "/mnt", "/work/main/README.md",
                 "/boot", "/etc/hostname", "/proc/1/root/etc/shadow"]
        seen = sum(os.path.lexists(p) for p in paths)
        return {"seen": float(seen), "read": float(sum(_read(p) for p in paths))}

    def host_sockets(self):
        tried = ["/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432",
                 "/run/mysqld/mysqld.sock", "/var/run/redis/redis-server.sock", "/run/dbus/system_bus_socket"]
        reached = 0
        for path in tried:
            reached += _connects(socket.AF_UNIX, path)
        for name in ("\\0/tmp/.X11-unix/X0", "\\0/org/freedesktop/systemd1/notify"):
            reached += _connects(socket.AF_UNIX, name)
        # Every socket file the box can see (but among the system's and Python's files): its own policy's.
        sockets = 0
        for top in [os.path.join("/", n) for n in os.listdir("/") if n not in ("usr", "proc", "sys")]:
            for folder, inside, files in os.walk(top):
                inside[:] = [n for n in inside if n not in ("site-packages", "lib")]
                for name in files:
                    try:
                        if stat.S_ISSOCK(os.lstat(os.path.join(folder, name)).st_mode):
                            sockets += 1
                    except OSError:
                        pass
        return {"reached": float(reached), "sockets": float(sockets)}

    def network(self):
        reached = sum(_connects(socket.AF_INET, where) for where in
                      [("127.0.0.1", 5432), ("127.0.0.1", self.port), ("127.0.0.1", 6379), ("1.1.1.1", 80)])
        try:
            socket.getaddrinfo("pypi.org", 443)
            resolved = 1.0
        except OSError:
            resolved = 0.0
        return {"reached": float(reached), "resolved": resolved}

    def identity(self):
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        libc = ctypes.CDLL(None, use_errno=True)
        nested = libc.unshare(0x10000000)  # CLONE_NEWUSER: a namespace of its own, to be root in it
        try:
            os.setuid(0)
            root = 1.0
        except OSError:
            root = 0.0
        return {"uid": float(os.getuid()), "caps": float(int(status["CapEff"].strip(), 16) != 0),
                "nested": float(nested == 0), "root": root}

    def writes(self):
        own = os.path.dirname(os.path.abspath(__file__))
        wrote = 0
        for path in [os.path.join(self.data, "evil"), os.path.join(own, "evil.py"), "/etc/evil", "/evil",
                     "/usr/evil", "/dev/evil", os.path.join(self.lab, "evil.py")]:
            try:
                with open(path, "w") as handle:
                    handle.write("x")
                os.unlink(path)  # a folder the box made on its way to its code (in its own /tmp) takes it
                wrote += 1
            except OSError:
                pass
        try:
            with open("/tmp/mine", "w") as handle:
                handle.write("its own scratch")
            scratch = 1.0
        except OSError:
            scratch = 0.0
        return {"wrote": float(wrote), "scratch": scratch}


def _read(path):
    try:
        with open(path, "rb") as handle:
            return len(handle.read(1 << 20))
    except OSError:
        return 0


def _names(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


def _listed(folder):
    return len(_names(folder))


def _connects(family, where):
    probe = socket.socket(family, socket.SOCK_STREAM)
    probe.settimeout(1)
    try:
        probe.connect(where)
        return 1
    except OSError:
        return 0
    finally:
        probe.close()
"""


def lab_code(hostile: Tenants) -> Path:
    """Where the lab's deployed benchmark's code is unpacked."""
    found = [p for p in (hostile.data / "hosted").rglob("benchmark.py") if "lab-bench" in str(p)]
    assert found, "the lab's benchmark is unpacked in the data folder"
    return found[0].parent


def test_a_box_sees_nothing_of_the_platform_another_org_or_the_machine(hostile: Tenants) -> None:
    hostile.deploy(RIVAL, "probe", {"benchmark.py": PROBE})
    params = {"data": hostile.data.resolve(), "lab": lab_code(hostile), "port": hostile.server.port}
    args = [f"--param=benchmark.{k}={v}" for k, v in params.items()]
    args.append(f"--param=benchmark.marker={HOST_MARKER}")  # the name of a variable of the server's
    eval_id, said = hostile.run_eval(RIVAL, "reach-policy", "probe", *args)
    rows = {row["task"]: row for row in hostile.rows(RIVAL, eval_id)}
    assert set(rows) == {
        "data_folder", "other_code", "environments", "host_files", "host_sockets", "network", "identity",
        "writes",
    }, said  # fmt: skip

    def found(task: str) -> dict[str, float]:
        row = rows[task]
        assert row["error"] == "", row
        metrics = {k.removeprefix("metrics."): v for k, v in row.items() if k.startswith("metrics.")}
        return {k: float(v) for k, v in metrics.items() if v}

    # Its own code is bound at its path (a path means the same in the box and out), so its mounts name the
    # data folder: knowing where it is gives nothing.
    assert found("data_folder") == {"named": 1.0, "seen": 0.0, "read": 0.0, "own": 1.0}
    assert found("other_code") == {"others": 0.0, "lab": 0.0, "lab_read": 0.0}
    environments = found("environments")
    assert (environments["marker"], environments["database"]) == (0.0, 0.0)
    assert environments["processes"] <= 3  # bwrap's init, the runner, and what it started
    assert found("host_files") == {"seen": 0.0, "read": 0.0}
    assert found("host_sockets") == {"reached": 0.0, "sockets": 1.0}  # its own policy's socket alone
    assert found("network") == {"reached": 0.0, "resolved": 0.0}
    assert found("identity") == {"uid": 1000.0, "caps": 0.0, "nested": 0.0, "root": 0.0}
    assert found("writes")["scratch"] == 1.0
    written = [hostile.data / "evil", lab_code(hostile) / "evil.py", Path("/etc/evil"), Path("/evil")]
    assert [path for path in written if path.exists()] == []
    # Nothing the rival can read holds a secret, and the lab's code is as the lab left it.
    everything = said + str(hostile.report(RIVAL, eval_id)) + str(rows)
    assert hostile.secrets_in(everything) == []


SWAPPER = """\
import os
import threading
import time

import seq

FOLDER = "/tmp/yardstick-recording/episodes"


def _swap(path, how, data):
    # Put something else where the recorder wrote a file, as the runner is about to send it.
    fresh = path + ".swap"
    try:
        if how == "link-to-data":
            os.symlink(os.path.join(data, "secret.key"), fresh)
        elif how == "link-to-proc":
            os.symlink("/proc/1/environ", fresh)
        elif how == "link-to-passwd":
            os.symlink("/etc/passwd", fresh)
        elif how == "fifo":
            os.mkfifo(fresh)
        elif how == "hard-link":
            os.link("/tmp/garbage", fresh)
        os.rename(fresh, path)
    except OSError:
        pass


def _swapper(data):
    with open("/tmp/garbage", "wb") as handle:
        handle.write(b"not a recording at all" * 100)
    done = set()
    while True:
        for episode in sorted(os.listdir(FOLDER)) if os.path.isdir(FOLDER) else []:
            for name in os.listdir(os.path.join(FOLDER, episode)):
                path = os.path.join(FOLDER, episode, name)
                if name.endswith((".partial", ".swap")) or path in done:
                    continue
                hows = ["link-to-data", "link-to-proc", "link-to-passwd", "fifo", "hard-link", "leave"]
                _swap(path, hows[int(episode) % len(hows)], data)
                done.add(path)
        time.sleep(0.0005)


@seq.benchmark(name="swapper", tasks={"a": "a camera and a trajectory"}, seeds=range(6), max_seconds=0.5)
class Swapper:
    def __init__(self, data: str = ""):
        threading.Thread(target=_swapper, args=(data,), daemon=True).start()

    @seq.reset
    def reset(self, task, seed):
        self.t = 0
        return self._observation()

    @seq.step
    def step(self, action):
        self.t += 1
        return self._observation(), self.t >= 3, True

    def _observation(self):
        import numpy as np  # on the platform: the SDK imports this file where numpy need not be

        return {"x": 0.0, "target": 0.0, "image.cam": np.full((16, 16, 3), 40 * self.t, np.uint8)}
"""


def test_a_recording_swapped_for_a_link_a_fifo_or_another_file_is_dropped_and_nothing_leaves(
    hostile: Tenants, tmp_path: Path
) -> None:
    hostile.deploy(RIVAL, "swapper", {"benchmark.py": SWAPPER})
    data = f"--param=benchmark.data={hostile.data.resolve()}"
    eval_id, said = hostile.run_eval(RIVAL, "reach-policy", "swapper", "--trials", "6", data)
    assert "success: overall 100.0% (n=6)" in said, said  # a recording's trouble fails no episode
    videos = tmp_path / "videos"
    hostile.ok(RIVAL, "eval", "report", eval_id, "--videos", str(videos))
    fetched = [path.read_bytes() for path in videos.iterdir()]
    headers = {"Authorization": f"Bearer {hostile.server.keys[RIVAL]}"}
    for index in range(6):
        answer = httpx.get(f"{hostile.url}/v1/eval/{eval_id}/trajectories/{index}.jsonl.gz", headers=headers)
        assert answer.status_code in (200, 404), answer.text
        if answer.status_code == 200:
            fetched.append(answer.content)
    for content in fetched:
        assert hostile.secrets_in(content) == []
        assert content[:2] == b"\x1f\x8b" or content[4:8] == b"ftyp", content[:64]  # a gzip or an mp4
    # The untouched episode kept its files (each swapped one kept what the runner sent before the swap).
    assert 2 <= len(fetched) <= 12, len(fetched)
    assert hostile.secrets_in(str(hostile.report(RIVAL, eval_id))) == []


def test_a_remote_endpoint_on_the_platforms_machine_is_refused_naming_its_address(hostile: Tenants) -> None:
    client = hostile.server.client(RIVAL)

    def plan(wire: str, address: dict[str, object]) -> EvalPlan:
        return EvalPlan.model_validate(
            {
                "request_type": {"type": "private_eval", "org": "globex"},
                "eval": "toys.tally",
                "endpoints": [{"name": "probe", "wire": wire, "address": address}],
                "episodes_per_endpoint": 1,
            }
        )

    for wire, address in [
        ("websocket", {"host": "127.0.0.1", "port": 5432, "path": "/api/v1/session"}),
        ("websocket", {"host": "localhost", "port": hostile.server.port, "path": "/api/v1/session"}),
        ("grpc", {"host": "::1", "port": 6379, "path": "/api/v1/session"}),
        ("websocket", {"host": "169.254.169.254", "port": 80, "path": "/api/v1/session"}),
        ("websocket", {"host": "0.0.0.0", "port": 8080, "path": "/api/v1/session"}),
        ("websocket_unix", {"uds": "/var/run/postgresql/.s.PGSQL.5432", "path": "/api/v1/session"}),
    ]:
        for send in (client.resolve_plan, client.create_submission):
            with pytest.raises(PlatformError) as refused:
                send(plan(wire, address))  # type: ignore[operator]
            assert refused.value.http_status == 400, (wire, address)
            assert "endpoints.probe.address" in str(refused.value) and "--allow-remote" in str(refused.value)
    assert client.list_submissions().submissions == []  # nothing was filed


def test_a_bundle_name_past_the_filesystems_limits_is_refused_and_leaves_nothing(hostile: Tenants) -> None:
    code = b"import seq\n"
    for name in ("x" * 300 + ".py", "/".join(["d" * 200] * 25) + "/benchmark.py"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(code)
            tar.addfile(info, io.BytesIO(code))
        raw = buffer.getvalue()
        answer = httpx.post(
            f"{hostile.url}/v1/benchmarks",
            json={
                "name": "long-names",
                "image": {"base": "debian:12-slim", "steps": []},
                "tasks": {"a": ""},
                "seeds": [0],
                "max_seconds": 1.0,
                "handler_ref": "benchmark:Bench",
                "code": {
                    "format": "tar.gz",
                    "data": base64.b64encode(raw).decode(),
                    "sha256": hashlib.sha256(raw).hexdigest(),
                },
            },
            headers={"Authorization": f"Bearer {hostile.server.keys[RIVAL]}"},
            timeout=60,
        )
        assert answer.status_code == 400, answer.text
        assert "code.data" in answer.json()["detail"] and "bytes" in answer.json()["detail"]
    assert not any("long-names" in str(p) for p in (hostile.data / "hosted").rglob("*"))


REAP_WAIT_S = 30.0


def test_after_it_all_no_box_is_left_running_and_nothing_is_left_unreaped(hostile: Tenants) -> None:
    assert hostile.server.process is not None
    hosted = str((hostile.data / "hosted").resolve())
    # Boxes of finished evals are kept warm for the next eval of the same code; none of a build is left.
    boxes = [pid for pid in processes_mentioning(hosted) if "check_runner" in _cmdline(pid)]
    assert boxes == []
    # A process that has just ended is a zombie until its parent's wait, a moment later on a loaded
    # machine: what matters is one left so, never reaped.
    deadline = give_up_at(REAP_WAIT_S)
    while defunct := [p for p in Path("/proc").glob("[0-9]*") if _zombie_of(p, hostile.server.process.pid)]:
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert defunct == []
    assert zombie_children() == []  # this process started none it left unreaped


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _zombie_of(entry: Path, parent: int) -> bool:
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return False
    state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
    return state == "Z" and int(ppid) in (parent, *descendants(parent))
