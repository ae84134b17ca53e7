"""SCRAM state machines against RFC 7677's SCRAM-SHA-256 example and each other."""

import base64

import pytest

from odradek.protocol.scram import ScramClient, ScramCredential, ScramError, ScramServer, make_credential

# RFC 7677 section 3: user "user", password "pencil".
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _server(password="pencil", mechanism="SCRAM-SHA-256"):
    cred = make_credential(mechanism, password, SALT, 4096)
    return ScramServer(mechanism, {"user": cred}.get, nonce=SERVER_NONCE)


def test_rfc7677_client_messages():
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=CLIENT_NONCE)
    assert client.first_message() == CLIENT_FIRST
    assert client.final_message(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)


def test_rfc7677_server_messages():
    server = _server()
    assert server.receive(CLIENT_FIRST) == SERVER_FIRST
    assert server.receive(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete and server.username == "user"


def test_wrong_password_refused():
    server = _server(password="not-pencil")
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    challenge = server.receive(client.first_message())
    with pytest.raises(ScramError):
        server.receive(client.final_message(challenge))
    assert not server.complete


def test_final_nonce_checked_as_kafka_does():
    """Kafka accepts a final nonce that ends with the combined one (librdkafka 2.0.x repeats its
    own nonce in front); one that does not is refused."""
    server = _server()
    server.receive(CLIENT_FIRST)
    doubled = CLIENT_FINAL.replace(b"r=", b"r=" + CLIENT_NONCE.encode(), 1)
    with pytest.raises(ScramError, match="Invalid client credentials"):  # past the nonce check; the
        server.receive(doubled)  # proof of RFC 7677's example covers the message without the repeat
    server = _server()
    server.receive(CLIENT_FIRST)
    with pytest.raises(ScramError, match="nonce"):
        server.receive(CLIENT_FINAL.replace(b"k0,p=", b"k1,p="))


def test_unknown_user_and_garbage_refused():
    with pytest.raises(ScramError):
        _server().receive(b"n,,n=nobody,r=abc")
    with pytest.raises(ScramError):
        _server().receive(b"\xff\xfe")
    with pytest.raises(ScramError):
        _server().receive(b"p=tls-unique,,n=user,r=abc")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_and_server_proof(mechanism):
    cred = make_credential(mechanism, "s3cret")
    server = ScramServer(mechanism, {"a,b=c": cred}.get)
    client = ScramClient(mechanism, "a,b=c", "s3cret")
    final = server.receive(client.final_message(server.receive(client.first_message())))
    client.verify(final)
    assert server.username == "a,b=c"
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"x" * 64))


def test_credential_string_is_kafkas_format():
    cred = make_credential("SCRAM-SHA-512", "pw", b"salt", 4096)
    text = cred.to_string()
    assert text.startswith("salt=c2FsdA==,stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_string(text) == cred
    with pytest.raises(ValueError):
        ScramCredential.from_string("salt=c2FsdA==,iterations=4096")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=200))
def test_any_tokens_fail_only_with_scram_error(first, second):
    """Garbage never escapes as another exception (the broker turns ScramError into
    SASL_AUTHENTICATION_FAILED)."""
    server = _server()
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    for tokens in ([first], [client.first_message(), second], [b"n,,n=user,r=x" + first, second]):
        server = _server()
        try:
            for token in tokens:
                server.receive(token)
        except ScramError:
            pass
        assert not server.complete


def _final_with_proof(proof: bytes) -> bytes:
    return CLIENT_FINAL.rpartition(b",p=")[0] + b",p=" + base64.b64encode(proof)


@pytest.mark.parametrize("change", ["empty", "truncated", "over-long", "over-long by zeros"])
def test_a_client_proof_of_the_wrong_length_is_refused(change):
    """The proof must be exactly as long as the hash: XOR-ing a longer one with the signature
    would drop its extra bytes, so the right proof with anything appended would log in."""
    proof = base64.b64decode(CLIENT_FINAL.rpartition(b",p=")[2])
    bad = {"empty": b"", "truncated": proof[:-1], "over-long": proof + b"x",
           "over-long by zeros": proof + bytes(32)}[change]
    server = _server()
    server.receive(CLIENT_FIRST)
    with pytest.raises(ScramError, match="Invalid client credentials"):
        server.receive(_final_with_proof(bad))
    assert not server.complete and server.attempted == "user"
    server = _server()  # the right proof, for contrast
    server.receive(CLIENT_FIRST)
    assert server.receive(_final_with_proof(proof)) == SERVER_FINAL and server.complete


def test_the_attempted_user_is_known_even_when_unknown_to_the_store():
    server = _server()
    with pytest.raises(ScramError):
        server.receive(b"n,,n=nob=2Cody,r=abc")
    assert server.attempted == "nob,ody"
