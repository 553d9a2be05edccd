"""An uploaded code bundle is unpacked into a folder of its own, or refused naming the field and the rule,
with nothing left on disk; the same bytes give the same folder."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from yardstick.hosted.bundle import MAX_CODE_BUNDLE_BYTES, MAX_FILES, pack, unpack
from yardstick.hosted.errors import BundleRefused

EXAMPLES = Path("/work/shared/sequences/examples")
REACH = (EXAMPLES / "reach_bench.py").read_text() if EXAMPLES.is_dir() else "import seq\n"


def gz_tar(add: Callable[[tarfile.TarFile], None]) -> bytes:
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        add(tar)
    return buffer.getvalue()


def member(name: str, data: bytes = b"x = 1\n", **fields: object) -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        for key, value in fields.items():
            setattr(info, key, value)
        tar.addfile(info, io.BytesIO(data) if info.isfile() else None)

    return add


def both(*adds: Callable[[tarfile.TarFile], None]) -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        for one in adds:
            one(tar)

    return add


def upload(raw: bytes) -> tuple[str, str, str]:
    return "tar.gz", base64.b64encode(raw).decode(), hashlib.sha256(raw).hexdigest()


def zeros(name: str, size: int) -> Callable[[tarfile.TarFile], None]:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = size
        tar.addfile(info, _Zeros(size))

    return add


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n


def test_a_folder_packed_as_the_sdk_packs_it_unpacks_whole(tmp_path: Path) -> None:
    source = tmp_path / "reach-bench"
    (source / "helpers").mkdir(parents=True)
    (source / "benchmark.py").write_text(REACH)
    (source / "helpers" / "goals.yaml").write_text("left: -0.5\n")
    fmt, data, sha = pack(source)
    bundle = unpack(fmt, data, sha, tmp_path / "versions" / sha)
    assert (bundle.files, bundle.sha256) == (2, sha)
    assert bundle.size == len(REACH) + len("left: -0.5\n")
    assert (bundle.folder / "benchmark.py").read_text() == REACH
    assert (bundle.folder / "helpers" / "goals.yaml").stat().st_mode & 0o777 == 0o644
    # The same bytes again: the same folder, nothing added beside it.
    before = sorted(p.name for p in (tmp_path / "versions").iterdir())
    assert unpack(fmt, data, sha, tmp_path / "versions" / sha) == bundle
    assert sorted(p.name for p in (tmp_path / "versions").iterdir()) == before == [sha, f"{sha}.bundle.json"]


def test_packing_is_deterministic(tmp_path: Path) -> None:
    (tmp_path / "b.py").write_text("b = 2\n")
    (tmp_path / "a.py").write_text("a = 1\n")
    assert pack(tmp_path) == pack(tmp_path)


BAD: list[tuple[str, Callable[[bytes], tuple[str, str, str]], str, str]] = [
    (
        "wrong sha256",
        lambda raw: ("tar.gz", base64.b64encode(raw).decode(), "0" * 64),
        "code.sha256",
        "does not match",
    ),
    ("sha256 not hex", lambda raw: ("tar.gz", base64.b64encode(raw).decode(), "xyz"), "code.sha256", "hex"),
    (
        "not base64",
        lambda raw: ("tar.gz", "not base64!!", hashlib.sha256(b"").hexdigest()),
        "code.data",
        "base64",
    ),
    ("another format", lambda raw: ("zip", *upload(raw)[1:]), "code.format", "tar.gz"),
]


@pytest.mark.parametrize(("case", "make", "field", "rule"), BAD, ids=[b[0] for b in BAD])
def test_a_bundle_with_a_bad_envelope_is_refused(
    tmp_path: Path, case: str, make: Callable[[bytes], tuple[str, str, str]], field: str, rule: str
) -> None:
    raw = gz_tar(member("benchmark.py"))
    with pytest.raises(BundleRefused) as refused:
        unpack(*make(raw), tmp_path / "version")
    assert (refused.value.field, rule in refused.value.rule) == (field, True)
    assert list(tmp_path.iterdir()) == []


def _fifo() -> Callable[[tarfile.TarFile], None]:
    return member("pipe", b"", type=tarfile.FIFOTYPE)


MEMBERS: list[tuple[str, Callable[[], bytes], str]] = [
    ("a ../ member", lambda: gz_tar(member("../evil.py")), "climbs out"),
    ("a nested ../", lambda: gz_tar(member("pkg/../../evil.py")), "climbs out"),
    ("an absolute path", lambda: gz_tar(member("/etc/cron.d/evil")), "absolute"),
    ("a symlink", lambda: gz_tar(member("link", b"", type=tarfile.SYMTYPE, linkname="/etc/passwd")), "link"),
    (
        "a hard link",
        lambda: gz_tar(both(member("a.py"), member("b.py", b"", type=tarfile.LNKTYPE, linkname="a.py"))),
        "link",
    ),
    ("a device", lambda: gz_tar(member("dev", b"", type=tarfile.CHRTYPE, devmajor=1, devminor=3)), "device"),
    ("a fifo", lambda: gz_tar(_fifo()), "fifo"),
    ("a member twice", lambda: gz_tar(both(member("a.py"), member("a.py"))), "twice"),
    ("not gzip", lambda: b"PK\x03\x04 a zip file", "not gzip"),
    ("gzip of no tar", lambda: gzip.compress(b"hello, I am no tar archive" * 40, mtime=0), "gzip tar"),
    ("an empty archive", lambda: gz_tar(lambda tar: None), "empty"),
    (
        "one file over the per-file limit",
        lambda: gz_tar(zeros("weights.bin", 40 * 1024 * 1024)),
        "a file is at most",
    ),
    (
        "a compression bomb",
        lambda: gz_tar(both(*(zeros(f"w{i}.bin", 30 * 1024 * 1024) for i in range(3)))),
        "more than",
    ),
    (
        "too many files",
        lambda: gz_tar(both(*(member(f"f{i}.py", b"") for i in range(MAX_FILES + 1)))),
        "files",
    ),
]


@pytest.mark.parametrize(("case", "make", "rule"), MEMBERS, ids=[m[0] for m in MEMBERS])
def test_an_unsafe_or_malformed_archive_is_refused_and_nothing_stays(
    tmp_path: Path, case: str, make: Callable[[], bytes], rule: str
) -> None:
    raw = make()
    assert len(raw) <= MAX_CODE_BUNDLE_BYTES  # each of these is small on the wire
    versions = tmp_path / "versions"
    with pytest.raises(BundleRefused) as refused:
        unpack(*upload(raw), versions / "v1")
    assert refused.value.field == "code.data"
    assert rule in refused.value.rule, refused.value.rule
    assert not versions.exists() or list(versions.iterdir()) == []
    assert not (tmp_path.parent / "evil.py").exists()


def test_a_bundle_over_8_mib_is_refused_before_it_is_read(tmp_path: Path) -> None:
    raw = b"\x1f\x8b" + bytes(MAX_CODE_BUNDLE_BYTES)
    with pytest.raises(BundleRefused) as refused:
        unpack(*upload(raw), tmp_path / "v1")
    assert refused.value.field == "code.data"
    assert str(MAX_CODE_BUNDLE_BYTES) in refused.value.rule
    assert list(tmp_path.iterdir()) == []


def test_other_bytes_for_a_folder_that_exists_are_not_taken_for_it(tmp_path: Path) -> None:
    one, two = gz_tar(member("a.py", b"a = 1\n")), gz_tar(member("a.py", b"a = 2\n"))
    unpack(*upload(one), tmp_path / "v")
    with pytest.raises(FileExistsError):
        unpack(*upload(two), tmp_path / "v")
    assert (tmp_path / "v" / "a.py").read_text() == "a = 1\n"
