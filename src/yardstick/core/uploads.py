"""The signed, resumable targets a volume's files are sent to: each file of an open upload gets a target; a
target opens a session for its file (opening another starts the file over); a session takes the file's bytes
in order, a span at a time (a span that does not start at what is held so far writes nothing, and the answer
says what is held, so the sender goes on from there), and says what it holds when asked.

Targets and sessions are capabilities: they need no key, and are signed (HMAC-SHA256 under a key derived from
the install's secret for these links alone, so no artifact link can pass for one) over the upload, the file
and the session, valid until the upload expires. A session's state is the upload's rows and what the volume
store holds, never this process's memory: a session outlives a gateway's restart, and the sender resumes it.
Where they are served, and how a span is spoken, is the door's (`sequences.uploads`: a cloud bucket's
resumable uploads, as the Sequences SDK speaks them); a target is signed under the address the door names.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from yardstick.core import limits
from yardstick.core.refusals import Refusal, RefusalKind, bad_request, not_found
from yardstick.core.signing import ArtifactUrlRefused, UrlSigner
from yardstick.core.volume_store import VolumeStore
from yardstick.store.db import Database
from yardstick.store.models import VolumeUpload, VolumeUploadFile, utcnow
from yardstick.store.states import UploadState


@dataclass(frozen=True)
class Span:
    """Bytes `first`..`last` of a file (both None: a question of what is held) of `total` bytes (None: the
    sender does not say), as the door read them from `field` (what a refusal names)."""

    first: int | None
    last: int | None
    total: int | None
    field: str = "span"


@dataclass(frozen=True)
class Held:
    """What one file's session holds after a request: `held` of its `size` bytes."""

    path: str
    held: int
    size: int

    @property
    def whole(self) -> bool:
        return self.held == self.size


class Uploads:
    def __init__(
        self,
        db: Database,
        store: VolumeStore,
        install_secret: bytes,
        *,
        ttl_s: int = limits.UPLOAD_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.store = store
        key = hmac.new(install_secret, b"yardstick volume uploads", hashlib.sha256).digest()
        # Signed under no path of its own: each link is made under the address its door names.
        self.signer = UrlSigner(key, ttl_s=ttl_s, path="", clock=clock)

    def target(self, upload_id: int, position: int, targets: str) -> str:
        """The signed address, under the door's `targets`, that opens a session for one file of an upload."""
        return self.signer.sign(upload_id, str(position), base_url=targets)

    def open(self, upload_hex: str, position: str, expires: str, sig: str, targets: str) -> str:
        """Open a session for the file a target names, and give its signed address (under the door's
        `targets`): the file starts over."""
        self.verify(upload_hex, position, expires, sig)
        session = secrets.token_hex(16)
        with self.db.writing() as db_session:
            upload, row = _file(db_session, upload_hex, position)
            row.session, row.arrived_md5 = session, None
            volume_id, upload_id = upload.volume_id, upload.id
            # Within the transaction, so a chunk of the earlier session is refused from now on (its session is
            # no longer the file's); one already past that check may still land: the commit's md5 refuses it.
            self.store.restart(volume_id, upload_id, row.position)
        return self.signer.sign(upload_id, f"{row.position}/{session}", base_url=targets)

    def put(
        self, upload_hex: str, position: str, session: str, expires: str, sig: str, span: Span, data: bytes
    ) -> Held:
        """Write a chunk of a file through its session (or only say what it holds)."""
        self.verify(upload_hex, f"{position}/{session}", expires, sig)
        with self.db.reading() as db_session:
            upload, row = _file(db_session, upload_hex, position)
        if row.session != session:
            raise Refusal(
                RefusalKind.CONFLICT,
                f"session: a newer session was opened for {row.path}; send it there (or start over)",
            )
        if span.total is not None and span.total != row.size:
            raise bad_request(
                f"{span.field}: {row.path} is {row.size:,} bytes as its upload declared, not {span.total:,}"
            )
        held = self.store.held(upload.volume_id, upload.id, row.position)
        if span.first is None or span.last is None:
            if data:
                raise bad_request(f"{span.field}: a question of what is held carries no body")
            return Held(row.path, held, row.size)
        if span.last - span.first + 1 != len(data):
            raise bad_request(
                f"{span.field}: bytes {span.first}-{span.last} are {span.last - span.first + 1:,} bytes,"
                f" and the body is {len(data):,}"
            )
        if span.last >= row.size:
            raise bad_request(f"{span.field}: ends past the last byte of {row.path} ({row.size:,} bytes)")
        held = self.store.append(upload.volume_id, upload.id, row.position, span.first, data)
        if held == row.size:
            # The digest is taken once, as the last byte lands, so a commit need not read every file again.
            _, md5 = self.store.digest(upload.volume_id, upload.id, row.position)
            with self.db.writing() as db_session:
                found = db_session.get(VolumeUploadFile, row.id)
                if found is not None and found.session == session:
                    found.arrived_md5 = md5
        return Held(row.path, held, row.size)

    def verify(self, upload_hex: str, key: str, expires: str, sig: str) -> None:
        """Refuse an address this install did not sign, or one past its time (FORBIDDEN, saying why)."""
        try:
            self.signer.verify(upload_hex, key, expires, sig)
        except ArtifactUrlRefused as refused:
            raise Refusal(
                RefusalKind.FORBIDDEN,
                f"sig: this upload address is refused ({refused.reason}); run seq volume put again",
            ) from None


def _file(session: Session, upload_hex: str, position: str) -> tuple[VolumeUpload, VolumeUploadFile]:
    """The open upload and its file a (verified) address names."""
    upload = session.get(VolumeUpload, int(upload_hex, 16))
    if upload is None:
        raise not_found(f"upload: no upload {upload_hex}")
    if upload.state != UploadState.OPEN:
        raise Refusal(
            RefusalKind.CONFLICT,
            f"upload: {upload_hex} is {upload.state}: a later upload replaced it, or it was committed",
        )
    if upload.expires_at <= utcnow():
        raise Refusal(
            RefusalKind.FORBIDDEN,
            f"upload: {upload_hex} expired at {upload.expires_at.isoformat()}; run seq volume put again",
        )
    row = session.execute(
        select(VolumeUploadFile).where(
            VolumeUploadFile.upload_id == upload.id, VolumeUploadFile.position == int(position)
        )
    ).scalar_one_or_none()
    if row is None or row.held:
        raise not_found(f"upload: {upload_hex} sends no file at {position}")
    return upload, row
