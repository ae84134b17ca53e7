"""What a SASL listener allows a client that has not (or not yet again) proved who it is, on
the wire: requests of at most ``sasl.server.max.receive.size`` bytes, no request but the
exchange's, a failed login answered only after ``connection.failed.authentication.delay.ms``
and logged once at INFO; and closed connections freed without the cyclic garbage collector."""

from __future__ import annotations

import gc
import logging
import socket
import struct
import time
import weakref

import pytest

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.config import BrokerConfig
from tests.server.clients import wait_until
from tests.server.group_wire import WireClient
from tests.server.sasl_broker import sasl_broker, sasl_port

DELAY_MS = 300
DEFAULT_MAX_RECEIVE = 524288
FAILURES = "odradek.security.authenticator"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with sasl_broker(tmp_path_factory.mktemp("sasl-limits") / "data",
                     **{"connection.failed.authentication.delay.ms": str(DELAY_MS)}) as b:
        yield b


def _login(wire, user="alice", password="alice-secret"):
    assert wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.NONE
    return wire.call(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode())


def _closed_unanswered(wire) -> bool:
    """The broker closed the connection without sending one more byte (a reset counts: the
    broker closes without reading what the client sent after the end)."""
    try:
        return wire.sock.recv(1024) == b""
    except ConnectionResetError:
        return True


def _api_versions_frame(wire, size: int) -> bytes:
    """A size-prefixed ApiVersions v3 request of exactly ``size`` bytes after the prefix
    (its client software name pads it)."""
    header = codec.RequestHeader(ApiKey.API_VERSIONS, 3, 99, wire.client_id)

    def encode(n):
        return codec.encode_request(header, codec.request_module(ApiKey.API_VERSIONS).MESSAGE(
            client_software_name="a" * n, client_software_version="1"))
    n = size - (len(encode(size)) - size)
    frame = encode(n)
    assert len(frame) == size
    return struct.pack(">i", size) + frame


def test_the_defaults_are_kafkas():
    config = BrokerConfig.from_props({})
    assert config["sasl.server.max.receive.size"] == DEFAULT_MAX_RECEIVE
    assert config["connection.failed.authentication.delay.ms"] == 100


# --- sasl.server.max.receive.size -----------------------------------------------------------
def test_before_login_a_request_over_sasl_server_max_receive_size_closes_the_connection(broker):
    with WireClient(sasl_port(broker), timeout=10) as wire:  # the limit itself is served
        wire.sock.sendall(_api_versions_frame(wire, DEFAULT_MAX_RECEIVE))
        assert wire.receive(ApiKey.API_VERSIONS, 3).api_keys
        # One byte more: closed on the size prefix, before the body is read.
        wire.sock.sendall(struct.pack(">i", DEFAULT_MAX_RECEIVE + 1) + b"\0" * 1000)
        assert _closed_unanswered(wire)


def test_after_login_the_limit_is_socket_request_max_bytes_and_again_during_reauthentication(broker):
    with WireClient(sasl_port(broker), timeout=10) as wire:
        assert _login(wire).error_code == ErrorCode.NONE
        wire.sock.sendall(_api_versions_frame(wire, DEFAULT_MAX_RECEIVE + 1000))
        assert wire.receive(ApiKey.API_VERSIONS, 3).api_keys
        assert wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.NONE
        # A re-authentication's token is read under the SASL limit again: no answer (a PLAIN
        # failure would be answered), the connection closed.
        wire.send(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0" + b"x" * DEFAULT_MAX_RECEIVE)
        assert _closed_unanswered(wire)


# --- re-authentication (KIP-368) ------------------------------------------------------------
def test_a_request_other_than_the_exchange_during_reauthentication_closes_the_connection(broker):
    with WireClient(sasl_port(broker), timeout=10) as wire:
        assert _login(wire).error_code == ErrorCode.NONE
        assert wire.call(ApiKey.METADATA, 1, topics=None).brokers
        assert wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.NONE
        wire.send(ApiKey.METADATA, 1, topics=None)
        assert _closed_unanswered(wire)
    with WireClient(sasl_port(broker), timeout=10) as wire:  # once complete, requests are served again
        assert _login(wire).error_code == ErrorCode.NONE
        assert _login(wire).error_code == ErrorCode.NONE
        assert wire.call(ApiKey.METADATA, 1, topics=None).brokers


def test_metadata_before_login_closes_the_connection_unanswered(broker):
    with WireClient(sasl_port(broker), timeout=10) as wire:
        wire.send(ApiKey.METADATA, 1, topics=None)
        assert _closed_unanswered(wire)


# --- connection.failed.authentication.delay.ms ----------------------------------------------
def test_a_failed_login_is_answered_after_the_delay_then_closed_serving_nothing_more(broker):
    """Only a lower bound on the time is checked: the answer never comes sooner than the delay."""
    with WireClient(sasl_port(broker), timeout=10) as wire:
        assert wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.NONE
        started = time.monotonic()
        wire.send(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0wrong")
        wire.send(ApiKey.API_VERSIONS, 0)  # pipelined behind the failure: never answered
        response = wire.receive(ApiKey.SASL_AUTHENTICATE, 2)
        waited = time.monotonic() - started
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert waited >= 0.9 * DELAY_MS / 1000
        assert _closed_unanswered(wire)


def test_a_failed_v0_exchange_closes_only_after_the_delay(broker):
    with WireClient(sasl_port(broker), timeout=10) as wire:
        assert wire.call(ApiKey.SASL_HANDSHAKE, 0, mechanism="PLAIN").error_code == ErrorCode.NONE
        token = b"\0alice\0wrong"
        started = time.monotonic()
        wire.sock.sendall(struct.pack(">i", len(token)) + token)
        assert _closed_unanswered(wire)
        assert time.monotonic() - started >= 0.9 * DELAY_MS / 1000


# --- logging --------------------------------------------------------------------------------
def test_every_failed_login_is_one_info_line_without_the_password(broker, caplog):
    caplog.set_level(logging.INFO, logger=FAILURES)
    clients = [WireClient(sasl_port(broker), timeout=10) for _ in range(12)]
    peers = {"127.0.0.1:%d" % wire.sock.getsockname()[1] for wire in clients}
    try:
        for i, wire in enumerate(clients[:10]):
            wire.send(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN")
            wire.send(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=f"\0alice\0guess-{i}".encode())
        clients[10].send(ApiKey.SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-512")
        clients[10].send(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"n,,n=nobody,r=abcdef")
        clients[11].send(ApiKey.SASL_HANDSHAKE, 1, mechanism="GSSAPI")

        def lines():
            return [r for r in caplog.records if r.name == FAILURES]
        wait_until(lambda: len(lines()) >= 12, timeout=20, what="12 failed-authentication lines")
        time.sleep(0.1)  # nothing more comes
        records = lines()
    finally:
        for wire in clients:
            wire.close()
    assert len(records) == 12 and {r.levelno for r in records} == {logging.INFO}
    messages = [r.getMessage() for r in records]
    assert {m.split(" (")[0].rsplit(" ", 1)[1] for m in messages} == peers  # one line per client
    assert sum("mechanism PLAIN, user 'alice'" in m for m in messages) == 10
    assert any("mechanism SCRAM-SHA-512, user 'nobody'" in m for m in messages)
    assert any("mechanism GSSAPI" in m for m in messages)
    assert not any("guess-" in m for m in messages)


# --- memory ---------------------------------------------------------------------------------
def _connection_of(broker, sock):
    """A weak reference to the broker's Connection for the client socket ``sock``."""
    peer = "127.0.0.1:%d" % sock.getsockname()[1]

    def find():
        for conn in broker.broker.connections:
            if conn.peer == peer:
                return weakref.ref(conn), weakref.ref(conn.parser)
        return None
    return wait_until(lambda: broker.call(find), timeout=10, what="the broker's connection")


def _freed(broker, refs) -> bool:
    return broker.call(lambda: all(ref() is None for ref in refs))


@pytest.mark.parametrize("scenario", ["oversized prefix", "frame in progress", "logged in", "failed login"])
def test_a_closed_connection_is_freed_without_the_garbage_collector(broker, scenario):
    """With the cyclic GC off, what a closed connection held (the connection, its parser and
    buffers) is gone once the broker has seen the close."""
    gc.collect()
    gc.disable()
    try:
        with WireClient(sasl_port(broker), timeout=10) as wire:
            refs = _connection_of(broker, wire.sock)
            if scenario == "oversized prefix":
                wire.sock.sendall(struct.pack(">i", 100 << 20) + b"\0" * (256 << 10))
                assert _closed_unanswered(wire)
            elif scenario == "frame in progress":  # 300 KiB of a 500 KiB frame, then the client goes
                wire.sock.sendall(struct.pack(">i", 500 << 10) + b"\0" * (300 << 10))
            elif scenario == "logged in":
                assert _login(wire).error_code == ErrorCode.NONE
            else:  # the client goes during the delay
                assert wire.call(ApiKey.SASL_HANDSHAKE, 1, mechanism="PLAIN").error_code == ErrorCode.NONE
                wire.send(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0wrong")
            try:
                wire.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # already reset by the broker
        wait_until(lambda: _freed(broker, refs), timeout=10, what="the connection freed by reference counting")
    finally:
        gc.enable()


def test_the_failure_logger_is_a_broker_logger():
    """kafka-configs --entity-type broker-loggers can change its level (server/broker_loggers.py)."""
    from odradek.server import broker_loggers, failed_authentication

    assert failed_authentication.log.name == FAILURES and FAILURES in broker_loggers.loggers()
