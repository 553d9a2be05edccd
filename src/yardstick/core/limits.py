"""Every limit the platform holds a request to, in one place. The front doors read them from here (to check
a request before anything is built from it, and to state them in their OpenAPI); the README states them.
They are the same whichever database is behind: text lengths come from the columns that store the text
(`store.text` refuses the rest on SQLite as on PostgreSQL).

A refusal names the field and the rule: `Problem` is one such pair, and `refuse` turns every problem found
into one `bad_request` (every problem at once, as plan resolution reports them).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Column

from yardstick.core.refusals import Problem, Refusal, bad_request
from yardstick.store.models import ApiKey, Run
from yardstick.store.text import text_problem

# A request body, counted before it is parsed (413 past it). A plan of the largest size below is ~0.2 MB.
BODY_BYTES = 1 << 20
# A body that carries a code bundle (a Sequences registration or deployment): the bundle's 8 MiB in base64,
# and the declaration beside it. Which paths take one is the door's to say (`sequences.paths`).
BUNDLE_BODY_BYTES = 12 << 20
# A rig's recorded episode (a tar of its folder: a video per camera, the signals as parquet): minutes of
# small camera video.
RIG_EPISODE_BYTES = 256 << 20
# A volume's upload (`seq volume put`): the files of one version and their bytes in all (the Sequences
# contract's bounds), how long its signed targets and sessions live (the SDK starts over past it), the body
# that declares an upload's files (its 10,000 files with their paths), and the body of one of its chunks (the
# SDK sends 16 MiB chunks).
VOLUME_FILES = 10_000
VOLUME_UPLOAD_BYTES = 500 << 30
UPLOAD_TTL_S = 24 * 3600
VOLUME_DECLARATION_BYTES = 12 << 20
UPLOAD_CHUNK_BYTES = 16 << 20

# A plan: the episodes it expands to (over every task and endpoint), its task nodes (or the tasks of the
# eval it names), and the endpoints it defines. Resolution checks these from the counts, before it makes
# a single episode.
EPISODES_PER_PLAN = 10_000
TASKS_PER_PLAN = 1_000
ENDPOINTS_PER_PLAN = 32
# An episode's cap on robot time (`cap_per_episode_sec`), stated or a catalogue default: one hour.
CAP_PER_EPISODE_SEC = 3_600

# Lists: the largest page a list answers (a larger `limit` is clamped to it, as the contract says), and
# the page it answers with no `limit`. Submissions and purchases; artifacts (a run may write thousands).
PAGE_SIZE_MAX, PAGE_SIZE_DEFAULT = 200, 50
ARTIFACT_PAGE_MAX, ARTIFACT_PAGE_DEFAULT = 1_000, 100


def _chars(column: Column[str] | object) -> int:
    length = getattr(getattr(column, "type", None), "length", None)
    assert isinstance(length, int), f"{column} has no length"
    return length


# Text a request stores, in characters: as long as its column.
ALIAS_CHARS = _chars(Run.__table__.c.alias)
TRANSACTION_KEY_CHARS = _chars(Run.__table__.c.transaction_key)
KEY_LABEL_CHARS = _chars(ApiKey.__table__.c.label)


def text(field: str, value: str | None, max_chars: int | None) -> list[Problem]:
    """The problem of a text field the platform stores, if it has one (too long, NUL, not Unicode)."""
    if value is None:
        return []
    rule = text_problem(value, max_chars)
    return [] if rule is None else [Problem(field, rule)]


def at_most(field: str, value: int | None, limit: int, what: str) -> list[Problem]:
    """The problem of a count or a size over its limit (`what` names the limit in the rule)."""
    if value is None or value <= limit:
        return []
    return [Problem(field, f"at most {limit:,} {what}, not {value:,}")]


def refuse(problems: Sequence[Problem]) -> Refusal:
    """Every problem found, in one refusal: a sentence each, and `errors` listing field and rule."""
    return bad_request("; ".join(f"{p.field}: {p.rule}" for p in problems), problems=problems)


def check(problems: Sequence[Problem]) -> None:
    """Raise the refusal of `problems`, if there are any."""
    if problems:
        raise refuse(problems)
