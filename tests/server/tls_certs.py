"""Certificates for TLS tests, made with ``cryptography``: a CA, a server certificate for
127.0.0.1 and localhost, a client certificate, and a second CA that vouches for neither.

``make_pki(dir)`` writes PEM files and returns their paths: ``ca`` (the CA certificate),
``server`` and ``client`` (each a private key followed by its certificate, the layout of
``ssl.keystore.location``), ``server_key``/``server_cert`` and ``client_key``/``client_cert``
(apart, for clients that want two files), ``other_ca``, ``ca_key`` (to sign more). EC P-256
keys: quick to make.

``keytool_pkcs12(pki, dir, password)`` makes a broker's PKCS12 keystore and truststore the way
Kafka's documentation has an administrator make them with Java's keytool (a key pair, a
signing request signed by the test CA, the CA and the signed certificate imported back; the CA
imported into a truststore). ``pkcs12_keystore`` and ``pkcs12_truststore`` make the same
kinds of file with ``openssl pkcs12 -export`` from ``make_pki``'s PEM files.
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_SUBJECT = "CN=Alice,OU=Eng,O=Odradek Tests,C=US"  # as RFC 2253 writes it


def _name(cn: str, ou: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Odradek Tests")]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _cert(subject, issuer, key, signing_key, *, ca=False, sans=None, usage=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                        critical=True)
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signing_key.public_key()),
                                        critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def make_pki(directory) -> dict[str, str]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}

    def write(name: str, data: bytes) -> None:
        (d / f"{name}.pem").write_bytes(data)
        paths[name] = str(d / f"{name}.pem")

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(_name("Odradek Test CA"), _name("Odradek Test CA"), ca_key, ca_key, ca=True)
    write("ca", _pem_cert(ca))
    write("ca_key", _pem_key(ca_key))
    other_key = ec.generate_private_key(ec.SECP256R1())
    write("other_ca", _pem_cert(_cert(_name("Another CA"), _name("Another CA"), other_key, other_key, ca=True)))
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    for role, subject, extra in (("server", _name("localhost"), dict(sans=sans, usage=[ExtendedKeyUsageOID.SERVER_AUTH,
                                                                           ExtendedKeyUsageOID.CLIENT_AUTH])),
                                 ("client", _name("Alice", "Eng"), dict(usage=[ExtendedKeyUsageOID.CLIENT_AUTH]))):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _cert(subject, ca.subject, key, ca_key, **extra)
        write(f"{role}_key", _pem_key(key))
        write(f"{role}_cert", _pem_cert(cert))
        write(role, _pem_key(key) + _pem_cert(cert))
    return paths


def ssl_listeners(pki: dict[str, str], **extra: str) -> dict[str, str]:
    """A broker's properties for two TLS listeners on ephemeral ports, with ``pki``'s server
    certificate: SSL (no client certificate) and MTLS (one required)."""
    return {
        "listeners": "SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"],
        "listener.name.mtls.ssl.client.auth": "required",
        **extra,
    }


def pkcs12_keystore(pki: dict[str, str], role: str, path, password: str, *, chain: bool = True) -> str:
    """A PKCS12 keystore at ``path`` (returned as a str) holding ``role``'s (``server`` or
    ``client``) key and certificate, followed by the CA's when ``chain``."""
    extra = ["-certfile", pki["ca"]] if chain else []
    return _openssl_pkcs12(path, password, "-inkey", pki[f"{role}_key"], "-in", pki[f"{role}_cert"], *extra)


def pkcs12_truststore(pki: dict[str, str], path, password: str) -> str:
    """A PKCS12 truststore at ``path`` (returned as a str) holding the CA's certificate."""
    return _openssl_pkcs12(path, password, "-nokeys", "-in", pki["ca"])


def _openssl_pkcs12(path, password: str, *args: str) -> str:
    subprocess.run(["openssl", "pkcs12", "-export", *args, "-out", str(path), "-passout", f"pass:{password}"],
                   check=True, capture_output=True)
    return str(path)


def keytool_pkcs12(pki: dict[str, str], directory, password: str) -> dict[str, str]:
    """Paths of ``keystore`` (``server.keystore.p12``: key alias ``localhost``, its certificate
    for localhost and 127.0.0.1 signed by ``pki``'s CA, the CA as ``CARoot``) and
    ``truststore`` (``server.truststore.p12``: the CA), both PKCS12 under ``password``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    keystore, truststore = str(d / "server.keystore.p12"), str(d / "server.truststore.p12")
    store = ["-keystore", keystore, "-storetype", "PKCS12", "-storepass", password, "-noprompt"]

    def keytool(*args: str) -> subprocess.Popen:
        return subprocess.Popen(["keytool", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    trust = keytool("-importcert", "-alias", "CARoot", "-file", pki["ca"], "-keystore", truststore,
                    "-storetype", "PKCS12", "-storepass", password, "-noprompt")
    steps = [
        ("-genkeypair", "-alias", "localhost", "-keyalg", "EC", "-groupname", "secp256r1", "-validity", "2",
         "-dname", "CN=localhost,O=Odradek Tests,C=US", *store),
        ("-certreq", "-alias", "localhost", "-file", str(d / "server.csr"), *store),
    ]
    for step in steps:
        _wait(keytool(*step))
    signed = str(d / "server-signed.pem")
    _wait(subprocess.Popen(["openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", pki["ca"],
                            "-CAkey", pki["ca_key"], "-CAcreateserial", "-out", signed, "-days", "2",
                            "-extfile", _san_extfile(d)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    _wait(keytool("-importcert", "-alias", "CARoot", "-file", pki["ca"], *store))
    _wait(keytool("-importcert", "-alias", "localhost", "-file", signed, *store))
    _wait(trust)
    return {"keystore": keystore, "truststore": truststore}


def _san_extfile(d: Path) -> str:
    path = d / "san.cnf"
    path.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
    return str(path)


def _wait(process: subprocess.Popen) -> None:
    out, _ = process.communicate(timeout=60)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(process.args)} failed:\n{out.decode(errors='replace')}")
