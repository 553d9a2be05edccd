"""The container registries an install pulls policy images from, and the pinning of a submitted image: its
tag resolved to the digest of the bytes it names now, checked before any episode is played.

A submission names an image by tag (`127.0.0.1:5000/org/policy:v1`); the run must play the bytes the tag
named when it was submitted, whatever is pushed under the tag later, so the gateway asks the registry for
the manifest (the Docker registry HTTP API v2, which every registry serves) and records its digest; workers
pull by that digest. What can be known before playing is checked here and is the caller's fault, as the
contract says (`image_unpullable`, `image_too_large`): a registry this install does not pull from, no such
image, a credential refused, an image for another architecture, one larger than the install's limit.

A credential is used for these requests only and never kept by this module: the caller seals it for the
worker's pull. Only registries an administrator named are asked (`yardstick server --registry URL`), so a
submission cannot make the gateway fetch from any address it likes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import platform
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

__all__ = ["ImageRef", "ImageRefused", "Pinned", "Registries", "decimal_size", "parse_reference"]

MANIFEST_TYPES: Final = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
INDEX_TYPES: Final = MANIFEST_TYPES[:2]
_REFERENCE: Final = re.compile(
    r"(?:(?P<registry>[A-Za-z0-9.-]+(?::[0-9]+)?)/)?(?P<repository>[a-z0-9]+(?:[._/-][a-z0-9]+)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?(?:@(?P<digest>sha256:[0-9a-f]{64}))?"
)
# Docker's and Go's names of this machine's architecture.
_ARCH: Final = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
TIMEOUT_S: Final = 20.0


class ImageRefused(Exception):
    """An image that cannot be played, the caller's fault: `too_large` for one past the install's limit,
    else unpullable. The message says why and names no credential."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


@dataclass(frozen=True)
class ImageRef:
    registry: str  # host[:port], as the reference wrote it
    repository: str
    tag: str | None
    digest: str | None

    def pinned(self, digest: str) -> str:
        """The reference a worker pulls: the registry and repository at `digest`."""
        return f"{self.registry}/{self.repository}@{digest}"


@dataclass(frozen=True)
class Pinned:
    reference: str  # registry/repository@sha256:...
    digest: str
    size_bytes: int


def parse_reference(reference: str) -> ImageRef:
    found = _REFERENCE.fullmatch(reference.strip())
    registry = found.group("registry") if found is not None else None
    if (
        found is None
        or registry is None
        or not ("." in registry or ":" in registry or registry == "localhost")
    ):
        raise ImageRefused(
            f"{reference!r} names no registry: write the registry's host first (HOST[:PORT]/REPOSITORY:TAG)"
        )
    return ImageRef(registry, found.group("repository"), found.group("tag"), found.group("digest"))


class Registries:
    """The registries named in `urls` (each `http://HOST:PORT` or `https://HOST[:PORT]`), and the largest
    image (its config and layers, compressed) the install plays."""

    def __init__(self, urls: Sequence[str], *, max_image_bytes: int) -> None:
        self.by_host = {urlsplit(url).netloc: url.rstrip("/") for url in urls}
        self.max_image_bytes = max_image_bytes

    def base_of(self, ref: ImageRef) -> str:
        base = self.by_host.get(ref.registry)
        if base is None:
            named = ", ".join(sorted(self.by_host)) or "none"
            raise ImageRefused(
                f"the registry {ref.registry} is not one this install pulls from (it pulls from: {named})"
            )
        return base

    def pin(self, reference: str, credential: tuple[str, str] | None) -> Pinned:
        """The digest `reference` names now (its own, when it carries one), once its manifest says it is
        for this machine's architecture and within the size limit."""
        ref = parse_reference(reference)
        base = self.base_of(ref)
        with httpx.Client(timeout=TIMEOUT_S, follow_redirects=True) as client:
            session = _Session(client, base, ref.repository, credential)
            digest, manifest = session.manifest(ref.digest or ref.tag or "latest")
            if manifest.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
                digest, manifest = session.manifest(_for_this_machine(manifest, reference))
            else:
                config = session.blob_json(str(manifest.get("config", {}).get("digest", "")))
                arch = str(config.get("architecture") or "")
                if arch and arch != _machine():
                    raise ImageRefused(
                        f"{reference} is an image for {arch}; this install plays {_machine()} images"
                    )
        if ref.digest is not None and digest != ref.digest:
            raise ImageRefused(f"{reference}: the registry serves {digest} under that digest, not it")
        # What a pull transfers, as the contract counts it: the config blob and every layer, compressed.
        blobs = [manifest.get("config") or {}, *(manifest.get("layers") or [])]
        size = sum(int(blob.get("size") or 0) for blob in blobs)
        if size > self.max_image_bytes:
            raise ImageRefused(
                f"{reference} is {size:,} bytes compressed (its config and layers); the limit is "
                f"{decimal_size(self.max_image_bytes)} compressed ({self.max_image_bytes:,} bytes)",
                too_large=True,
            )
        return Pinned(ref.pinned(digest), digest, size)


def decimal_size(count: int) -> str:
    """`count` bytes as the contract writes a budget: in GB or MB where it is a whole number of them."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6)):
        if count >= scale and count % scale == 0:
            return f"{count // scale:,} {unit}"
    return f"{count:,} bytes"


def _machine() -> str:
    machine = platform.machine()
    return _ARCH.get(machine, machine)


def _for_this_machine(index: dict[str, Any], reference: str) -> str:
    found = [
        str(entry["digest"])
        for entry in index.get("manifests") or []
        if (entry.get("platform") or {}).get("architecture") == _machine()
        and (entry.get("platform") or {}).get("os", "linux") == "linux"
    ]
    if not found:
        offered = sorted(
            {str((entry.get("platform") or {}).get("architecture")) for entry in index.get("manifests") or []}
        )
        raise ImageRefused(
            f"{reference} has no image for linux/{_machine()} (it has {', '.join(offered) or 'none'})"
        )
    return found[0]


class _Session:
    """Requests to one repository, authenticated as the registry asks: anonymously first, then with the
    credential, by HTTP basic auth or a bearer token from the registry's token service."""

    def __init__(
        self, client: httpx.Client, base: str, repository: str, credential: tuple[str, str] | None
    ) -> None:
        self.client = client
        self.base = base
        self.repository = repository
        self.credential = credential
        self._auth: dict[str, str] = {}

    def manifest(self, reference: str) -> tuple[str, dict[str, Any]]:
        answer = self._get(
            f"/v2/{self.repository}/manifests/{reference}", {"Accept": ", ".join(MANIFEST_TYPES)}
        )
        digest = (
            answer.headers.get("Docker-Content-Digest")
            or f"sha256:{hashlib.sha256(answer.content).hexdigest()}"
        )
        return digest, _json(answer, f"{self.repository}:{reference}'s manifest")

    def blob_json(self, digest: str) -> dict[str, Any]:
        if not digest:
            return {}
        return _json(self._get(f"/v2/{self.repository}/blobs/{digest}", {}), f"{self.repository}'s config")

    def _get(self, path: str, headers: dict[str, str]) -> httpx.Response:
        try:
            answer = self.client.get(self.base + path, headers={**headers, **self._auth})
            if answer.status_code == 401 and not self._auth:
                self._auth = self._authorize(answer.headers.get("WWW-Authenticate", ""))
                answer = self.client.get(self.base + path, headers={**headers, **self._auth})
        except httpx.HTTPError as exc:
            raise ImageRefused(
                f"the registry {self.base} could not be reached: {type(exc).__name__}"
            ) from None
        if answer.status_code in (401, 403):
            said = "refused the credential" if self.credential else "needs a credential (image_credential)"
            raise ImageRefused(f"the registry {self.base} {said} for {self.repository}")
        if answer.status_code == 404:
            raise ImageRefused(
                f"the registry {self.base} has no {self.repository} at {path.rsplit('/', 1)[-1]}"
            )
        if answer.status_code >= 400:
            raise ImageRefused(
                f"the registry {self.base} answered {answer.status_code} for {self.repository}"
            )
        return answer

    def _authorize(self, challenge: str) -> dict[str, str]:
        if self.credential is None:
            raise ImageRefused(
                f"the registry {self.base} needs a credential (image_credential) for {self.repository}"
            )
        user, password = self.credential
        if challenge.lower().startswith("basic"):
            pair = base64.b64encode(f"{user}:{password}".encode()).decode()
            return {"Authorization": f"Basic {pair}"}
        fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = fields.pop("realm", None)
        if realm is None:
            raise ImageRefused(f"the registry {self.base} asks for an authentication it does not describe")
        try:
            token = self.client.get(realm, params=fields, auth=(user, password))
        except httpx.HTTPError as exc:
            raise ImageRefused(
                f"the registry's token service could not be reached: {type(exc).__name__}"
            ) from None
        if token.status_code >= 400:
            raise ImageRefused(f"the registry {self.base} refused the credential for {self.repository}")
        body = _json(token, "the registry's token")
        return {"Authorization": f"Bearer {body.get('token') or body.get('access_token')}"}


def _json(answer: httpx.Response, what: str) -> dict[str, Any]:
    try:
        found = json.loads(answer.content)
    except ValueError:
        raise ImageRefused(f"{what} is not JSON") from None
    if not isinstance(found, dict):
        raise ImageRefused(f"{what} is not a JSON object")
    return found
