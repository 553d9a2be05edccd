"""The one rule for text the platform stores, the same on SQLite and PostgreSQL.

PostgreSQL refuses NUL in text and enforces a `varchar(n)`'s length; SQLite stores anything. Left to the
databases, a 10 MB alias is a row on one and a server error on the other, and a NUL in a query string a
server error on PostgreSQL alone. So every text column of the models is `Chars(n)` (or `LongText()`), whose
bound values are checked here before either database sees them — in an INSERT, an UPDATE or a WHERE alike —
and refused with `UnstorableText`, naming the column and the rule. A front door renders that as a bad
request, so a value no column can hold is refused by rule, never a 500, whichever database is behind.

The rule: valid Unicode (no unpaired surrogate, which neither driver can encode), no NUL (U+0000), and at
most the column's length in characters.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Generic, TypeVar

from sqlalchemy import Dialect, String, Text
from sqlalchemy.types import TypeDecorator, TypeEngine


class UnstorableText(ValueError):
    """A value no text column can hold: `field` names the column, `rule` what it breaks."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


def text_problem(value: str, max_chars: int | None) -> str | None:
    """The rule `value` breaks as stored text of at most `max_chars` characters (None: any length), or
    None when it may be stored."""
    if max_chars is not None and len(value) > max_chars:
        return f"text of at most {max_chars} characters, not {len(value)}"
    if "\x00" in value:
        return "text without NUL (U+0000), which the database cannot store"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "valid Unicode text (it holds an unpaired surrogate)"
    return None


class _Checked(TypeDecorator[str]):
    cache_ok = True
    # Set for each column once the models are declared (`name_columns`): the name a refusal gives.
    field = "text"

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if isinstance(value, str):
            rule = text_problem(value, self.max_chars)
            if rule is not None:
                raise UnstorableText(self.field, rule)
        return value

    @property
    def max_chars(self) -> int | None:
        length: int | None = getattr(self.impl, "length", None)
        return length

    @property
    def python_type(self) -> type[str]:
        return str


class Chars(_Checked):
    """`varchar(length)`, checked on both databases."""

    impl = String
    cache_ok = True


class LongText(_Checked):
    """`text` of any length, checked for what the databases cannot store."""

    impl = Text
    cache_ok = True


def name_columns(tables: Any) -> None:
    """Give each checked column's type the column's name, for its refusals."""
    for table in tables:
        for column in table.columns:
            kind: TypeEngine[Any] = column.type
            if isinstance(kind, _Checked):
                kind.field = column.name


Word = TypeVar("Word", bound=StrEnum)


class Words(TypeDecorator[Word], Generic[Word]):
    """`varchar(length)` holding one word of a `StrEnum` (a run's status, an episode's state, a kind): written
    as its value and read back as its member, so a word that is none of the enum's fails where it is written
    or asked for, not later where it is compared. The stored words are the enum's values, unchanged."""

    impl = String
    cache_ok = True

    def __init__(self, words: type[Word], length: int) -> None:
        super().__init__(length)
        self.words = words

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else str(self.words(value).value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Word | None:
        return None if value is None else self.words(value)
