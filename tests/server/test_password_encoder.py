"""The password encoder (server/password_encoder.py): Kafka's stored format, round trips,
and a wrong secret refused cleanly."""

from __future__ import annotations

import pytest

from odradek.server.password_encoder import GCM, PasswordDecodeError, PasswordEncoder

PASSWORD = "p\u00e4ssw\u00f6rd-\u20ac\U0001d11e"  # 2- to 4-byte UTF-8, and a UTF-16 surrogate pair
# Encoded by javax.crypto (PBKDF2WithHmacSHA512, 4096 rounds, 128-bit AES key, 256-byte salt)
# with the secret "enc-secret", written in Kafka's name:value format: Java's bytes decode here.
JAVA_CBC = (
    "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,keyLength:128,salt:yTk"
    "uma4ebjyJ2DdZi10u4VRMuFrBjaMXuDXb4ak6mp2Pj5yarCifGKTY6Py+QSx3HXw8G4ukFg3/1HHXgXUq5mctTovvSM1YTF93tgG"
    "nZ7AQelTeTYfi/0LQkx1T/kGTdw6c8af3PuDoDEM6IB8+rGrsxHqpByv8ZcrNQJVdYnpWTfSyGRj9E9Ehs8glSxO1T7h1rcGLw+D"
    "m/rUgUewvUoBXS7e5vKilo/mcmkrlM/xnvU24PLJvArEbQCftDR+3x5vqdpDs7qSpw2DIHVQUSQp2bXt1A6NM8fVh2jHUBslq7aC"
    "1CySy+y2DXf2pGbwku99XFCO+GbPxyudSmnSRWg==,iterations:4096,encryptedPassword:xLBNQnt1D00hhd3XnBarbFB8"
    "FHoXOFOnEFQUhrdOSBE=,passwordLength:12,initializationVector:OdwhFUmnJskC4yXVdNUIqw=="
)
JAVA_GCM = (
    "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/GCM/NoPadding,keyLength:128,salt:vawiaI"
    "JO/IbRp7sU4vuIuRRXczoSn3NsD7Yi5jFOwPdCjtVoJakK6a+328skxQui/8yUB0+BThp7luJ44GlL83nr70xqxksIVj9Z4VAufm"
    "K65D8CUiedWGXdA8tCevz34sVuAZkVyEAfOZSP29z3Wa2JJxUYiWH8GflmSKvwjspKEX3wTH9d1Y/FpqZz5fUhZ8Z/7NkVl2CQzY"
    "O4VD6n30tdD/TDWfsawFOo0GBOS8ELiv5xcAqtjINntQImhjVmt0z+i1baxpDykKYEQ/nkLNNkrtEgWgAr7pTlhEETwI73rB5QZ+"
    "v5FBSGxXou2iD2a9zFxV2zJ8FFPr/6q/vH/w==,iterations:4096,encryptedPassword:1qWBY4MLfAoJRTALgWOQEYNCPt3"
    "i/sb+pwjG5mMNQOEKDA==,passwordLength:12,initializationVector:MTXUl5cN5h5Ug4UR,authenticationTagLengt"
    "h:128"
)


def fields(encoded: str) -> dict[str, str]:
    return dict(item.rsplit(":", 1) for item in encoded.split(","))


@pytest.mark.parametrize("encoded", [JAVA_CBC, JAVA_GCM], ids=["cbc", "gcm"])
def test_values_java_encoded_decode(encoded):
    assert PasswordEncoder("enc-secret").decode(encoded) == PASSWORD


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", GCM])
@pytest.mark.parametrize("password", ["", "secret", PASSWORD, "x" * 100])
def test_round_trip_in_kafkas_format(cipher, password):
    encoder = PasswordEncoder("the-secret", cipher_algorithm=cipher)
    encoded = encoder.encode(password)
    assert encoder.decode(encoded) == password
    found = fields(encoded)
    assert (found["keyFactoryAlgorithm"], found["cipherAlgorithm"], found["keyLength"], found["iterations"]) == (
        "PBKDF2WithHmacSHA512", cipher, "128", "4096")
    assert len(found["salt"]) == 344  # 256 bytes in base64
    assert found["passwordLength"] == str({PASSWORD: 12}.get(password, len(password)))  # UTF-16 units, as Java
    if password:
        assert password not in encoded
    assert encoder.encode(password) != encoded  # a fresh salt and IV each time


def test_settings_are_read_from_the_value_not_from_the_decoder():
    stronger = PasswordEncoder("s", "PBKDF2WithHmacSHA256", GCM, key_length=256, iterations=2048)
    assert PasswordEncoder("s").decode(stronger.encode("pw")) == "pw"


@pytest.mark.parametrize("cipher", ["AES/CBC/PKCS5Padding", GCM])
def test_a_wrong_secret_fails_cleanly(cipher):
    encoded = PasswordEncoder("right", cipher_algorithm=cipher).encode("a-keystore-password")
    with pytest.raises(PasswordDecodeError, match="Password could not be decoded"):
        PasswordEncoder("wrong", cipher_algorithm=cipher).decode(encoded)
    with pytest.raises(PasswordDecodeError, match="Password could not be decoded"):
        PasswordEncoder("wrong").decode(JAVA_CBC)


@pytest.mark.parametrize("encoded", ["cleartext", "", "salt:xx", JAVA_CBC.replace("passwordLength:12", "passwordLength:11"),
                                     JAVA_CBC.replace("salt:", "salt:!")])
def test_what_is_not_an_encoded_password_fails_cleanly(encoded):
    with pytest.raises(PasswordDecodeError):
        PasswordEncoder("enc-secret").decode(encoded)


@pytest.mark.parametrize("settings", [{"keyfactory_algorithm": "MD5"}, {"cipher_algorithm": "DES/CBC/PKCS5Padding"},
                                      {"key_length": 100}, {"iterations": 10}])
def test_settings_it_cannot_use_are_refused(settings):
    with pytest.raises(ValueError):
        PasswordEncoder("s", **settings)


def test_its_repr_hides_the_secret():
    assert "hunter2" not in repr(PasswordEncoder("hunter2"))
