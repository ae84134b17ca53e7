"""Which ``Host`` names a console serves (host_check.py): its bind address with its port,
loopback names for a loopback or wildcard bind, ``--allowed-host`` names, nothing else."""

from __future__ import annotations

import pytest

from odradek.console.host_check import AllowedHosts, is_loopback, parse_extra, parse_host

PORT = 8080


@pytest.mark.parametrize(("value", "parsed"), [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)),
    ("LocalHost:8080", ("localhost", 8080)),
    ("[::1]:8080", ("[::1]", 8080)),
    ("[0:0:0:0:0:0:0:1]", ("[::1]", None)),
    ("console.example.com", ("console.example.com", None)),
    ("user@127.0.0.1:8080", None),
    ("127.0.0.1:", None),
    ("127.0.0.1:70000", None),
    ("127.0.0.1:8080/path", None),
    ("::1", None),
    ("", None),
])
def test_parse_host(value, parsed):
    assert parse_host(value) == parsed


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("", False), ("192.168.1.10", False), ("console.example.com", False),
])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080", "[::1]:8080"])
def test_a_loopback_bind_serves_the_loopback_names_with_its_port(host):
    assert AllowedHosts("127.0.0.1").permits(host, PORT, 80)


@pytest.mark.parametrize("host", [
    "evil.example:8080",        # DNS rebinding: the attacker's own name, pointed at 127.0.0.1
    "evil.example",
    "127.0.0.1:8081",           # another port: another origin
    "127.0.0.1",                # no port: port 80, which the console is not on
    "localhost.:8080",          # a different name to a browser
    "127.0.0.1.evil.example:8080",
    "",
    None,
])
def test_a_loopback_bind_refuses_every_other_name(host):
    assert not AllowedHosts("127.0.0.1").permits(host, PORT, 80)


def test_a_host_without_port_on_the_schemes_default_port():
    assert AllowedHosts("127.0.0.1").permits("localhost", 80, 80)
    assert AllowedHosts("127.0.0.1").permits("localhost", 443, 443)
    assert not AllowedHosts("127.0.0.1").permits("localhost", 443, 80)


def test_a_non_loopback_bind_serves_its_address_only():
    hosts = AllowedHosts("192.168.1.10")
    assert hosts.permits("192.168.1.10:8080", PORT, 80)
    assert not hosts.permits("localhost:8080", PORT, 80)
    assert not hosts.permits("console.example.com:8080", PORT, 80)


def test_a_wildcard_bind_serves_loopback_names_and_the_allowed_ones():
    hosts = AllowedHosts("0.0.0.0", ("console.example.com",))
    assert hosts.permits("127.0.0.1:8080", PORT, 80) and hosts.permits("console.example.com:8080", PORT, 80)
    assert not hosts.permits("192.168.1.10:8080", PORT, 80)  # the machine's other names: --allowed-host
    assert not hosts.permits("evil.example:8080", PORT, 80)


def test_allowed_hosts_with_and_without_a_port():
    hosts = AllowedHosts("127.0.0.1", ("console.example.com", "proxy.example.com:9443"))
    assert hosts.permits("console.example.com:8080", PORT, 80)  # the console's own port
    assert hosts.permits("Console.Example.com", PORT, 80)  # a reverse proxy on its default port
    assert not hosts.permits("console.example.com:9999", PORT, 80)
    assert hosts.permits("proxy.example.com:9443", PORT, 80)
    assert not hosts.permits("proxy.example.com:8080", PORT, 80)
    assert not hosts.permits("proxy.example.com", PORT, 80)


def test_allowed_host_values_are_checked():
    assert parse_extra(["a.example", "b.example:1"]) == ("a.example", "b.example:1")
    with pytest.raises(ValueError, match="--allowed-host takes NAME or NAME:PORT, not 'http://a.example'"):
        parse_extra(["http://a.example"])
