"""An org's secrets: named sets of environment variables its hosted code may be handed. Values are sealed
(Fernet: AES-128-CBC with an HMAC, keyed from the install's secret) before they are stored; the only way out
is `unsealed`, which the worker calls to set the environment of the process that names them. Nothing returns a
value over the API or writes one to a log."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy import select

from yardstick.core.refusals import Refusal, RefusalKind, not_found
from yardstick.store.db import Database
from yardstick.store.models import Secret, utcnow


@dataclass(frozen=True)
class SecretInfo:
    name: str
    env_keys: tuple[str, ...]
    created_at: str
    last_used_at: str | None


def _fernet(install_secret: bytes) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"yardstick secrets").derive(
        install_secret
    )
    return Fernet(base64.urlsafe_b64encode(key))


class Secrets:
    def __init__(self, db: Database, install_secret: bytes) -> None:
        self.db = db
        self._fernet = _fernet(install_secret)

    def seal(self, values: dict[str, str]) -> str:
        """`values` sealed for a row to keep (an image endpoint's registry credential): only `unseal`,
        with the install's secret, reads them back."""
        return self._fernet.encrypt(json.dumps(values).encode()).decode()

    def unseal(self, sealed: str) -> dict[str, str]:
        found: dict[str, str] = json.loads(self._fernet.decrypt(sealed.encode()))
        return found

    def put(self, org_id: int, name: str, env: dict[str, str]) -> SecretInfo:
        """Set a secret (a new one, or its values replaced whole)."""
        sealed = self._fernet.encrypt(json.dumps(env).encode()).decode()
        with self.db.writing() as session:
            row = session.execute(
                select(Secret).where(Secret.org_id == org_id, Secret.name == name)
            ).scalar_one_or_none()
            if row is None:
                row = Secret(org_id=org_id, name=name, env_keys=sorted(env), sealed=sealed)
                session.add(row)
            else:
                row.env_keys, row.sealed, row.created_at = sorted(env), sealed, utcnow()
            session.flush()
            return _info(row)

    def listed(self, org_id: int) -> list[SecretInfo]:
        with self.db.reading() as session:
            rows = session.execute(
                select(Secret).where(Secret.org_id == org_id).order_by(Secret.name)
            ).scalars()
            return [_info(row) for row in rows]

    def remove(self, org_id: int, name: str) -> None:
        with self.db.writing() as session:
            row = session.execute(
                select(Secret).where(Secret.org_id == org_id, Secret.name == name)
            ).scalar_one_or_none()
            if row is None:
                raise not_found(f"name: no secret {name!r} in your organization")
            session.delete(row)

    def missing(self, org_id: int, names: Iterable[str]) -> list[str]:
        """Those of `names` the org has no secret by."""
        wanted = list(dict.fromkeys(names))
        with self.db.reading() as session:
            found = set(
                session.execute(
                    select(Secret.name).where(Secret.org_id == org_id, Secret.name.in_(wanted))
                ).scalars()
            )
        return [name for name in wanted if name not in found]

    def unsealed(self, org_id: int, names: Iterable[str]) -> dict[str, str]:
        """The environment the named secrets make, for the process that runs code naming them. A secret that
        is gone, or sealed under another install's secret, is refused by name."""
        env: dict[str, str] = {}
        with self.db.writing() as session:
            for name in dict.fromkeys(names):
                row = session.execute(
                    select(Secret).where(Secret.org_id == org_id, Secret.name == name)
                ).scalar_one_or_none()
                if row is None:
                    raise not_found(f"secrets: no secret {name!r} in the organization")
                try:
                    env.update(json.loads(self._fernet.decrypt(row.sealed.encode())))
                except InvalidToken:
                    raise Refusal(
                        RefusalKind.INTERNAL, f"secrets: {name!r} was sealed by another install's secret"
                    ) from None
                row.last_used_at = utcnow()
        return env


def _info(row: Secret) -> SecretInfo:
    return SecretInfo(
        row.name,
        tuple(row.env_keys),
        row.created_at.isoformat(),
        row.last_used_at.isoformat() if row.last_used_at else None,
    )
