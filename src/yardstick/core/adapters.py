"""An org's adapters: registered as versions of one file each, listed, read back, removed, and chosen by an
eval whose benchmark → policy pair one of their versions declares.

The version is the content: the contract's sum of a class name and its file (`source_sha256`); the same sum
registered again is the version it already is, and two registrations racing with the same file meet on the
unique (adapter, number) pair, the loser reading the winner's version. A name another `module:Class` holds
is taken over only when the registration says `replace`. Nothing of the file runs here: the registration is
checked by reading it (`ast`), and the file runs only in a box, between a benchmark and a policy.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from yardstick.core.refusals import Listed, Refusal, RefusalKind, bad_request, not_found
from yardstick.hosted import adapter_pairs
from yardstick.hosted.adapting import source_sha256
from yardstick.store.db import Database
from yardstick.store.models import Adapter, AdapterVersion, Run, utcnow
from yardstick.store.states import ACTIVE_RUNS

__all__ = ["MAX_SOURCE_BYTES", "AdapterCode", "Adapters", "Chosen", "parse_ref"]

# The contract's limit: one file, at most 256 KB.
MAX_SOURCE_BYTES: Final = 256 * 1024
HANDLER_REF: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
REF: Final = re.compile(rf"(?P<name>{adapter_pairs.ADAPTER_NAME.pattern})(@v(?P<version>[1-9][0-9]*))?")


@dataclass(frozen=True)
class AdapterCode:
    """What a registration hands over: the adapter's name, its class and `module:Class`, its file, its
    pairs (as the wire carries them) and the parameters its constructor declares."""

    name: str
    class_name: str
    handler_ref: str
    source: str
    pairs: Any
    params: Mapping[str, Any]


@dataclass(frozen=True)
class Chosen:
    """The adapter version an eval runs, and the pair of its that let it."""

    name: str
    version: AdapterVersion
    pair: str

    def manifest(self) -> dict[str, Any]:
        """What an eval's report keeps of it: enough to run the same again."""
        return {"name": self.name, "version": self.version.number, "sha256": self.version.sha256}


def parse_ref(ref: str, field: str = "adapter") -> tuple[str, int | None]:
    """`name` or `name@vN` → (name, N or None for the latest)."""
    found = REF.fullmatch(ref.strip())
    if found is None:
        raise bad_request(
            f"{field}: {ref!r} is no registered adapter's name: name or name@vN (seq adapter ls lists them)",
            field=field,
        )
    version = found.group("version")
    return found.group("name"), int(version) if version else None


def checked(code: AdapterCode) -> adapter_pairs.Pairs:
    """The registration's pairs, once every rule holds; a refusal naming the field and the rule otherwise."""
    if not adapter_pairs.ADAPTER_NAME.fullmatch(code.name):
        raise bad_request(
            f"name: {code.name!r}: 1-64 letters, digits, '.', '_' or '-', starting with a letter",
            field="name",
        )
    if not code.class_name.isidentifier():
        raise bad_request(f"class_name: {code.class_name!r} is not a Python class name", field="class_name")
    if not HANDLER_REF.fullmatch(code.handler_ref) or code.handler_ref.rpartition(":")[2] != code.class_name:
        raise bad_request(
            f"handler_ref: {code.handler_ref!r} is not module:{code.class_name}", field="handler_ref"
        )
    size = len(code.source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise bad_request(
            f"source: {size:,} bytes; an adapter is one file of at most {MAX_SOURCE_BYTES // 1024} KB",
            field="source",
        )
    _check_source(code.source, code.class_name)
    try:
        return adapter_pairs.parse(code.pairs)
    except ValueError as exc:
        raise bad_request(f"pairs: {exc}", field="pairs") from None


def _check_source(source: str, class_name: str) -> None:
    """The file parses and defines `class_name` at its top, decorated `@seq.adapter` (read, never run)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise bad_request(f"source: line {exc.lineno}: {exc.msg}", field="source") from None
    found = next(
        (node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name), None
    )
    if found is None:
        raise bad_request(f"source: defines no class {class_name} at its top level", field="source")
    if not any(_names_adapter(decorator) for decorator in found.decorator_list):
        raise bad_request(f"source: class {class_name} is not decorated @seq.adapter", field="source")


def _names_adapter(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Attribute) and target.attr == "adapter") or (
        isinstance(target, ast.Name) and target.id == "adapter"
    )


class Adapters:
    def __init__(self, db: Database) -> None:
        self.db = db

    def register(
        self, org_id: int, code: AdapterCode, *, replace: bool
    ) -> tuple[Adapter, AdapterVersion, bool]:
        """The version `code` is: the existing one with its sum (created False), else the next one."""
        pairs = checked(code)
        sha = source_sha256(code.class_name, code.source)
        for _ in range(3):  # a registration racing ours took the number: read again and take the next
            try:
                with self.db.writing() as session:
                    return self._register(session, org_id, code, pairs, sha, replace)
            except IntegrityError:
                continue
        raise Refusal(RefusalKind.CONFLICT, f"name: {code.name!r} is being registered by another request")

    def verdict(self, org_id: int, code: AdapterCode, *, replace: bool) -> dict[str, Any]:
        """What registering `code` would make, changing nothing (`seq deploy --dry-run`): `state` new, version
        (the next), same (this code is a version already) or replace (a name another class held)."""
        checked(code)
        sha = source_sha256(code.class_name, code.source)
        with self.db.reading() as session:
            adapter = _adapter(session, org_id, code.name)
            versions = _versions(session, adapter.id) if adapter is not None else []
        same = next((v for v in versions if v.sha256 == sha), None)
        if same is not None:
            return {"ok": True, "name": code.name, "state": "same", "version": same.number}
        if not versions:
            return {"ok": True, "name": code.name, "state": "new", "version": 1}
        held_by = versions[0].handler_ref
        if held_by != code.handler_ref:
            if not replace:
                raise _held(code, held_by)
            return {"ok": True, "name": code.name, "state": "replace", "version": versions[0].number + 1,
                    "held_by": held_by}  # fmt: skip
        return {"ok": True, "name": code.name, "state": "version", "version": versions[0].number + 1}

    def _register(
        self,
        session: Session,
        org_id: int,
        code: AdapterCode,
        pairs: adapter_pairs.Pairs,
        sha: str,
        replace: bool,
    ) -> tuple[Adapter, AdapterVersion, bool]:
        adapter = _adapter(session, org_id, code.name)
        if adapter is None:
            adapter = Adapter(org_id=org_id, name=code.name)
            session.add(adapter)
            session.flush()
        versions = _versions(session, adapter.id)
        same = next((v for v in versions if v.sha256 == sha), None)
        if same is not None:
            return adapter, same, False
        if versions and versions[0].handler_ref != code.handler_ref and not replace:
            raise _held(code, versions[0].handler_ref)
        version = AdapterVersion(
            adapter_id=adapter.id,
            number=(versions[0].number if versions else 0) + 1,
            sha256=sha,
            class_name=code.class_name,
            handler_ref=code.handler_ref,
            source=code.source,
            pairs=adapter_pairs.as_json(pairs),
            params=dict(code.params),
        )
        session.add(version)
        adapter.updated_at = utcnow()
        session.flush()
        return adapter, version, True

    def listed(self, org_id: int) -> list[tuple[Adapter, list[AdapterVersion]]]:
        """The org's adapters by name, each with its versions newest first."""
        with self.db.reading() as session:
            rows = session.execute(
                select(Adapter).where(Adapter.org_id == org_id).order_by(Adapter.name)
            ).scalars()
            return [(adapter, _versions(session, adapter.id)) for adapter in rows]

    def runs_with(self, org_id: int, name: str, *, active: bool = False) -> list[Run]:
        """The org's runs that named adapter `name` (only those waiting or playing, with `active`), newest
        first."""
        query = select(Run).where(Run.org_id == org_id).order_by(Run.received_at.desc(), Run.id.desc())
        if active:
            query = query.where(Run.status.in_(ACTIVE_RUNS))
        with self.db.reading() as session:
            return [
                run
                for run in session.execute(query).scalars()
                if ((run.resolved or {}).get("adapter") or {}).get("name") == name
            ]

    def one(self, org_id: int, name: str) -> tuple[Adapter, list[AdapterVersion]]:
        with self.db.reading() as session:
            adapter = _adapter(session, org_id, name)
            if adapter is None:
                raise self._unknown(session, org_id, name)
            return adapter, _versions(session, adapter.id)

    def version(
        self, org_id: int, name: str, number: int | None, field: str = "name"
    ) -> tuple[Adapter, AdapterVersion]:
        """A version of the org's adapter `name`: `number`, or its latest."""
        adapter, versions = self.one(org_id, name)
        if number is None:
            return adapter, versions[0]
        found = next((v for v in versions if v.number == number), None)
        if found is None:
            raise not_found(f"{field}: {name} has no version {number} (it has v1..v{versions[0].number})")
        return adapter, found

    def by_id(self, version_id: int) -> tuple[str, AdapterVersion] | None:
        """The adapter's name and the version `version_id`, for the worker that runs it."""
        with self.db.reading() as session:
            version = session.get(AdapterVersion, version_id)
            if version is None:
                return None
            adapter = session.get(Adapter, version.adapter_id)
            return (adapter.name, version) if adapter is not None else None

    def choose(
        self,
        org_id: int,
        ref: str,
        benchmark: tuple[str, Iterable[str]],
        policy: tuple[str, Iterable[str]],
    ) -> Chosen:
        """The version `ref` names, once one of its pairs lets this benchmark and policy run with it; a
        refusal listing the org's adapters that would fit otherwise."""
        name, number = parse_ref(ref)
        _, version = self.version(org_id, name, number, field="adapter")
        pairs = adapter_pairs.parse(version.pairs)
        hit = adapter_pairs.match(pairs, benchmark, policy)
        if hit is None:
            fits = self.fitting(org_id, benchmark, policy)
            raise Refusal(
                RefusalKind.CONFLICT,
                f"adapter: {name}@v{version.number} declares the pairs {adapter_pairs.describe(pairs)}, "
                f"not {benchmark[0]} → {policy[0]}: name one that does, or declare the pair in its code and "
                "deploy it again",
                field="adapter",
                listed=[Listed("fits", tuple(fits))],
            )
        pair = hit if isinstance(hit, str) else f"{hit.benchmark} → {hit.policy}"
        return Chosen(name, version, pair)

    def fitting(
        self, org_id: int, benchmark: tuple[str, Iterable[str]], policy: tuple[str, Iterable[str]]
    ) -> list[str]:
        """The org's adapters whose latest version declares this pair, the most specific first."""
        found: list[tuple[int, str]] = []
        with self.db.reading() as session:
            for adapter in session.execute(select(Adapter).where(Adapter.org_id == org_id)).scalars():
                latest = _versions(session, adapter.id)[0]
                hit = adapter_pairs.match(adapter_pairs.parse(latest.pairs), benchmark, policy)
                if hit is not None:
                    found.append((adapter_pairs.rank(hit), f"{adapter.name}@v{latest.number}"))
        return [label for _, label in sorted(found)]

    def ran(self, org_id: int, name: str, last_eval: Mapping[str, Any]) -> None:
        """Note the eval that last ran the adapter (what `seq adapter ls` shows)."""
        with self.db.writing() as session:
            adapter = _adapter(session, org_id, name)
            if adapter is not None:
                adapter.last_eval = dict(last_eval)

    def remove(self, org_id: int, name: str, running: Collection[str]) -> int:
        """Delete every version of `name`; refused while an eval (`running`, their ids) runs or waits on it.
        Returns how many versions went. The evals that ran it keep its name, version and sum."""
        if running:
            raise Refusal(
                RefusalKind.CONFLICT,
                f"name: eval {', '.join(running)} runs or waits with adapter {name}: cancel it first",
                field="name",
                listed=[Listed("evals_running", tuple(running))],
            )
        with self.db.writing() as session:
            adapter = _adapter(session, org_id, name)
            if adapter is None:
                raise self._unknown(session, org_id, name)
            versions = _versions(session, adapter.id)
            # The versions first, by statement: the unit of work may order two deletes either way.
            session.execute(delete(AdapterVersion).where(AdapterVersion.adapter_id == adapter.id))
            session.execute(delete(Adapter).where(Adapter.id == adapter.id))
            return len(versions)

    def _unknown(self, session: Session, org_id: int, name: str) -> Refusal:
        names = list(session.execute(select(Adapter.name).where(Adapter.org_id == org_id)).scalars())
        have = f" (you have {', '.join(sorted(names))})" if names else ""
        return not_found(f"name: no adapter {name!r} in your account{have}")


def _held(code: AdapterCode, held_by: str) -> Refusal:
    return Refusal(
        RefusalKind.CONFLICT,
        f"name: {code.name!r} is {held_by}'s; {code.handler_ref} takes it over only with --replace (or "
        "register it under another name: --name)",
        field="name",
    )


def _adapter(session: Session, org_id: int, name: str) -> Adapter | None:
    return session.execute(
        select(Adapter).where(Adapter.org_id == org_id, Adapter.name == name)
    ).scalar_one_or_none()


def _versions(session: Session, adapter_id: int) -> list[AdapterVersion]:
    """Newest first."""
    return list(
        session.execute(
            select(AdapterVersion)
            .where(AdapterVersion.adapter_id == adapter_id)
            .order_by(AdapterVersion.number.desc())
        ).scalars()
    )
