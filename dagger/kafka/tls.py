"""Java key and trust stores (JKS, PKCS12), as Dagger users have them, turned into the PEM text librdkafka takes.

librdkafka reads CA certificates as PEM and client keys as PEM or PKCS12; it cannot read JKS. At start the driver
reads each store once — a JKS store through the JDK's ``keytool`` (every Spark machine has a JDK), a PKCS12 store
with ``cryptography`` — and hands librdkafka the certificates and key as text (``ssl.ca.pem``,
``ssl.certificate.pem``, ``ssl.key.pem``), so executors need no copy of the store files.

A wrong password or an unreadable store is a :class:`~dagger.errors.DaggerConfigError` naming the key and the file,
never the password.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from dagger.errors import DaggerConfigError


def store_type(path: str, declared: str | None) -> str:
    """The store's type: as declared (``*_TYPE``), else read from the file (PEM text, JKS's magic number, or
    PKCS12)."""
    if declared:
        return declared
    try:
        head = Path(path).read_bytes()[:64]
    except OSError:
        return "PEM"  # the missing file is reported by the reader
    if head.lstrip().startswith(b"-----BEGIN"):
        return "PEM"
    return "JKS" if head[:4] == b"\xfe\xed\xfe\xed" else "PKCS12"


def _keytool() -> str:
    found = shutil.which("keytool")
    if found is None:
        raise DaggerConfigError(
            "a JKS store needs the JDK's keytool to be read, and none is on PATH; install a JDK or convert the "
            "store to PKCS12 (`keytool -importkeystore -deststoretype PKCS12`)"
        )
    return found


def _as_pkcs12(path: str, password: str | None, key: str, key_password: str | None = None) -> bytes:
    """The bytes of a JKS store converted to PKCS12 with the store's password (keytool); ``key_password`` opens
    its key entry when it differs from the store's."""
    if not password:
        raise DaggerConfigError(f"{key}: a JKS store needs its password (the matching *_PASSWORD key)")
    # the passwords never on a command line
    env = {"DAGGER_STORE_PASSWORD": password, "DAGGER_KEY_PASSWORD": key_password or "", "PATH": "/usr/bin:/bin"}
    # keytool opens a key with its own password only when told which entry: the store's private key's alias
    alias = ["-srcalias", _key_alias(path, key, env)] if key_password else []
    with tempfile.TemporaryDirectory(prefix="dagger-jks-") as tmp:
        target = Path(tmp) / "store.p12"
        _run_keytool(
            [
                "-importkeystore",
                "-noprompt",
                "-srckeystore",
                path,
                "-srcstoretype",
                "JKS",
                "-destkeystore",
                str(target),
                "-deststoretype",
                "PKCS12",
                "-srcstorepass:env",
                "DAGGER_STORE_PASSWORD",
                "-deststorepass:env",
                "DAGGER_STORE_PASSWORD",
                *([*alias, "-srckeypass:env", "DAGGER_KEY_PASSWORD"] if key_password else []),
            ],
            env,
            f"{key}: cannot read the JKS store {path}",
        )
        return target.read_bytes()


def _key_alias(path: str, key: str, env: dict[str, str]) -> str:
    """The alias of the one private key entry of a JKS store (``keytool -list``)."""
    listing = ["-list", "-keystore", path, "-storetype", "JKS", "-storepass:env", "DAGGER_STORE_PASSWORD"]
    done = _run_keytool(listing, env, f"{key}: cannot read the JKS store {path}")
    aliases = [line.split(",")[0] for line in done.stdout.splitlines() if ", PrivateKeyEntry," in line]
    if len(aliases) != 1:
        raise DaggerConfigError(
            f"{key}: the JKS store {path} holds {len(aliases)} private keys ({', '.join(aliases) or 'none'}); a "
            "client key store holds exactly one"
        )
    return aliases[0]


def _run_keytool(args: list[str], env: dict[str, str], failure: str) -> subprocess.CompletedProcess:
    """keytool with ``args`` (passwords in ``env``, never on the command line); a failure is ``failure``: and
    keytool's reason, its secrets masked."""
    done = subprocess.run([_keytool(), *args], capture_output=True, text=True, timeout=60, env=env)
    if done.returncode != 0:
        raise DaggerConfigError(f"{failure}: {_reason(done, env)}")
    return done


def _reason(done: subprocess.CompletedProcess, env: dict[str, str]) -> str:
    """keytool's error line, its secrets masked."""
    why = (done.stdout + done.stderr).strip().splitlines()
    reason = next((line for line in why if "error" in line.lower()), why[-1] if why else "keytool failed")
    for secret in (env["DAGGER_STORE_PASSWORD"], env["DAGGER_KEY_PASSWORD"]):
        reason = reason.replace(secret, "***") if secret else reason
    return reason


def _load(path: str, kind: str, password: str | None, key: str, key_password: str | None = None):  # noqa: ANN202
    from cryptography.hazmat.primitives.serialization import pkcs12

    if not Path(path).is_file():
        raise DaggerConfigError(f"{key}: {path} does not exist")
    data = _as_pkcs12(path, password, key, key_password) if kind == "JKS" else Path(path).read_bytes()
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise DaggerConfigError(
            f"{key}: cannot read the {kind} store {path}: wrong password or not a {kind} store"
        ) from None


def _pem(certificate) -> str:  # noqa: ANN001
    from cryptography.hazmat.primitives.serialization import Encoding

    return certificate.public_bytes(Encoding.PEM).decode()


def truststore_pem(path: str, kind: str, password: str | None, key: str) -> str:
    """Every certificate of a trust store (JKS, PKCS12 or PEM) as PEM text."""
    if kind == "PEM":
        if not Path(path).is_file():
            raise DaggerConfigError(f"{key}: {path} does not exist")
        return Path(path).read_text()
    store = _load(path, kind, password, key)
    certificates = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certificates.insert(0, store.cert.certificate)
    if not certificates:
        raise DaggerConfigError(f"{key}: the {kind} store {path} holds no certificate")
    return "".join(_pem(c) for c in certificates)


def keystore_pem(path: str, kind: str, password: str | None, key_password: str | None, key: str) -> tuple[str, str]:
    """A key store's (JKS or PKCS12) client certificate chain and private key as PEM text (the key unencrypted:
    it stays in the job's memory, as the store's password does)."""
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    store = _load(path, kind, password, key, key_password)
    if store.key is None or store.cert is None:
        raise DaggerConfigError(f"{key}: the {kind} store {path} holds no private key with its certificate")
    chain = _pem(store.cert.certificate) + "".join(_pem(c.certificate) for c in store.additional_certs)
    private = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()
    return chain, private
