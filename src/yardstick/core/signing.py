"""Signed, expiring links, and the install's secret that signs them.

`UrlSigner` mints `<path>/<submission hex>/<key>?expires=<unix>&sig=<hex>` (an artifact under
`ARTIFACTS_PATH`, which the gateway serves; a volume's upload target under the address its door names) and
checks one. `load_secret` reads the install's secret, making it once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal
from urllib.parse import quote, urlencode

from yardstick.core.artifacts import ID_LIMIT, submission_hex, validate_key

__all__ = ["ARTIFACTS_PATH", "ArtifactUrlRefused", "RefusalReason", "UrlSigner", "load_secret"]

# The path the gateway serves signed links under; its route is `ARTIFACTS_PATH + "/{submission}/{key:path}"`.
ARTIFACTS_PATH = "/v1/artifacts"

# Submission ids are bare lowercase hex on the wire, below `ID_LIMIT`.
_SUBMISSION_HEX = re.compile(r"[1-9a-f][0-9a-f]{0,15}")
_EXPIRES = re.compile(r"[0-9]{1,12}")
_SIG = re.compile(r"[0-9a-f]{64}")

RefusalReason = Literal["malformed", "bad signature", "expired", "too far ahead"]


class ArtifactUrlRefused(Exception):
    """A signed artifact link that is not honoured; `reason` says why (the gateway answers 403).

    - `malformed`: a part is not in the form the signer writes (id, key, expiry or signature);
    - `bad signature`: the signature does not match the id, key and expiry (anything tampered with);
    - `expired`: the expiry has passed;
    - `too far ahead`: correctly signed, but valid for longer than the signer's ttl (plus skew) allows,
      which no signer of this configuration mints (a leaked secret, or a link from a laxer config).
    """

    def __init__(self, reason: RefusalReason, detail: str = "") -> None:
        super().__init__(f"artifact link refused: {reason}" + (f" ({detail})" if detail else ""))
        self.reason: RefusalReason = reason


class UrlSigner:
    """Mints and checks signed, expiring artifact links.

    `sig` is HMAC-SHA256(secret, f"{submission hex}\\n{key}\\n{expires}") in lowercase hex. Neither an id
    nor a key can hold a newline, so the signed message names exactly one (id, key, expiry). The secret
    comes from the caller (see `load_secret`); it never appears in a link or a message.
    """

    def __init__(
        self,
        secret: bytes,
        *,
        ttl_s: int = 3600,
        skew_s: int = 60,
        clock: Callable[[], float] = time.time,
        path: str = ARTIFACTS_PATH,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise ValueError("secret must be at least 16 bytes")
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or ttl_s <= 0:
            raise ValueError(f"ttl_s must be a positive whole number of seconds, not {ttl_s!r}")
        if isinstance(skew_s, bool) or not isinstance(skew_s, int) or skew_s < 0:
            raise ValueError(f"skew_s must be a whole number of seconds >= 0, not {skew_s!r}")
        self._secret = secret
        self.ttl_s = ttl_s
        self.skew_s = skew_s
        self.clock = clock
        self.path = path.rstrip("/")

    def __repr__(self) -> str:  # never the secret
        return f"UrlSigner(ttl_s={self.ttl_s}, skew_s={self.skew_s}, path={self.path!r})"

    def _sig(self, sub_hex: str, key: str, expires: str) -> str:
        message = f"{sub_hex}\n{key}\n{expires}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def sign(
        self, submission_id: int, key: str, *, now: float | None = None, base_url: str | None = None
    ) -> str:
        """`<path>/<submission hex>/<key, percent-encoded per segment>?expires=<unix>&sig=<hex>`.

        With `base_url` (say, the request's own base), the link is absolute, as the contract's examples are.
        """
        sub_hex = submission_hex(submission_id)
        validate_key(key)
        moment = self.clock() if now is None else now
        expires = str(int(moment) + self.ttl_s)
        quoted = "/".join(quote(segment, safe="") for segment in key.split("/"))
        query = urlencode({"expires": expires, "sig": self._sig(sub_hex, key, expires)})
        link = f"{self.path}/{sub_hex}/{quoted}?{query}"
        return base_url.rstrip("/") + link if base_url else link

    def verify(
        self, submission_hex: str, key: str, expires: str, sig: str, *, now: float | None = None
    ) -> None:
        """Return if the link is honoured, else raise ArtifactUrlRefused.

        `key` is the decoded key (the route's path parameter). The signature is checked before the clock,
        in constant time, so a tampered link reads `bad signature` whatever part was changed.
        """
        if (
            not isinstance(submission_hex, str)
            or not _SUBMISSION_HEX.fullmatch(submission_hex)
            or int(submission_hex, 16) >= ID_LIMIT
        ):
            raise ArtifactUrlRefused("malformed", "submission id is not a bare lowercase hex id below 2**63")
        try:
            validate_key(key)
        except (TypeError, ValueError) as exc:
            raise ArtifactUrlRefused("malformed", str(exc)) from None
        if not isinstance(expires, str) or not _EXPIRES.fullmatch(expires):
            raise ArtifactUrlRefused("malformed", "expires is not a unix time in seconds")
        if not isinstance(sig, str) or not _SIG.fullmatch(sig):
            raise ArtifactUrlRefused("malformed", "sig is not 64 lowercase hex digits")
        if not hmac.compare_digest(self._sig(submission_hex, key, expires), sig):
            raise ArtifactUrlRefused("bad signature")
        moment = self.clock() if now is None else now
        expiry = int(expires)
        if moment >= expiry:
            raise ArtifactUrlRefused("expired")
        if expiry > moment + self.ttl_s + self.skew_s:
            raise ArtifactUrlRefused("too far ahead", f"valid for more than {self.ttl_s}s")


def load_secret(path: Path) -> bytes:
    """The signing secret kept at `path` (hex text, mode 0600), made once with 32 random bytes if absent.

    Creation is atomic and race-free: the file appears whole (a link from a finished temporary file) and
    two processes starting at once end up with the same secret.
    """
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        try:
            with os.fdopen(fd, "w") as out:  # mkstemp makes it 0600
                out.write(secrets.token_hex(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # another process won: use theirs
                os.link(tmp_name, path)
        finally:
            os.unlink(tmp_name)
    text = path.read_text().strip()
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{path}: the artifact signing secret must be hex text") from None
    if len(secret) < 16:
        raise ValueError(f"{path}: the artifact signing secret must be at least 16 bytes (32 hex digits)")
    return secret
