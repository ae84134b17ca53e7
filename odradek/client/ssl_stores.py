"""Reading Kafka's key stores and trust stores: PEM as it is, PKCS12 through ``cryptography``.

``ssl.keystore.type`` and ``ssl.truststore.type`` name the format; the file's first bytes
decide where the name leaves room, as Java's own key stores do:

- ``PEM``: the file, or the inline ``ssl.keystore.key`` / ``ssl.truststore.certificates``,
  as ``ssl`` reads it (``client/ssl_factory.py``).
- ``PKCS12`` (what ``keytool -genkeypair -storetype PKCS12`` and ``openssl pkcs12 -export``
  write; keytool's default since Java 9): a keystore holds one private key and its chain,
  opened with ``ssl.keystore.password`` (PKCS12 has one password per store: keytool ignores
  a separate ``-keypass``, so ``ssl.key.password`` is only tried when the store password does
  not open it, for stores written by other tools); a truststore holds certificates only
  (keytool's ``trustedCertEntry``), opened with ``ssl.truststore.password``.
- ``JKS``, Kafka's default type: since Java 9 keytool writes PKCS12 even into a file named
  ``kafka.server.keystore.jks``, and Java's JKS key store reads such a file as PKCS12
  (``keystore.type.compat``); so does odradek. A store in Java's own JKS format (it starts
  with the bytes ``FE ED FE ED``; JCEKS with ``CE CE CE CE``) is refused: Python has no
  maintained reader of it, and the error names the one keytool command that converts it.
- unset: odradek's default is PEM (KIP-651's type), but a file that is not PEM is read as
  Kafka's default JKS type would read it (PKCS12, or refused if it is Java's JKS).

Every failure is a ValueError naming the setting and the file, never a traceback: a wrong
password reads "wrong ssl.keystore.password", a file that is not PKCS12 says so.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile

STORE_TYPES = ("PEM", "PKCS12", "JKS")
_JAVA_MAGIC = {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}


def store_type(value: str | None, key: str) -> str | None:
    """``ssl.keystore.type`` / ``ssl.truststore.type`` in upper case (None when unset);
    ValueError for a type odradek does not read."""
    if value is None or not value.strip():
        return None
    kind = value.strip().upper()
    if kind not in STORE_TYPES:
        raise ValueError(f"{key}={value}: odradek reads PEM and PKCS12 stores (and JKS-typed stores "
                         f"that keytool wrote as PKCS12)")
    return kind


def effective_type(declared: str | None, path: str, key: str) -> str:
    """``PEM`` or ``PKCS12``: how to read the store at ``path`` declared as ``declared``
    (see the module doc); ValueError for Java's JKS or JCEKS format, with the command that
    converts the store."""
    if declared in ("PEM", "PKCS12"):
        return declared
    head = _read(path, key.rsplit(".", 1)[0])[:4]
    store = "keystore" if "keystore" in key else "truststore"
    java = _JAVA_MAGIC.get(head)
    if java:
        raise ValueError(
            f"ssl.{store}.location={path} is a Java {java} store, which odradek cannot read. "
            f"Convert it once to PKCS12 (same password): keytool -importkeystore -srckeystore {path} -srcstoretype {java} "
            f"-destkeystore kafka.{store}.p12 -deststoretype PKCS12, then set {key}=PKCS12 and "
            f"ssl.{store}.location to the .p12 file")
    if head[:1] == b"\x30":  # a DER SEQUENCE: PKCS12, as keytool writes since Java 9
        return "PKCS12"
    if declared == "JKS":
        raise ValueError(f"{key}=JKS, but {path} is neither a Java key store nor PKCS12 "
                         f"(a PEM file needs {key}=PEM)")
    return "PEM"


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot load {path}: {e.strerror or e}") from None


def _open_pkcs12(path: str, passwords: list[tuple[str, str | None]], what: str):
    """The parsed store, trying each ``(setting, password)`` in turn."""
    # cryptography loads only for a PKCS12 store: a client or broker without one (and every
    # CLI command) starts without its ~20 ms of imports.
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = _read(path, what)
    candidates = []
    for _, password in passwords:
        # an unset password may mean a store written with an empty one (openssl -passout pass:)
        candidates.extend([password.encode()] if password else [None, b""])
    for password in candidates:
        try:
            return pkcs12.load_pkcs12(data, password)
        except ValueError:
            continue
    settings = " or ".join(name for name, _ in passwords)
    raise ValueError(f"{what}: cannot open the PKCS12 store {path}: wrong {settings}, "
                     f"or not a PKCS12 file") from None


def load_pkcs12_keystore(ctx: ssl.SSLContext, path: str, store_password: str | None,
                         key_password: str | None) -> None:
    """Loads the one private key of a PKCS12 keystore and its chain (leaf first) into
    ``ctx``; ValueError when the store cannot be opened or holds no key."""
    passwords = [("ssl.keystore.password", store_password)]
    if key_password and key_password != store_password:
        passwords.append(("ssl.key.password", key_password))
    store = _open_pkcs12(path, passwords, "ssl.keystore")
    if store.key is None or store.cert is None:
        raise ValueError(f"ssl.keystore: the PKCS12 store {path} holds no private key with its certificate "
                         f"(a truststore given as a keystore?)")
    from cryptography.hazmat.primitives import serialization

    # The key leaves memory for a file only encrypted, under a one-off password.
    once = secrets.token_urlsafe(24)
    pem = store.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(once.encode()))
    for cert in [store.cert, *store.additional_certs]:
        pem += cert.certificate.public_bytes(serialization.Encoding.PEM)
    load_cert_chain_from_memory(ctx, pem, once)


def pkcs12_trusted_pem(path: str, password: str | None) -> str:
    """The certificates of a PKCS12 truststore as PEM text (for ``load_verify_locations``)."""
    store = _open_pkcs12(path, [("ssl.truststore.password", password)], "ssl.truststore")
    certs = [c.certificate for c in store.additional_certs] + ([store.cert.certificate] if store.cert else [])
    if not certs:
        raise ValueError(f"ssl.truststore: the PKCS12 store {path} holds no certificate")
    from cryptography.hazmat.primitives import serialization

    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def load_cert_chain_from_memory(ctx: ssl.SSLContext, pem: bytes, password: str | None) -> None:
    """``ctx.load_cert_chain`` for a key and chain held in memory.

    Python's ``ssl`` reads a certificate chain only from a file path, so the PEM goes to a file
    that only this process may read (mode 0600, created exclusively, in a fresh 0700 directory)
    and is removed as soon as OpenSSL has read it."""
    with tempfile.TemporaryDirectory(prefix="odradek-ssl-") as tmp:
        path = os.path.join(tmp, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
