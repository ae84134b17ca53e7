"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as sans-I/O state machines.

No sockets, no clock, no store: a ``ScramServer`` is fed the client's tokens and answers
challenges, looking credentials up through a function it is given; a ``ScramClient`` builds
the client's messages. Both are what Kafka's ``ScramSaslServer`` / ``ScramSaslClient`` do.

The exchange (``gs2`` header ``n,,``: no channel binding, no authorization id)::

    client-first  n,,n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final  v=<base64 ServerSignature>        (or e=<error>)

Keys (RFC 5802 section 3)::

    SaltedPassword  = Hi(password, salt, i)          (PBKDF2-HMAC with the mechanism's hash)
    ClientKey       = HMAC(SaltedPassword, "Client Key")
    StoredKey       = H(ClientKey)
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare + "," + server-first + "," + client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

A credential is stored as Kafka's ``ScramCredentialUtils`` writes it:
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``. User names are
escaped in messages as RFC 5802 says (``,`` as ``=2C``, ``=`` as ``=3D``); passwords are used
as their UTF-8 bytes (Kafka applies no SASLprep either).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Callable

# mechanism -> (hashlib name, minimum iterations: Kafka's ScramMechanism.minIterations)
MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 4096),
    "SCRAM-SHA-512": ("sha512", 4096),
}
# Kafka's ScramMechanism type ids, as AlterUserScramCredentials carries them.
MECHANISM_TYPES: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_IDS: dict[str, int] = {v: k for k, v in MECHANISM_TYPES.items()}
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's AlterUserScramCredentials upper bound


class ScramError(Exception):
    """The exchange failed: bad message, unknown user, wrong proof."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString`` form."""
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> "ScramCredential":
        """Parse ``to_string``'s form; ``ValueError`` if any of its four fields is missing."""
        props = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(f"Credentials not valid: {text}")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError(f"Credentials not valid: {text}")
        try:
            return cls(base64.b64decode(props["salt"], validate=True),
                       base64.b64decode(props["stored_key"], validate=True),
                       base64.b64decode(props["server_key"], validate=True), int(props["iterations"]))
        except (ValueError, TypeError):
            raise ValueError(f"Credentials not valid: {text}") from None


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise ScramError(f"unsupported SCRAM mechanism {mechanism}") from None


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, name).digest()


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a salted password (what AlterUserScramCredentials carries)."""
    name = _hash(mechanism)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(name, client_key).digest(),
                           _hmac(name, salted, b"Server Key"), iterations)


def make_credential(mechanism: str, password: str, salt: bytes | None = None,
                    iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    salt = os.urandom(32) if salt is None else salt
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    if "=" in text.replace("=2C", "").replace("=3D", ""):
        raise ScramError(f"invalid user name {text!r}")
    return text.replace("=2C", ",").replace("=3D", "=")


def _attrs(message: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"} (values may contain ``=``)."""
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"invalid SCRAM message {message!r}")
        out[key] = value
    return out


def _nonce() -> str:
    return base64.b64encode(os.urandom(24)).decode()


def _decode_b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ScramError(f"invalid {what} in SCRAM message") from None


class ScramServer:
    """The server side of one exchange: ``receive(token) -> challenge`` twice, then
    ``complete`` and ``username``. Any failure raises ``ScramError`` (the caller answers
    SASL_AUTHENTICATION_FAILED); the state machine is then spent."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None],
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._name = _hash(mechanism)
        self._lookup = lookup
        self._server_nonce = nonce or _nonce()
        self._state = "first"
        self.username: str | None = None
        self.attempted: str | None = None  # the user name of client-first, for failure log lines
        self._credential: ScramCredential | None = None
        self._auth_prefix = ""
        self._nonce = ""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def receive(self, token: bytes) -> bytes:
        state, self._state = self._state, "failed"  # until this step succeeds
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if state == "first":
            challenge = self._client_first(text)
            self._state = "final"
            return challenge
        if state == "final":
            challenge = self._client_final(text)
            self._state = "complete"
            return challenge
        raise ScramError(f"unexpected SCRAM message in state {state}")

    def _client_first(self, text: str) -> bytes:
        gs2, _, bare = text.partition(",")
        authzid, sep, bare = bare.partition(",")
        if gs2 not in ("n", "y") or not sep:
            raise ScramError("SCRAM channel binding is not supported")
        attrs = _attrs(bare)
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("invalid SCRAM client-first message")
        username = self.attempted = unescape_name(attrs["n"])
        if authzid and authzid != "a=" + attrs["n"]:
            raise ScramError("Authentication failed: Client requested an authorization id that is different from username")
        credential = self._lookup(username)
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        if credential.iterations < MECHANISMS[self.mechanism][1]:
            raise ScramError(f"Iterations {credential.iterations} is less than the minimum for {self.mechanism}")
        self.username, self._credential = username, credential
        self._nonce = attrs["r"] + self._server_nonce
        server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                        f"i={credential.iterations}")
        self._auth_prefix = bare + "," + server_first
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("invalid SCRAM client-final message")
        attrs = _attrs(without_proof)
        # Kafka's ScramSaslServer only checks that the nonce ends with the combined one, and
        # librdkafka 2.0.x sends its own nonce twice (r=<client><client><server>): accepted.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("Invalid client nonce in the final client message.")
        if attrs.get("c") not in ("biws", "eSws"):  # base64 of "n,," / "y,,"
            raise ScramError("SCRAM channel binding is not supported")
        proof = _decode_b64(proof_attr, "proof")
        auth_message = (self._auth_prefix + "," + without_proof).encode()
        cred = self._credential
        signature = _hmac(self._name, cred.stored_key, auth_message)
        if len(proof) != len(signature):  # else zip() below would ignore a proof's extra bytes
            raise ScramError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._name, client_key).digest(), cred.stored_key):
            raise ScramError("Invalid client credentials")
        server_signature = _hmac(self._name, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side: ``first_message()``, ``final_message(server_first)``,
    ``verify(server_final)`` (raises ``ScramError`` if the server did not prove it knows
    the credential)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._name = _hash(mechanism)
        self._password = password.encode()
        self._bare = f"n={escape_name(username)},r={nonce or _nonce()}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return ("n,," + self._bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        attrs = _attrs(text)
        if "e" in attrs:
            raise ScramError(f"SCRAM server error: {attrs['e']}")
        client_nonce = _attrs(self._bare)["r"]
        nonce = attrs.get("r", "")
        if not nonce.startswith(client_nonce) or "s" not in attrs or "i" not in attrs:
            raise ScramError("invalid SCRAM server-first message")
        salt = _decode_b64(attrs["s"], "salt")
        iterations = int(attrs["i"]) if attrs["i"].isdigit() else 0
        if iterations < MECHANISMS[self.mechanism][1]:
            raise ScramError(f"SCRAM iterations {attrs['i']} below the minimum")
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = _hmac(self._name, salted, b"Client Key")
        stored_key = hashlib.new(self._name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = _hmac(self._name, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = _hmac(self._name, _hmac(self._name, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attrs(server_final.decode("utf-8", "replace"))
        if "e" in attrs:
            raise ScramError(f"SCRAM server error: {attrs['e']}")
        if not hmac.compare_digest(_decode_b64(attrs.get("v", ""), "signature"), self._server_signature):
            raise ScramError("SCRAM server signature does not match")
