"""The build check, in a box: the SDK's examples, packed as the SDK packs them, pass with their declarations
read; a benchmark that raises fails with the exception and where in its file it was raised; one that hangs
is cut at the time limit, leaving no process behind."""

from __future__ import annotations

import json
from pathlib import Path

from hosted_helpers import bundle_of, example, needs_bwrap, processes_mentioning
from yardstick.worker.boxes.check import Checked, check_benchmark, check_policy

pytestmark = needs_bwrap

RAISES = """\
import seq


@seq.benchmark(tasks={"ok": "", "broken": "resets badly"}, seeds=[4, 5], max_seconds=1.0)
class Breaks:
    @seq.reset
    def reset(self, task, seed):
        if task == "broken":
            raise ValueError(f"no scene for seed {seed}")
        return {"x": 0.0}

    @seq.step
    def step(self, action):
        return {"x": 0.0}, True, True
"""


def test_the_sdks_examples_pass_with_their_declarations(tmp_path: Path) -> None:
    reach = check_benchmark(
        bundle_of(example("reach_bench.py", "benchmark.py"), tmp_path / "r").folder,
        "benchmark:ReachBench",
        timeout_s=60,
    )
    assert reach.ready, reach
    declared = reach.declaration or {}
    assert declared["tasks"] == {
        "left": "move the point to the target on the left",
        "right": "move the point to the target on the right",
    }
    assert (declared["seeds"], declared["max_seconds"], declared["worlds"]) == (
        [0, 1],
        {"left": 5.0, "right": 5.0},
        None,
    )
    # What the real SDK sends as the registration's params (captures/a002).
    assert declared["params"] == {"noise": {"type": "float", "default": 0.0}}
    assert declared["deployment"] == {"gpu": "cpu", "cpu": 2, "memory": 4}

    vec = check_benchmark(
        bundle_of(example("vec_bench.py", "benchmark.py"), tmp_path / "v").folder,
        "benchmark:VecBench",
        timeout_s=60,
    )
    assert vec.ready, vec
    declared = vec.declaration or {}
    assert (declared["worlds"], declared["max_seconds"]) == (8, {"a": 2.0, "b/1": 4.0})
    assert declared["params"] == {
        "noise_std": {"type": "float", "default": 0.02},
        "label": {"type": "str", "default": "x"},
    }
    assert declared["constructor"]["kwargs"] == {"worlds": "{num_worlds}", "hz": "{policy.hz}"}

    policy = check_policy(
        bundle_of(example("reach_policy.py", "policy.py"), tmp_path / "p").folder,
        "policy:ReachPolicy",
        timeout_s=60,
    )
    assert policy.ready, policy
    declared = policy.declaration or {}
    assert (declared["hz"], declared["action_chunk_valid_len"], declared["action_chunk_replan_at"]) == (
        10.0,
        1,
        1,
    )
    assert declared["params"] == {} and declared["prefetch"] is False


def test_a_benchmark_whose_reset_raises_fails_with_the_exception_and_where(tmp_path: Path) -> None:
    folder = bundle_of({"benchmark.py": RAISES}, tmp_path).folder
    checked = check_benchmark(folder, "benchmark:Breaks", timeout_s=60)
    assert (checked.status, checked.stage) == ("failed", "reset")
    assert checked.error is not None
    assert "ValueError: no scene for seed 4" in checked.error
    assert "(at benchmark.py:9)" in checked.error
    assert "task 'broken'" in checked.error
    # The record the registry keeps is plain JSON, and reads back the same.
    assert Checked.from_dict(json.loads(json.dumps(checked.to_dict()))) == checked


def test_a_file_that_does_not_import_fails_with_where(tmp_path: Path) -> None:
    broken = {"benchmark.py": "import seq\n\n\ndef oops(:\n    pass\n"}
    checked = check_benchmark(bundle_of(broken, tmp_path / "s").folder, "benchmark:B", timeout_s=60)
    assert (checked.status, checked.stage) == ("failed", "import")
    assert "SyntaxError" in (checked.error or "") and "(at benchmark.py:4)" in (checked.error or "")

    refused = {"pkg/__init__.py": "", "pkg/bench.py": RAISES.replace("seeds=[4, 5]", "seeds=[4, 4]")}
    checked = check_benchmark(bundle_of(refused, tmp_path / "d").folder, "pkg.bench:Breaks", timeout_s=60)
    assert (checked.status, checked.stage) == ("failed", "import")
    assert "seeds: names each seed once" in (checked.error or "")
    assert "(at pkg/bench.py:4)" in (checked.error or "")

    fine = {"pkg/__init__.py": "", "pkg/bench.py": RAISES}
    missing = check_benchmark(bundle_of(fine, tmp_path / "m").folder, "pkg.bench:Nothing", timeout_s=60)
    assert "has no 'Nothing'" in (missing.error or "")
    assert check_benchmark(tmp_path, "not a ref", timeout_s=5).error.startswith("handler_ref")  # type: ignore[union-attr]


def test_a_check_that_hangs_is_cut_and_leaves_nothing_running(tmp_path: Path) -> None:
    hangs = {
        "benchmark.py": RAISES.replace('raise ValueError(f"no scene for seed {seed}")', "while True: pass")
    }
    folder = bundle_of(hangs, tmp_path).folder
    checked = check_benchmark(folder, "benchmark:Breaks", timeout_s=3)
    assert (checked.status, checked.stage) == ("failed", "box")
    assert "did not finish within 3 s" in (checked.error or "")
    assert processes_mentioning(str(folder)) == []


def test_what_the_code_prints_does_not_confuse_the_check(tmp_path: Path) -> None:
    noisy = {
        "benchmark.py": 'print("{\\"status\\": \\"failed\\"}")\n'
        + RAISES.replace('"broken": "resets badly"', '"b": ""')
    }
    checked = check_benchmark(bundle_of(noisy, tmp_path).folder, "benchmark:Breaks", timeout_s=60)
    assert checked.ready, checked
    assert '{"status": "failed"}' in checked.log


def test_a_guessed_action_that_a_step_refuses_is_a_warning(tmp_path: Path) -> None:
    arm = "        assert len(action) == 7, 'a 7-dof arm'\n        return {}, True, True"
    picky = RAISES.replace('"broken": "resets badly"', '"b": ""').replace(
        '        return {"x": 0.0}, True, True', arm
    )
    checked = check_benchmark(
        bundle_of({"benchmark.py": picky}, tmp_path).folder, "benchmark:Breaks", timeout_s=60
    )
    assert checked.ready
    assert any("a 7-dof arm" in w and "guessed" in w for w in checked.warnings), checked.warnings


# Code that finds the check's own channel and writes a "ready" of its own there, then does `after`.
FORGED = """\
import os
import stat

import seq

ANSWER = b'{"status": "ready", "kind": "benchmark", "declaration": {"tasks": {"a": ""}}, "warnings": []}\\n'
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and os.get_blocking(fd):
            os.write(fd, ANSWER)
    except OSError:
        pass
{after}
"""


def test_a_ready_the_code_forged_is_not_the_verdict_unless_the_box_ended_as_a_check_does(
    tmp_path: Path,
) -> None:
    verdicts = {}
    for name, after in {
        "crashes": "os._exit(3)",
        "says more": "os.write(1, b'')\nfor fd in range(3, 20):\n    try:\n        os.write(fd, b'{}\\\\n')\n"
        "    except OSError:\n        pass",
        "hangs": "import time\ntime.sleep(600)",
    }.items():
        folder = bundle_of(
            {"benchmark.py": FORGED.replace("{after}", after)}, tmp_path / name.replace(" ", "-")
        ).folder
        checked = check_benchmark(folder, "benchmark:Nothing", timeout_s=10)
        verdicts[name] = (checked.status, checked.stage, checked.error or "")
    assert (
        verdicts["crashes"][:2] == ("failed", "box") and "status 3 after its answer" in verdicts["crashes"][2]
    )
    assert verdicts["says more"][:2] == ("failed", "box"), verdicts
    assert (
        "more than its answer" in verdicts["says more"][2]
        or "could not have given" in verdicts["says more"][2]
    )
    assert verdicts["hangs"][:2] == ("failed", "box") and "did not finish within 10 s" in verdicts["hangs"][2]
