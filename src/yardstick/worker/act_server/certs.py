"""A certificate an act worker makes for itself: self-signed, so no CA is involved, and pinned by the
robots through its SHA-256 fingerprint, which the gateway hands them with the worker's address."""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Certificate", "make_certificate"]


@dataclass(frozen=True)
class Certificate:
    cert_file: Path
    key_file: Path
    fingerprint: str  # SHA-256 of the certificate's DER, lowercase hex: what a robot pins


def make_certificate(folder: Path, host: str) -> Certificate:
    """A fresh EC P-256 key and a certificate for `host` (an address or a name), valid a year, written to
    `folder` (the key readable by this user alone)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "yardstick act worker")])
    try:
        alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt = x509.DNSName(host)
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / "worker.crt", folder / "worker.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.touch(mode=0o600)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    der = cert.public_bytes(serialization.Encoding.DER)
    return Certificate(cert_file, key_file, hashlib.sha256(der).hexdigest())
