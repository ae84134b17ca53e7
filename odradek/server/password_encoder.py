"""Encrypting dynamic password configs for storage (Kafka's ``PasswordEncoder`` and
``EncryptingPasswordEncoder``), in the format Kafka writes to ZooKeeper.

A password is encrypted with a key derived from ``password.encoder.secret``: PBKDF2
(``password.encoder.keyfactory.algorithm``, default PBKDF2WithHmacSHA512) over the secret's
UTF-8 bytes, a fresh random 256-byte salt per value, ``password.encoder.iterations`` rounds
(4096) and ``password.encoder.key.length`` bits of key (128); then
``password.encoder.cipher.algorithm`` (AES/CBC/PKCS5Padding with a random 16-byte IV, or
AES/GCM/NoPadding with a random 12-byte IV and a 128-bit tag appended to the ciphertext, as
Java's ``Cipher`` does).

The stored value is a comma-separated list of ``name:value`` pairs (Kafka's
``Csv.parseCsvMap`` reads it; byte strings in standard base64, which has neither ',' nor ':')::

    keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,
    salt:<base64 of 256 bytes>,iterations:4096,encryptedPassword:<base64>,passwordLength:6,
    initializationVector:<base64 of 16 bytes>

(GCM adds ``authenticationTagLength:128``; Kafka writes the pairs in HashMap order, which no
reader depends on.) ``passwordLength`` counts UTF-16 code units, as Java's ``String.length``,
and is checked after decryption. Decoding takes every parameter from the value itself, so a
value encoded under other algorithm settings still decodes with the same secret; only the
secret must match. A wrong secret fails with ``PasswordDecodeError`` (a CBC padding, GCM tag,
UTF-8 or length check), never with a garbage password in all but freak cases: CBC has no
integrity check, and Kafka's format gives it none.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

CBC = "AES/CBC/PKCS5Padding"
GCM = "AES/GCM/NoPadding"
KEY_FACTORIES = {"PBKDF2WithHmacSHA512": hashes.SHA512, "PBKDF2WithHmacSHA256": hashes.SHA256,
                 "PBKDF2WithHmacSHA1": hashes.SHA1}
DEFAULT_KEY_FACTORY = "PBKDF2WithHmacSHA512"
SALT_BYTES = 256  # EncryptingPasswordEncoder.encode's salt
_IV_BYTES = {CBC: 16, GCM: 12}  # AES's block; Java's default GCM IV
_GCM_TAG_BITS = 128
_AES_KEY_BITS = (128, 192, 256)


class PasswordDecodeError(ValueError):
    """A stored password that this secret cannot decode (wrong secret, or not Kafka's format)."""


class PasswordEncoder:
    """Encodes and decodes passwords with one secret; see the module docstring for the format.
    Raises ValueError for settings it cannot use (an unknown algorithm, a key length AES does
    not have, fewer than 1024 iterations, as ``PasswordEncoderConfigs`` bounds them)."""

    def __init__(self, secret: str, keyfactory_algorithm: str | None = None, cipher_algorithm: str = CBC,
                 key_length: int = 128, iterations: int = 4096) -> None:
        keyfactory_algorithm = keyfactory_algorithm or DEFAULT_KEY_FACTORY
        _check(keyfactory_algorithm, cipher_algorithm, key_length, iterations)
        self._secret = secret.encode("utf-8")  # Java's PBEKeySpec hands PBKDF2 the chars as UTF-8
        self.keyfactory_algorithm = keyfactory_algorithm
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    def __repr__(self) -> str:  # never the secret
        return f"PasswordEncoder({self.keyfactory_algorithm}, {self.cipher_algorithm}, {self.key_length})"

    def encode(self, password: str) -> str:
        salt = os.urandom(SALT_BYTES)
        iv = os.urandom(_IV_BYTES[self.cipher_algorithm])
        key = self._key(self.keyfactory_algorithm, self.key_length, salt, self.iterations)
        encrypted = _encrypt(self.cipher_algorithm, key, iv, password.encode("utf-8"))
        fields = {
            "keyFactoryAlgorithm": self.keyfactory_algorithm, "cipherAlgorithm": self.cipher_algorithm,
            "keyLength": str(self.key_length), "salt": _b64(salt), "iterations": str(self.iterations),
            "encryptedPassword": _b64(encrypted), "passwordLength": str(_java_length(password)),
            "initializationVector": _b64(iv),
        }
        if self.cipher_algorithm == GCM:
            fields["authenticationTagLength"] = str(_GCM_TAG_BITS)
        return ",".join(f"{name}:{value}" for name, value in fields.items())

    def decode(self, encoded: str) -> str:
        """The password in ``encoded``; PasswordDecodeError when it cannot be had."""
        fields = _parse(encoded)
        try:
            factory = fields.get("keyFactoryAlgorithm") or DEFAULT_KEY_FACTORY
            cipher, key_length = fields["cipherAlgorithm"], int(fields["keyLength"])
            iterations, length = int(fields["iterations"]), int(fields["passwordLength"])
            salt, iv = _unb64(fields["salt"]), _unb64(fields["initializationVector"])
            encrypted = _unb64(fields["encryptedPassword"])
            if cipher == GCM and int(fields.get("authenticationTagLength", _GCM_TAG_BITS)) != _GCM_TAG_BITS:
                raise ValueError("only 128-bit GCM tags are read")
            _check(factory, cipher, key_length, 1024)  # stored iterations are trusted as written
            if iterations < 1:
                raise ValueError(f"iterations {iterations}")
        except (KeyError, ValueError) as e:
            raise PasswordDecodeError(f"Password could not be decoded: not an encoded password ({e})") from None
        key = self._key(factory, key_length, salt, iterations)
        try:
            password = _decrypt(cipher, key, iv, encrypted).decode("utf-8")
        except (ValueError, InvalidTag):  # bad padding, tag or UTF-8: the secret differs
            raise PasswordDecodeError("Password could not be decoded") from None
        if _java_length(password) != length:
            raise PasswordDecodeError("Password could not be decoded, sanity check of length failed")
        return password

    def _key(self, factory: str, key_length: int, salt: bytes, iterations: int) -> bytes:
        kdf = PBKDF2HMAC(KEY_FACTORIES[factory](), key_length // 8, salt, iterations)
        return kdf.derive(self._secret)


def _check(factory: str, cipher: str, key_length: int, iterations: int) -> None:
    if factory not in KEY_FACTORIES:
        raise ValueError(f"unsupported key factory algorithm {factory!r} (odradek has {', '.join(KEY_FACTORIES)})")
    if cipher not in _IV_BYTES:
        raise ValueError(f"unsupported cipher algorithm {cipher!r} (odradek has {CBC}, {GCM})")
    if key_length not in _AES_KEY_BITS:
        raise ValueError(f"AES has no {key_length}-bit keys (128, 192 or 256)")
    if iterations < 1024:
        raise ValueError(f"at least 1024 iterations, not {iterations}")


def _encrypt(cipher: str, key: bytes, iv: bytes, data: bytes) -> bytes:
    if cipher == GCM:
        return AESGCM(key).encrypt(iv, data, None)  # ciphertext + tag, as Java's doFinal
    padder = padding.PKCS7(128).padder()  # PKCS5Padding is PKCS#7 on AES's 16-byte blocks
    encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return encryptor.update(padder.update(data) + padder.finalize()) + encryptor.finalize()


def _decrypt(cipher: str, key: bytes, iv: bytes, data: bytes) -> bytes:
    if cipher == GCM:
        return AESGCM(key).decrypt(iv, data, None)
    if not data or len(data) % 16 or len(iv) != 16:
        raise ValueError("not whole AES blocks")
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(decryptor.update(data) + decryptor.finalize()) + unpadder.finalize()


def _parse(encoded: str) -> dict[str, str]:
    """Kafka's ``Csv.parseCsvMap``: pairs split at ',' then at each pair's last ':'."""
    fields = {}
    for item in encoded.split(","):
        name, sep, value = item.rpartition(":")
        if not sep:
            raise PasswordDecodeError("Password could not be decoded: not an encoded password")
        fields[name.strip()] = value.strip()
    return fields


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as e:
        raise ValueError(str(e)) from None


def _java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2
