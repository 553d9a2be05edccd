"""Cut a benchmark or policy call that runs past its limit, and say who failed and how.

Before each call the engine writes down its deadline (a float: no system call, since episodes make
thousands of calls a second and an interval timer per call costs several percent of a simulator step). A
watchdog thread looks at the deadline a few times per limit and, when a call has overrun, sends SIGALRM
to the main thread, where Python raises between bytecodes: that stops a policy sleeping on a socket or
looping in Python. A call stuck inside C code never returns to the interpreter; for that the pool's
supervisor reads the same deadline (the beacon) from outside and replaces the whole process.

A limit is on the call's own time, not the machine's load: before it cuts, the watchdog adds to the deadline
the time the main thread waited for a CPU during the call (cpu_wait.py), so a call on a busy machine runs
slower, not into its limit.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, TypeVar, runtime_checkable

from yardstick.engine.cpu_wait import run_queue_wait_s
from yardstick.engine.failures import Failed, FailureKind
from yardstick.sdk.errors import InstallIncomplete

_T = TypeVar("_T")
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class CallTimeout(Exception):
    """A call ran past its limit."""


class CallFailed(Failed):
    """A benchmark or policy call that raised, timed out, or answered something malformed. `reason` is
    the sentence the episode's result carries, `kind` what it was."""


@dataclass(frozen=True)
class Call:
    """A guarded call: its name in sentences, and what its raising and its overrunning count as."""

    name: str
    crash: FailureKind
    timeout: FailureKind


POLICY_INFER = Call("policy.infer", FailureKind.POLICY_CRASH, FailureKind.POLICY_TIMEOUT)
POLICY_ON_EPISODE = Call("policy.on_episode", FailureKind.POLICY_SETUP_CRASH, FailureKind.POLICY_TIMEOUT)
BENCHMARK_RESET = Call("benchmark.reset", FailureKind.BENCHMARK_CRASH, FailureKind.BENCHMARK_TIMEOUT)
BENCHMARK_STEP = Call("benchmark.step", FailureKind.BENCHMARK_CRASH, FailureKind.BENCHMARK_TIMEOUT)


class Beacon(Protocol):
    """Where a process says by when its current guarded call must have ended (time.monotonic; 0: it is not
    in a call, or the call has no limit)."""

    value: float


class _Deadline:
    """A beacon of this process's own, when no one outside watches."""

    value = 0.0


@runtime_checkable
class NamingBeacon(Protocol):
    """A beacon that also keeps which call its deadline is for, for whoever watches it to say."""

    value: float

    def naming(self, call: Call) -> None: ...


class CallBeacon:
    """A beacon a thread of this same process watches (a platform worker's vigil): besides the deadline, the
    call it is for, so a call stuck past its limit fails with that call's own timeout kind."""

    def __init__(self) -> None:
        self.value = 0.0
        self.call: Call | None = None

    def naming(self, call: Call) -> None:
        self.call = call


def describe(what: str, exc: BaseException) -> str:
    """`what` raised `exc`, with the place in the user's code it came from."""
    # The innermost frame of the caller's code, not ours: that is where they will look.
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_OURS)]
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {os.path.basename(last.filename)}:{last.lineno})"
    message = str(exc) or type(exc).__name__
    return f"{what} raised {type(exc).__name__}: {message}{where}"


class Guard:
    """Runs calls under a time limit. Use as a context manager around the work: on entry (in the main
    thread) it installs the alarm handler and starts the watchdog; on exit it puts both back."""

    def __init__(self, seconds: float | None, beacon: Beacon | None = None) -> None:
        self.seconds = seconds
        self.beacon: Beacon = beacon if beacon is not None else _Deadline()
        self._naming = beacon if isinstance(beacon, NamingBeacon) else None
        self._armed = False
        self._call = 0  # which call is in progress; the watchdog fires at most once for each
        self._fired = -1
        self._previous: Any = None
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        # The deadline is written by the calling thread and stretched by the watchdog: one at a time, so a
        # stretch never lands on a call that has ended (an uncontended lock is no system call).
        self._deadline_lock = threading.Lock()
        self.stretched_s = 0.0  # what the current (or last) call's limit grew by for want of a CPU

    def __enter__(self) -> Guard:
        usable = self.seconds is not None and threading.current_thread() is threading.main_thread()
        if usable:
            self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
            self._armed = True
            self._stop.clear()
            self._watchdog = threading.Thread(target=self._watch, name="yardstick-guard", daemon=True)
            self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._armed:
            self._stop.set()
            if self._watchdog is not None:
                self._watchdog.join()
            signal.signal(signal.SIGALRM, self._previous)
            self._armed = False

    def _watch(self) -> None:
        main = threading.main_thread().ident
        # A few looks per limit: a call is cut within a quarter of its limit after it overran.
        interval = min(max((self.seconds or 1.0) / 4, 0.01), 0.5)
        seen, waited_then = -1, 0.0
        while not self._stop.wait(interval):
            # The call first, then its deadline: read the other way round, an overrun call that ends
            # between the two reads would have its alarm charged to the next call, which just began.
            call = self._call
            deadline = self.beacon.value
            if call != seen and deadline:
                # A call first seen here: what the main thread waited for a CPU so far. Seen up to one look
                # late, the stretch counts less than the wait, never more.
                seen, waited_then = call, run_queue_wait_s()
            if deadline and time.monotonic() > deadline and self._fired != call and main is not None:
                # Still past the deadline once it covers the wait: the call's own time is up.
                if (
                    call == seen
                    and self._stretch(call, run_queue_wait_s() - waited_then)
                    and time.monotonic() <= self.beacon.value
                ):
                    continue
                self._fired = call
                signal.pthread_kill(main, signal.SIGALRM)

    def _stretch(self, call: int, waited: float) -> bool:
        """Grow the limit of call number `call` to cover `waited`, the seconds it waited for a CPU; whether
        it grew (it did not when the wait is already covered or the call has ended)."""
        more = waited - self.stretched_s
        if more <= 0.001:
            return False
        with self._deadline_lock:
            if self._call != call or not self.beacon.value:
                return False
            self.beacon.value += more
            self.stretched_s = waited
        return True

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        # Only the call the watchdog fired for is cut; an alarm that lands after it returned is dropped.
        if self._fired == self._call and self.beacon.value:
            raise CallTimeout()

    def call(self, call: Call, fn: Callable[..., _T], *args: Any) -> _T:
        """`fn(*args)`, or CallFailed naming `call` when it raises or runs past the limit. What it raised
        counts as the call's crash, unless it is a `Failed` that knows its own kind (a policy server that
        dropped the session, say)."""
        beacon = self.beacon
        self._call += 1
        if self._naming is not None:
            self._naming.naming(call)
        if self.seconds is not None:
            with self._deadline_lock:
                self.stretched_s = 0.0
                beacon.value = time.monotonic() + self.seconds
        try:
            return fn(*args)
        except CallTimeout:
            waited = (
                f" (and {self.stretched_s:.1f} s more that it waited for a CPU)" if self.stretched_s else ""
            )
            raise CallFailed(
                f"{call.name} ran past its {self.seconds:g} s limit{waited} and was cut", call.timeout
            ) from None
        except (KeyboardInterrupt, SystemExit, CallFailed):
            raise
        except Failed as exc:
            raise CallFailed(describe(call.name, exc), exc.kind) from exc
        except InstallIncomplete as exc:
            raise CallFailed(describe(call.name, exc), FailureKind.INSTALL_INCOMPLETE) from exc
        except Exception as exc:
            raise CallFailed(describe(call.name, exc), call.crash) from exc
        finally:
            with self._deadline_lock:
                beacon.value = 0.0
