"""Artifacts: the local store (atomic, keys cannot escape), signed expiring links, the contract's paging."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from yardstick.core.artifacts import (
    ArtifactNotFound,
    ArtifactStore,
    LocalArtifactStore,
    submission_hex,
    validate_key,
)
from yardstick.core.paging import key_page as page
from yardstick.core.signing import ARTIFACTS_PATH, ArtifactUrlRefused, UrlSigner, load_secret

SUB = 0x1F2E3D4C5B6A7988
SECRET = b"s" * 32
NOW = 1_700_000_000.0


# --- keys ----------------------------------------------------------------------------------------------

BAD_KEYS = [
    ("", "must not be empty"),
    ("/etc/passwd", "must be relative"),
    ("../escape", "'..' segments"),
    ("a/../../escape", "'..' segments"),
    ("a/..", "'..' segments"),
    ("./a", "'.' segments"),
    ("a\\b", "backslash"),
    ("..\\escape", "backslash"),
    ("a\x00b", "NUL"),
    ("a\nb", "control characters"),
    ("a//b", "empty segments"),
    ("a/", "empty segments"),
    ("a\udc80", "UTF-8"),
    ("k" * 501, "at most 500 characters"),
    ("x/" + "y" * 256, "at most 255 bytes"),
]


@pytest.mark.parametrize(("key", "rule"), BAD_KEYS)
def test_bad_keys_are_refused_naming_key_and_rule(key: str, rule: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as err:
        validate_key(key)
    assert rule in str(err.value)
    assert repr(key) in str(err.value)
    store = LocalArtifactStore(tmp_path / "art")
    with pytest.raises(ValueError, match="artifact key"):
        store.put(SUB, key, b"x", "text/plain")
    with pytest.raises(ValueError, match="artifact key"):
        store.exists(SUB, key)
    assert not (tmp_path / "art").exists() or not any((tmp_path / "art").rglob("*escape*"))
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize(
    "key",
    [
        "result.json",
        "attempts/0/episodes/0003/record.json",
        "logs/policy.log",
        "a b/ü.txt",
        "v..x",
        ".hidden",
    ],
)
def test_good_keys_pass(key: str) -> None:
    assert validate_key(key) == key


def test_submission_ids_in_range_only() -> None:
    assert submission_hex(SUB) == "1f2e3d4c5b6a7988"
    for bad in (0, -1, 1 << 63):
        with pytest.raises(ValueError, match="submission_id"):
            submission_hex(bad)
    with pytest.raises(TypeError):
        submission_hex(True)


# --- the local store -------------------------------------------------------------------------------------


def test_put_reads_back_in_the_documented_layout(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    assert isinstance(store, ArtifactStore)
    key = "attempts/0/episodes/0003/record.json"
    assert store.put(SUB, key, b'{"ok": true}', "application/json") == 12
    on_disk = tmp_path / "1f2e3d4c5b6a7988" / "attempts" / "0" / "episodes" / "0003" / "record.json"
    assert on_disk.read_bytes() == b'{"ok": true}'
    assert store.path(SUB, key) == on_disk
    assert store.exists(SUB, key)
    with store.open(SUB, key) as stream:
        assert stream.read() == b'{"ok": true}'
    assert not store.exists(SUB, "result.json")
    assert not store.exists(SUB + 1, key)
    with pytest.raises(ArtifactNotFound, match=r"result\.json"):
        store.open(SUB, "result.json")
    with pytest.raises(ArtifactNotFound):
        store.open(SUB, "attempts")  # a folder is not an artifact


def test_put_replaces_whole_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    store.put(SUB, "result.json", b"first, and longer", "application/json")
    assert store.put(SUB, "result.json", b"second", "application/json") == 6
    assert store.path(SUB, "result.json").read_bytes() == b"second"
    assert list((tmp_path / ".tmp").iterdir()) == []
    assert store.keys(SUB) == [("result.json", 6)]


def test_put_is_all_or_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = LocalArtifactStore(tmp_path)
    store.put(SUB, "result.json", b"old", "application/json")

    def crash(*_: Any) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        store.put(SUB, "result.json", b"new and half-written", "application/json")
    monkeypatch.undo()
    assert store.path(SUB, "result.json").read_bytes() == b"old"
    assert list((tmp_path / ".tmp").iterdir()) == []
    assert store.keys(SUB) == [("result.json", 3)]


def test_keys_lists_every_object_with_its_size_in_key_order(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    assert store.keys(SUB) == []
    for key, data in [("result.json", b"{}"), ("attempts/1/x", b"abc"), ("attempts/0/x", b""), ("b", b"1")]:
        store.put(SUB, key, data, "application/octet-stream")
    store.put(SUB + 1, "other.json", b"not mine", "application/json")
    assert store.keys(SUB) == [("attempts/0/x", 0), ("attempts/1/x", 3), ("b", 1), ("result.json", 2)]
    assert stat.S_IMODE(store.path(SUB, "b").stat().st_mode) == 0o644


def test_keys_under_a_prefix_lists_that_folder_alone_and_refuses_a_way_out(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    for key in ("logs/2-b.jsonl", "logs/1-a.jsonl", "attempts/1/episodes/0/video.mp4", "result.json"):
        store.put(SUB, key, b"x", "application/octet-stream")
    assert store.keys(SUB, "logs/") == [("logs/1-a.jsonl", 1), ("logs/2-b.jsonl", 1)]
    assert store.keys(SUB, "nothing-here/") == []
    with pytest.raises(ValueError):
        store.keys(SUB, "../")


def test_a_key_cannot_be_both_object_and_folder(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    store.put(SUB, "logs", b"a file", "text/plain")
    with pytest.raises(ValueError, match=r"'logs/policy\.log'.*already an artifact"):
        store.put(SUB, "logs/policy.log", b"x", "text/plain")
    store.put(SUB, "episodes/0/meta.json", b"{}", "application/json")
    with pytest.raises(ValueError, match=r"'episodes'.*already a folder"):
        store.put(SUB, "episodes", b"x", "text/plain")
    assert store.keys(SUB) == [("episodes/0/meta.json", 2), ("logs", 6)]


def test_a_planted_symlink_does_not_lead_out_of_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"private")
    store = LocalArtifactStore(tmp_path / "art")
    store.put(SUB, "result.json", b"{}", "application/json")
    (tmp_path / "art" / submission_hex(SUB) / "link").symlink_to(outside)
    with pytest.raises(ValueError, match="outside the submission's folder"):
        store.open(SUB, "link/secret")
    with pytest.raises(ValueError, match="outside the submission's folder"):
        store.put(SUB, "link/new", b"x", "text/plain")
    assert not (outside / "new").exists()
    assert store.keys(SUB) == [("result.json", 2)]


# --- signed links ----------------------------------------------------------------------------------------


def parts(url: str) -> tuple[str, str, str, str]:
    """(submission hex, decoded key, expires, sig) of a signed link, as the gateway's route receives them."""
    split = urlsplit(url)
    assert split.path.startswith(ARTIFACTS_PATH + "/")
    sub_hex, _, quoted = split.path[len(ARTIFACTS_PATH) + 1 :].partition("/")
    query = parse_qs(split.query, strict_parsing=True)
    return sub_hex, unquote(quoted), query["expires"][0], query["sig"][0]


def refused(signer: UrlSigner, *args: str, now: float = NOW) -> str:
    with pytest.raises(ArtifactUrlRefused) as err:
        signer.verify(*args, now=now)
    assert err.value.reason in str(err.value)
    return err.value.reason


def test_sign_and_verify_round_trip() -> None:
    signer = UrlSigner(SECRET, ttl_s=600, clock=lambda: NOW)
    url = signer.sign(SUB, "attempts/0/episodes/0003/record.json")
    assert url.startswith("/v1/artifacts/1f2e3d4c5b6a7988/attempts/0/episodes/0003/record.json?expires=")
    sub_hex, key, expires, sig = parts(url)
    assert (sub_hex, key, expires) == (
        "1f2e3d4c5b6a7988",
        "attempts/0/episodes/0003/record.json",
        "1700000600",
    )
    assert len(sig) == 64
    signer.verify(sub_hex, key, expires, sig)
    signer.verify(sub_hex, key, expires, sig, now=NOW + 599)
    absolute = signer.sign(SUB, "result.json", base_url="http://127.0.0.1:8000/")
    assert absolute.startswith("http://127.0.0.1:8000/v1/artifacts/1f2e3d4c5b6a7988/result.json?")
    signer.verify(*parts(absolute))


def test_keys_are_percent_encoded_per_segment() -> None:
    signer = UrlSigner(SECRET, clock=lambda: NOW)
    key = "videos/a b?c#d&e%f/ü.mp4"
    url = signer.sign(SUB, key)
    path = urlsplit(url).path
    assert path == "/v1/artifacts/1f2e3d4c5b6a7988/videos/a%20b%3Fc%23d%26e%25f/%C3%BC.mp4"
    assert "?" not in path and "#" not in url
    signer.verify(*parts(url))


def test_tampering_is_a_bad_signature() -> None:
    signer = UrlSigner(SECRET, ttl_s=600, clock=lambda: NOW)
    sub_hex, key, expires, sig = parts(signer.sign(SUB, "result.json"))
    assert refused(signer, sub_hex, "diagnostics.json", expires, sig) == "bad signature"
    assert refused(signer, submission_hex(SUB + 1), key, expires, sig) == "bad signature"
    assert refused(signer, sub_hex, key, str(int(expires) - 1), sig) == "bad signature"
    assert refused(signer, sub_hex, key, str(int(expires) + 10_000_000), sig) == "bad signature"
    flipped = ("0" if sig[0] != "0" else "1") + sig[1:]
    assert refused(signer, sub_hex, key, expires, flipped) == "bad signature"
    other = UrlSigner(b"t" * 32, ttl_s=600, clock=lambda: NOW)
    assert refused(other, sub_hex, key, expires, sig) == "bad signature"


def test_malformed_parts_are_refused_as_malformed() -> None:
    signer = UrlSigner(SECRET, clock=lambda: NOW)
    sub_hex, key, expires, sig = parts(signer.sign(SUB, "result.json"))
    for bad in ("", "0x1f", "1F2E3D4C5B6A7988", "01f", "-1f", "8000000000000000", "1" * 17, "zz"):
        assert refused(signer, bad, key, expires, sig) == "malformed"
    for bad_key in ("", "../result.json", "/result.json", "a\x00b"):
        assert refused(signer, sub_hex, bad_key, expires, sig) == "malformed"
    for bad_exp in ("", "-1", "1.5", "1e9", "١٢٣", "9" * 13):
        assert refused(signer, sub_hex, key, bad_exp, sig) == "malformed"
    for bad_sig in ("", sig[:-1], sig.upper(), sig + "0", "g" * 64):
        assert refused(signer, sub_hex, key, expires, bad_sig) == "malformed"


def test_expired_links_are_refused_on_the_injected_clock() -> None:
    clock = [NOW]
    signer = UrlSigner(SECRET, ttl_s=600, clock=lambda: clock[0])
    link = parts(signer.sign(SUB, "result.json"))
    signer.verify(*link)
    clock[0] = NOW + 599.9
    signer.verify(*link)
    clock[0] = NOW + 600
    with pytest.raises(ArtifactUrlRefused) as err:
        signer.verify(*link)
    assert err.value.reason == "expired"
    clock[0] = NOW + 86_400
    with pytest.raises(ArtifactUrlRefused, match="expired"):
        signer.verify(*link)


def test_links_valid_for_longer_than_the_ttl_are_refused() -> None:
    # Correctly signed (the same secret) by a laxer configuration: the checker's ttl still bounds it.
    lax = UrlSigner(SECRET, ttl_s=30 * 86_400, clock=lambda: NOW)
    strict = UrlSigner(SECRET, ttl_s=3600, skew_s=60, clock=lambda: NOW)
    link = parts(lax.sign(SUB, "result.json"))
    lax.verify(*link)
    assert refused(strict, *link) == "too far ahead"
    # Within ttl + skew is honoured (a signer whose clock runs a little ahead).
    ahead = parts(strict.sign(SUB, "result.json", now=NOW + 60))
    strict.verify(*ahead)
    assert refused(strict, *parts(strict.sign(SUB, "result.json", now=NOW + 61))) == "too far ahead"


def test_signer_refuses_bad_configuration_and_bad_input() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        UrlSigner(b"short")
    with pytest.raises(ValueError, match="ttl_s"):
        UrlSigner(SECRET, ttl_s=0)
    signer = UrlSigner(SECRET)
    with pytest.raises(ValueError, match="must be relative"):
        signer.sign(SUB, "/abs")
    with pytest.raises(ValueError, match="submission_id"):
        signer.sign(0, "result.json")
    assert "sss" not in repr(signer)


def test_load_secret_makes_it_once_and_keeps_it_private(tmp_path: Path) -> None:
    where = tmp_path / "data" / "artifact-secret"
    first = load_secret(where)
    assert len(first) == 32
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert load_secret(where) == first
    assert [p.name for p in where.parent.iterdir()] == ["artifact-secret"]
    where.write_text("not hex")
    with pytest.raises(ValueError, match="hex"):
        load_secret(where)


# --- paging -----------------------------------------------------------------------------------------------

ENTRIES = [
    ("result.json", 10),
    ("episodes/0002/meta.json", 3),
    ("episodes/0000/meta.json", 1),
    ("logs/policy.log", 7),
    ("episodes/0001/meta.json", 2),
    ("diagnostics.json", 5),
]
IN_ORDER = sorted(ENTRIES)


def test_page_sorts_and_uses_the_default_limit() -> None:
    rows, nxt = page(ENTRIES, prefix=None, after=None, limit=None)
    assert rows == IN_ORDER and nxt is None
    many = [(f"k{i:04d}", i) for i in range(250)][::-1]
    rows, nxt = page(many, prefix=None, after=None, limit=None)
    assert [k for k, _ in rows] == [f"k{i:04d}" for i in range(100)]
    assert nxt == "k0099"


def test_page_prefix_is_a_plain_key_prefix() -> None:
    rows, nxt = page(ENTRIES, prefix="episodes/", after=None, limit=None)
    assert [k for k, _ in rows] == [f"episodes/000{i}/meta.json" for i in range(3)]
    assert nxt is None
    assert page(ENTRIES, prefix="nothing/", after=None, limit=None) == ([], None)
    assert page(ENTRIES, prefix="", after=None, limit=None) == (IN_ORDER, None)


def test_page_after_is_exclusive_and_need_not_exist() -> None:
    rows, _ = page(ENTRIES, prefix=None, after="episodes/0000/meta.json", limit=2)
    assert [k for k, _ in rows] == ["episodes/0001/meta.json", "episodes/0002/meta.json"]
    rows, _ = page(ENTRIES, prefix=None, after="episodes/0001", limit=None)
    assert rows[0][0] == "episodes/0001/meta.json"
    assert page(ENTRIES, prefix=None, after="zzz", limit=None) == ([], None)


def test_next_is_the_last_key_returned_and_absent_on_the_last_page() -> None:
    rows, nxt = page(ENTRIES, prefix=None, after=None, limit=2)
    assert nxt == rows[-1][0] == "episodes/0000/meta.json"
    rows, nxt = page(ENTRIES, prefix=None, after=IN_ORDER[3][0], limit=2)
    assert rows == IN_ORDER[4:6] and nxt is None  # exactly full and nothing after: last page
    rows, nxt = page(ENTRIES, prefix=None, after=IN_ORDER[2][0], limit=3)
    assert rows == IN_ORDER[3:6] and nxt is None


def test_limit_is_clamped_to_the_cap_and_must_be_positive() -> None:
    many = [(f"k{i:04d}", i) for i in range(50)]
    rows, nxt = page(many, prefix=None, after=None, limit=10_000, cap=20)
    assert len(rows) == 20 and nxt == "k0019"
    rows, _ = page(many, prefix=None, after=None, limit=None, cap=5, default=100)
    assert len(rows) == 5
    for bad in (0, -3):
        with pytest.raises(ValueError, match="limit"):
            page(many, prefix=None, after=None, limit=bad)
    with pytest.raises(ValueError, match="twice"):
        page([("a", 1), ("a", 2)], prefix=None, after=None, limit=None)


@pytest.mark.parametrize("limit", [1, 2, 3, 7, 100])
@pytest.mark.parametrize("prefix", [None, "episodes/", "e"])
def test_paging_with_after_next_visits_every_key_once(limit: int, prefix: str | None) -> None:
    entries = ENTRIES + [(f"episodes/{i:04d}/frames/{j}.jpg", i * j) for i in range(5) for j in range(4)]
    want = [e for e in sorted(entries) if prefix is None or e[0].startswith(prefix)]
    seen: list[tuple[str, int]] = []
    after: str | None = None
    pages = 0
    while True:
        rows, nxt = page(entries, prefix=prefix, after=after, limit=limit)
        pages += 1
        assert len(rows) <= limit
        seen += rows
        if nxt is None:
            break
        assert nxt == rows[-1][0]
        after = nxt
    assert seen == want
    assert pages == max(1, -(-len(want) // limit))
