"""The marks on a `@seq.*` class's methods: `@seq.reset`, `@seq.step`, `@seq.infer`, `@seq.on_episode`,
`@seq.concurrent(sizes=[...])`, and the ones the SDK retired, each refused saying what is written now.

A mark only records itself on the function (`__seq_marks__`); the class decorator reads the marks along
the class's bases (`bindings`) and applies Yardstick's own (`ys.reset`, `ys.step`, `ys.infer`, ...),
because what a mark means depends on the class: `@seq.reset` starts a benchmark's episode at a task and a
seed, and on a policy is a hook handed nothing when an episode starts.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Final, NoReturn, TypeVar

from yardstick.hosted.seq_api.errors import BenchmarkDefinitionError, PolicyDefinitionError, SeqAuthoringError

_F = TypeVar("_F")
MARKS: Final = "__seq_marks__"
CONCURRENT: Final = "__seq_concurrent__"
MOST_SIZES: Final = 256

# The words of the marks, as a refusal writes them.
RESET, STEP, INFER, ON_EPISODE, OBSERVE, SAMPLE, SHUTDOWN = (
    "reset",
    "step",
    "infer",
    "on_episode",
    "observe",
    "sample",
    "shutdown",
)


def _mark(flag: str) -> Callable[[_F], _F]:
    def mark(target: _F) -> _F:
        if isinstance(target, (staticmethod, classmethod)):
            raise PolicyDefinitionError(
                f"@seq.{flag}",
                type(target).__name__,
                "a @seq mark goes on a plain instance method, not a staticmethod or classmethod",
            )
        if not callable(target):
            raise PolicyDefinitionError(f"@seq.{flag}", type(target).__name__, "a @seq mark goes on a method")
        setattr(target, MARKS, frozenset({*getattr(target, MARKS, ()), flag}))
        return target

    mark.__name__ = flag
    mark.__doc__ = f"Mark the method that is the class's @seq.{flag}."
    return mark


reset = _mark(RESET)
step = _mark(STEP)
infer = _mark(INFER)
on_episode = _mark(ON_EPISODE)
observe = _mark(OBSERVE)
sample = _mark(SAMPLE)
shutdown = _mark(SHUTDOWN)
# An adapter's two methods (`@seq.adapter`), refused on a benchmark or a policy.
observation = _mark("observation")
action = _mark("action")

CONCURRENT_HOW = (
    "write @seq.concurrent(sizes=[1, 2, 4, 8]) on the @seq.infer method, or @seq.concurrent(sizes=[N]) on a "
    "vectorized benchmark's @seq.step (N the most worlds one call steps)"
)


def concurrent(fn: Any = None, *, sizes: Any = None, **retired: Any) -> Callable[[_F], _F]:
    """`@seq.concurrent(sizes=[...])`: on a policy's infer, the batch sizes it is called with; on a
    benchmark's step, one size, the most worlds one call steps. The class decorator reads it."""
    if retired:
        name = sorted(retired)[0]
        raise PolicyDefinitionError(
            "@seq.concurrent", name, f"is removed: it takes sizes= alone; {CONCURRENT_HOW}"
        )
    if fn is not None or sizes is None:
        raise PolicyDefinitionError("@seq.concurrent", "sizes", f"is needed: {CONCURRENT_HOW}")
    if (
        not isinstance(sizes, (list, tuple))
        or not sizes
        or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in sizes)
    ):
        raise PolicyDefinitionError(
            "@seq.concurrent", "sizes", f"lists whole numbers of at least 1, not {sizes!r}: {CONCURRENT_HOW}"
        )
    declared = [int(n) for n in sizes]

    def mark(target: _F) -> _F:
        if isinstance(target, type):
            raise PolicyDefinitionError(
                "@seq.concurrent", target.__name__, f"goes on a method, not on the class: {CONCURRENT_HOW}"
            )
        setattr(target, CONCURRENT, {"sizes": list(declared)})
        return target

    return mark


def marks_of(member: Any) -> frozenset[str]:
    return frozenset(getattr(member, MARKS, ()))


def bindings(cls: type, what: str, error: type[SeqAuthoringError]) -> dict[str, str]:
    """{mark: method name} for `cls`, its own methods and those of its bases, the nearest winning (as
    Python finds methods); two methods of one class with one mark are refused."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        here: dict[str, str] = {}
        for name, member in vars(klass).items():
            for flag in marks_of(member):
                if flag in here and here[flag] != name:
                    raise error(
                        f"{what} {cls.__name__}",
                        name,
                        f"@seq.{flag} is on both {here[flag]!r} and {name!r}; each mark goes on one method",
                    )
                here[flag] = name
        found.update(here)
    return found


def method(cls: type, name: str) -> Any:
    """The function `name` names, as `cls` reaches it (its own, or one it inherits)."""
    return inspect.getattr_static(cls, name)


def _gone(mark: str, why: str, error: type[PolicyDefinitionError | BenchmarkDefinitionError]) -> Any:
    def refused(*args: Any, **kwargs: Any) -> NoReturn:
        raise error(f"@seq.{mark}", mark, why)

    refused.__name__ = mark
    refused.__doc__ = f"@seq.{mark} is gone: {why}"
    return refused


setup = _gone(
    "setup",
    'is removed: a benchmark builds its worlds in its constructor, init= handing it "{num_worlds}" and '
    '"{policy.hz}"',
    BenchmarkDefinitionError,
)
check = _gone(
    "check",
    "is gone: a benchmark's @seq.step returns (observation, done, success[, metrics])",
    BenchmarkDefinitionError,
)
score = _gone(
    "score",
    "is gone: an eval's report gives each task's success rate and the mean of each metric @seq.step returns",
    BenchmarkDefinitionError,
)
warmup = _gone(
    "warmup", "is removed: what a copy needs before it serves goes in its __init__", PolicyDefinitionError
)
load = _gone(
    "load",
    'is removed: a class loads what it needs in its constructor, init= handing it "{weights}"',
    PolicyDefinitionError,
)
batched = _gone("batched", f"is removed: {CONCURRENT_HOW}", PolicyDefinitionError)
