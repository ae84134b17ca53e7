"""TLS contexts from Kafka's ``ssl.*`` settings (Kafka's ``SslFactory`` / ``DefaultSslEngineFactory``).

odradek reads PEM (``ssl.keystore.type=PEM``, the default here, KIP-651's type) and PKCS12
(``ssl.keystore.type=PKCS12``, what keytool writes, also when the type says JKS); a store in
Java's own JKS format is refused with the keytool command that converts it
(``client/ssl_stores.py``). The settings:

- key and certificate chain: ``ssl.keystore.location`` (a PEM file holding the private key and
  the chain, leaf first, or a PKCS12 keystore opened with ``ssl.keystore.password``) or
  ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` (PEM text inline);
  ``ssl.key.password`` decrypts an encrypted PEM key.
- trusted certificates: ``ssl.truststore.location`` (a PEM file of CA certificates, or a PKCS12
  truststore opened with ``ssl.truststore.password``) or ``ssl.truststore.certificates``
  (inline PEM); without either, the system's CAs.
- ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``): the lowest and highest become the
  context's version bounds. ``ssl.cipher.suites``: IANA names as Java writes them
  (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``) or OpenSSL's; TLS 1.3 suites are always on
  (Python's ``ssl`` cannot restrict them), so those names are accepted and change nothing.
- a server's ``ssl.client.auth``: ``none`` (no certificate asked), ``requested`` (asked; a
  client without one is let in as ``User:ANONYMOUS``), ``required`` (no certificate, no
  connection).
- a client's ``ssl.endpoint.identification.algorithm``: ``https`` (the default) checks that the
  server's certificate names the host connected to; empty turns the check off.

``SslConfig.from_lookup(get)`` reads the settings through ``get(name) -> str | None`` (a
properties dict's ``get``, or a broker's per-listener lookup) and raises ``ValueError`` naming
the key for a bad value; ``server_context()`` / ``client_context()`` build the contexts and
raise ``ValueError`` when a file cannot be read or a key does not match its certificate.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass

from odradek.client.ssl_stores import (
    effective_type,
    load_cert_chain_from_memory,
    load_pkcs12_keystore,
    pkcs12_trusted_pem,
    store_type,
)

PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# ssl.* keys odradek reads; every one can also be set per listener on a broker
# (listener.name.<listener>.ssl.keystore.location ...).
SSL_KEYS = (
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.cipher.suites", "ssl.protocol", "ssl.endpoint.identification.algorithm", "ssl.principal.mapping.rules",
)


@dataclass(frozen=True)
class SslConfig:
    keystore_type: str | None = None  # as set (PEM, PKCS12, JKS) or None; see ssl_stores
    truststore_type: str | None = None
    keystore_location: str | None = None
    keystore_key: str | None = None
    keystore_certificate_chain: str | None = None
    key_password: str | None = None
    keystore_password: str | None = None
    truststore_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification: bool = True
    principal_mapping_rules: str = "DEFAULT"

    @classmethod
    def from_lookup(cls, get) -> "SslConfig":
        keystore_type = store_type(get("ssl.keystore.type"), "ssl.keystore.type")
        truststore_type = store_type(get("ssl.truststore.type"), "ssl.truststore.type")
        client_auth = (get("ssl.client.auth") or "none").strip().lower()
        if client_auth not in CLIENT_AUTH:
            raise ValueError(f"ssl.client.auth={client_auth}: expected none, requested or required")
        protocols = _list(get("ssl.enabled.protocols")) or ["TLSv1.2", "TLSv1.3"]
        unknown = [p for p in protocols if p not in PROTOCOLS]
        if unknown:
            raise ValueError(f"ssl.enabled.protocols: unknown {', '.join(unknown)} (known: {', '.join(PROTOCOLS)})")
        suites = tuple(_list(get("ssl.cipher.suites")))
        for suite in suites:
            openssl_cipher_name(suite)  # raises for a name it cannot read
        key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
        if bool(key) != bool(chain):
            raise ValueError("ssl.keystore.key and ssl.keystore.certificate.chain go together")
        if key and get("ssl.keystore.location"):
            raise ValueError("ssl.keystore.location and ssl.keystore.key cannot both be set")
        if (key and keystore_type not in (None, "PEM")
                or get("ssl.truststore.certificates") and truststore_type not in (None, "PEM")):
            raise ValueError("ssl.keystore.key and ssl.truststore.certificates are PEM text: "
                             "they need ssl.keystore.type=PEM and ssl.truststore.type=PEM")
        return cls(
            keystore_type=keystore_type, truststore_type=truststore_type,
            keystore_password=get("ssl.keystore.password") or None,
            truststore_password=get("ssl.truststore.password") or None,
            keystore_location=get("ssl.keystore.location") or None, keystore_key=key or None,
            keystore_certificate_chain=chain or None, key_password=get("ssl.key.password") or None,
            truststore_location=get("ssl.truststore.location") or None,
            truststore_certificates=get("ssl.truststore.certificates") or None, client_auth=client_auth,
            enabled_protocols=tuple(protocols), cipher_suites=suites,
            endpoint_identification=_endpoint_identification(get("ssl.endpoint.identification.algorithm")),
            principal_mapping_rules=get("ssl.principal.mapping.rules") or "DEFAULT",
        )

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_key)

    def server_context(self) -> ssl.SSLContext:
        """A listener's context: needs a keystore; asks for client certificates per
        ``ssl.client.auth``, verified against the truststore."""
        if not self.has_keystore:
            raise ValueError("an SSL listener needs ssl.keystore.location (or ssl.keystore.key and "
                             "ssl.keystore.certificate.chain)")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._configure(ctx)
        ctx.verify_mode = CLIENT_AUTH[self.client_auth]
        if self.client_auth != "none":
            self._load_trust(ctx, ssl.Purpose.CLIENT_AUTH)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        """A client's context: verifies the server against the truststore (and its host name
        when endpoint identification is on); presents the keystore, if any, for mutual TLS."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = self.endpoint_identification
        ctx.verify_mode = ssl.CERT_REQUIRED
        self._configure(ctx)
        self._load_trust(ctx, ssl.Purpose.SERVER_AUTH)
        return ctx

    def _configure(self, ctx: ssl.SSLContext) -> None:
        versions = [PROTOCOLS[p] for p in self.enabled_protocols]
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
        names = [n for n in (openssl_cipher_name(s) for s in self.cipher_suites) if n]
        if names:
            try:
                ctx.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise ValueError(f"ssl.cipher.suites: none of {', '.join(self.cipher_suites)} is available") from None
        if self.has_keystore:
            self._load_keystore(ctx)

    def _load_keystore(self, ctx: ssl.SSLContext) -> None:
        if self.keystore_location and effective_type(self.keystore_type, self.keystore_location,
                                                     "ssl.keystore.type") == "PKCS12":
            try:
                load_pkcs12_keystore(ctx, self.keystore_location, self.keystore_password, self.key_password)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"ssl.keystore: cannot load the key and certificate chain of "
                                 f"{self.keystore_location}: {e}") from None
            return
        try:
            if self.keystore_location:
                ctx.load_cert_chain(self.keystore_location, password=self.key_password)
                return
            pem = _pem(self.keystore_key) + "\n" + _pem(self.keystore_certificate_chain) + "\n"
            load_cert_chain_from_memory(ctx, pem.encode(), self.key_password)
        except (OSError, ssl.SSLError) as e:
            where = self.keystore_location or "ssl.keystore.key/ssl.keystore.certificate.chain"
            raise ValueError(f"ssl.keystore: cannot load the key and certificate chain from {where}: {e}") from None

    def _load_trust(self, ctx: ssl.SSLContext, purpose) -> None:
        try:
            if self.truststore_location and effective_type(self.truststore_type, self.truststore_location,
                                                           "ssl.truststore.type") == "PKCS12":
                ctx.load_verify_locations(cadata=pkcs12_trusted_pem(self.truststore_location,
                                                                    self.truststore_password))
            elif self.truststore_location:
                ctx.load_verify_locations(cafile=self.truststore_location)
            elif self.truststore_certificates:
                ctx.load_verify_locations(cadata=_pem(self.truststore_certificates))
            else:
                ctx.load_default_certs(purpose)
        except (OSError, ssl.SSLError) as e:
            where = self.truststore_location or "ssl.truststore.certificates"
            raise ValueError(f"ssl.truststore: cannot load certificates from {where}: {e}") from None


def _endpoint_identification(value: str | None) -> bool:
    """Unset means Kafka's default, ``https``; an empty value turns the check off."""
    if value is None or value.strip().lower() == "https":
        return True
    if value.strip() == "":
        return False
    raise ValueError(f"ssl.endpoint.identification.algorithm={value}: expected https or empty")


def _list(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def _pem(text: str) -> str:
    """Inline PEM as a properties file may hold it: Kafka allows the line breaks to be lost
    (``-----BEGIN ...----- MII... -----END ...-----`` on one line); put them back."""
    text = text.strip()
    if "\n" in text:
        return text
    blocks = re.findall(r"(-----BEGIN [^-]+-----)(.*?)(-----END [^-]+-----)", text)
    return "\n".join(f"{begin}\n" + "\n".join(body.split()) + f"\n{end}" for begin, body, end in blocks) or text


# Java (IANA) suite names -> OpenSSL's: key exchange and authentication, then the cipher, then
# the MAC; plain RSA key exchange has no prefix in OpenSSL's names.
_KX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_CIPHER = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "AES_128_CBC": "AES128",
           "AES_256_CBC": "AES256", "CHACHA20_POLY1305": "CHACHA20-POLY1305"}
_TLS13 = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
          "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"}


def openssl_cipher_name(suite: str) -> str | None:
    """The OpenSSL name of a suite (None for a TLS 1.3 suite, always enabled); an OpenSSL name
    is kept as it is. ValueError for an IANA name this table cannot translate."""
    if suite in _TLS13:
        return None
    m = re.fullmatch(r"TLS_(\w+?)_WITH_(\w+?)_(SHA|SHA256|SHA384)", suite)
    if m is None:
        if suite.startswith("TLS_") or suite.startswith("SSL_"):
            raise ValueError(f"ssl.cipher.suites: unknown suite {suite}")
        return suite
    kx, cipher, mac = m.groups()
    if kx not in _KX or cipher not in _CIPHER:
        raise ValueError(f"ssl.cipher.suites: unknown suite {suite}")
    name = _KX[kx] + _CIPHER[cipher]
    if cipher == "CHACHA20_POLY1305":
        return name
    if cipher.endswith("_GCM"):
        return name + "-" + mac
    return name + ("-SHA" if mac == "SHA" else "-" + mac)
