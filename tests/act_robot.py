"""A robot's program on the real Sequences SDK, run in the venv apart: `sequence_ai.connect(model)`, then
commands on stdin, one JSON line each, answered on stdout, one JSON line each — so the test, which steps the
simulated robot, is its control loop. Commands: {"observe": obs} (arrays as {"array": list, "dtype"}),
{"act": true}, {"ready": timeout_s}, {"end": true}, {"label": success, "notes"}, {"close": true}. Every
answer carries "ok", and on failure the SDK's error class and message."""

import json
import sys

import numpy as np
import sequence_ai


def arrays(value):
    if isinstance(value, dict) and "array" in value and "dtype" in value:
        return np.asarray(value["array"], dtype=value["dtype"])
    if isinstance(value, dict):
        return {k: arrays(v) for k, v in value.items()}
    return value


def plain(value):
    return value.tolist() if hasattr(value, "tolist") else value


def main() -> None:
    policy = sequence_ai.connect(model=sys.argv[1], startup_timeout_s=float(sys.argv[2]))
    print(json.dumps({"ok": True, "connected": True}), flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        try:
            if "observe" in asked:
                said = {"number": policy.observe(arrays(asked["observe"]))}
            elif "act" in asked:
                said = {"outputs": plain(policy.act())}
            elif "ready" in asked:
                said = {"waited_s": policy.wait_until_ready(timeout_s=asked["ready"], poll_s=0.5)}
            elif "end" in asked:
                said = {"ended": policy.end_episode()}
            elif "label" in asked:
                said = {"labelled": policy.label(asked["label"], asked.get("notes", ""))}
            elif "close" in asked:
                policy.close()
                print(json.dumps({"ok": True, "closed": True}), flush=True)
                return
            else:
                said = {"unknown": asked}
            print(json.dumps({"ok": True, **said}), flush=True)
        except Exception as exc:  # the test reads what the SDK raised
            print(json.dumps({"ok": False, "error": type(exc).__name__, "message": str(exc)}), flush=True)


if __name__ == "__main__":
    main()
