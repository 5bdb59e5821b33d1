"""Throwaway certificates for TLS tests: a CA, server and client certificates signed by it, and the stores Dagger
users hold them in (PEM, PKCS12, JKS through the JDK's keytool)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


@dataclass
class Issued:
    """A certificate and its key, as PEM files in ``dir``."""

    name: str
    cert: Path
    key: Path
    _cert: x509.Certificate
    _key: ec.EllipticCurvePrivateKey


class CertificateAuthority:
    """A CA in ``dir``; :meth:`issue` signs certificates for 127.0.0.1."""

    def __init__(self, directory: Path, name: str = "dagger test CA"):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = self.dir / f"{name.replace(' ', '-')}.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str) -> Issued:
        """A certificate for ``name`` and 127.0.0.1 / localhost (server and client use)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
            .sign(self._key, hashes.SHA256())
        )
        cert_path, key_path = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return Issued(name, cert_path, key_path, cert, key)

    def truststore(self, kind: str, password: str) -> Path:
        """The CA certificate in a trust store of ``kind`` (PEM, PKCS12 or JKS)."""
        if kind == "PEM":
            return self.cert
        path = self.dir / f"truststore.{kind.lower()}"
        path.unlink(missing_ok=True)  # made again: keytool adds to a store that exists
        if kind == "PKCS12":
            path.write_bytes(
                pkcs12.serialize_java_truststore(
                    [pkcs12.PKCS12Certificate(self._cert, b"ca")],
                    serialization.BestAvailableEncryption(password.encode()),
                )
            )
            return path
        _keytool(
            "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.cert), "-keystore", str(path),
            "-storetype", "JKS", "-storepass", password,
        )  # fmt: skip
        return path

    def keystore(self, issued: Issued, kind: str, password: str, key_password: str | None = None) -> Path:
        """``issued``'s certificate and key in a key store of ``kind`` (PKCS12, JKS, or PEM: one file with the
        certificate, the CA's and the unencrypted key); a JKS store's key under ``key_password`` when given."""
        if kind == "PEM":
            pem = self.dir / f"{issued.name}-keystore.pem"
            pem.write_bytes(
                issued._cert.public_bytes(serialization.Encoding.PEM)
                + self._cert.public_bytes(serialization.Encoding.PEM)
                + issued._key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
            )
            return pem
        p12 = self.dir / f"{issued.name}.p12"
        p12.write_bytes(
            pkcs12.serialize_key_and_certificates(
                issued.name.encode(),
                issued._key,
                issued._cert,
                [self._cert],
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        if kind == "PKCS12":
            return p12
        jks = self.dir / f"{issued.name}.jks"
        jks.unlink(missing_ok=True)
        _keytool(
            "-importkeystore", "-noprompt", "-srckeystore", str(p12), "-srcstoretype", "PKCS12", "-srcstorepass",
            password, "-destkeystore", str(jks), "-deststoretype", "JKS", "-deststorepass", password,
        )  # fmt: skip
        if key_password:
            _keytool(
                "-keypasswd", "-alias", issued.name, "-keypass", password, "-new", key_password, "-keystore",
                str(jks), "-storepass", password,
            )  # fmt: skip
        return jks


def _keytool(*args: str) -> None:
    done = subprocess.run(["keytool", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"keytool {args[0]} failed: {done.stdout}{done.stderr}")
