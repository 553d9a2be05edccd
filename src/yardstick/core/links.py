"""A run's artifacts as a caller reaches them: listed a page at a time, each as a signed, expiring link — the
store's own where it serves its objects itself (an S3 bucket's presigned GET), else the gateway's, signed by
the install."""

from __future__ import annotations

from sqlalchemy import bindparam, select

from yardstick.core import limits
from yardstick.core.artifacts import ArtifactStore
from yardstick.core.paging import key_page
from yardstick.core.refusals import bad_request
from yardstick.core.signing import UrlSigner
from yardstick.store.db import Database
from yardstick.store.models import Artifact, Run
from yardstick.store.states import RunStatus

# Built once: what `submissions.get` asks on every read of a finished run.
_KEYS_OF_RUN = select(Artifact.key).where(
    Artifact.submission_id == bindparam("run_id"), Artifact.key.in_(bindparam("keys", expanding=True))
)


class Links:
    def __init__(self, db: Database, signer: UrlSigner, store: ArtifactStore) -> None:
        self.db = db
        self.signer = signer
        self.store = store

    def link(self, run_id: int, key: str, base_url: str) -> str:
        """One object's expiring link, made now."""
        served = self.store.presigned(run_id, key)
        return served if served is not None else self.signer.sign(run_id, key, base_url=base_url)

    def page(
        self, run: Run, prefix: str | None, after: str | None, limit: int | None, base_url: str
    ) -> tuple[list[tuple[str, int, str]], str | None]:
        """One page of a finished run's artifacts as (key, size, signed link), and the key to page on from."""
        if run.status != RunStatus.FINISHED:
            raise bad_request(
                f"id: submission {run.id:x} is {run.status}: artifacts are listed for a finished"
                " run (a failed run's records are linked from submissions.get)"
            )
        with self.db.reading() as session:
            entries = [
                (a.key, a.size)
                for a in session.execute(select(Artifact).where(Artifact.submission_id == run.id)).scalars()
            ]
        rows, after_key = key_page(
            entries,
            prefix=prefix,
            after=after,
            limit=limit,
            cap=limits.ARTIFACT_PAGE_MAX,
            default=limits.ARTIFACT_PAGE_DEFAULT,
        )
        return [(key, size, self.link(run.id, key, base_url)) for key, size in rows], after_key

    def written(self, run_id: int, keys: tuple[str, ...]) -> tuple[str, ...]:
        """Those of `keys` the run wrote, in one query."""
        with self.db.reading() as session:
            return tuple(session.execute(_KEYS_OF_RUN, {"run_id": run_id, "keys": list(keys)}).scalars())

    def signed(self, run_id: int, keys: tuple[str, ...], base_url: str) -> dict[str, str]:
        """A link to each of `keys` (ones the run wrote), signed now: links expire, so none is kept."""
        return {key: self.link(run_id, key, base_url) for key in keys}
