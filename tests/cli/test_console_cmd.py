"""``odradek console`` as a command: a real process on a free port (``--port 0``) prints its
address, serves the pages and their JSON, and stops on Ctrl-C; it refuses a DNS-rebound
request (another site's ``Host`` and ``Origin``), and with ``--user``/``--token-file`` asks
who you are, over TLS; bad options, unsafe listeners and an unreachable cluster are one line
and status 1; ``--help`` says whose Kafka credentials the console uses."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from odradek.client import AdminClient, NewTopic, Producer
from tests.cli.conftest import BROKER_ID, run_cli
from tests.console.http_probe import basic, host_of, port_of, send
from tests.server.tls_certs import make_pki

ODRADEK = Path(sys.executable).parent / "odradek"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_serves_the_pages_and_api_until_interrupted(broker, tmp_path, inherited, stop_signal):
    """Stopped by Ctrl-C or SIGTERM, also when started with SIGINT ignored (a background job
    of a non-interactive shell: Python then leaves SIGINT ignored unless told otherwise)."""
    properties = tmp_path / "client.properties"
    properties.write_text("request.timeout.ms=20000\n")
    process = subprocess.Popen([str(ODRADEK), "console", "--bootstrap-server", broker.bootstrap, "--port", "0",
                                "--command-config", str(properties)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_ignore_sigint if inherited == "ignored" else None)
    try:
        line = process.stdout.readline()
        match = re.match(r"odradek console at (http://127\.0\.0\.1:\d+/) \(cluster (\S+)\); Ctrl-C to stop$", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        url = match.group(1)
        assert match.group(2) == broker.bootstrap
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200 and "odradek console" in page.read().decode()
        with urllib.request.urlopen(url + "api/cluster", timeout=30) as answer:
            cluster = json.loads(answer.read())
        assert [b["id"] for b in cluster["brokers"]] == [BROKER_ID] and cluster["controller"] == BROKER_ID
        with urllib.request.urlopen(url + "static/vendor/uplot/uPlot.iife.min.js", timeout=30) as script:
            assert script.status == 200
    finally:
        process.send_signal(stop_signal)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, err
    assert err.endswith("odradek console stopped\n")


def test_refusals_are_one_line(cli):
    bad = cli("console", "--port", "70000")
    assert (bad.code, bad.err) == (1, "odradek console: --port must be 0..65535, not 70000\n")
    bad = cli("console", "--sample-interval", "0")
    assert (bad.code, bad.err) == (1, "odradek console: --sample-interval must be positive\n")


def test_an_unreachable_cluster_is_one_line():
    result = run_cli("console", "--bootstrap-server", "127.0.0.1:1", "--port", "0")
    assert (result.code, result.err) == (1, "odradek console: cannot connect to 127.0.0.1:1 (Connection refused)\n")


@contextmanager
def console_process(broker, *options: str, env: dict | None = None):
    """``odradek console --port 0 OPTIONS`` as a real process: yields its address once it
    says it, then stops it with SIGTERM and expects status 0."""
    process = subprocess.Popen([str(ODRADEK), "console", "--bootstrap-server", broker.bootstrap, "--port", "0",
                                *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **(env or {})})
    try:
        line = process.stdout.readline()
        match = re.match(r"odradek console at (https?://127\.0\.0\.1:\d+/) ", line)
        assert match, (line, process.stderr.read() if process.poll() is not None else "")
        yield match.group(1)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            _, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert process.returncode == 0, err


def test_a_dns_rebound_request_is_refused(broker, topic_name):
    """The attack as a browser makes it: a page on evil.example:PORT, its name now resolving
    to 127.0.0.1, sends its own name as Host and Origin to the console."""
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    with Producer(broker.bootstrap) as producer:
        producer.send(topic_name, value=b"secret", partition=0)
        producer.flush()
    with console_process(broker) as url:
        rebound = {"Host": f"evil.example:{port_of(url)}", "Origin": f"http://evil.example:{port_of(url)}"}
        read = send(url, "GET", f"/api/topics/{topic_name}/messages?partition=0&offset=0", rebound)
        assert read.status == 421 and b"secret" not in read.body
        assert send(url, "DELETE", f"/api/topics/{topic_name}", rebound).status == 421
        with AdminClient(broker.bootstrap) as admin:
            assert topic_name in admin.list_topics()
        own = send(url, "GET", f"/api/topics/{topic_name}/messages?partition=0&offset=0", {"Host": host_of(url)})
        assert own.status == 200 and b"secret" in own.body


def test_a_console_with_a_login_over_tls(broker, tmp_path):
    pki = make_pki(tmp_path / "pki")
    token = tmp_path / "token"
    token.write_text("script-token\n")
    options = ("--user", "ada", "--token-file", str(token), "--ssl-certfile", pki["server_cert"],
               "--ssl-keyfile", pki["server_key"], "--allowed-host", "console.test")
    trust = ssl.create_default_context(cafile=pki["ca"])
    with console_process(broker, *options, env={"ODRADEK_CONSOLE_PASSWORD": "correct horse"}) as url:
        assert url.startswith("https://")

        def status(path: str, headers: dict) -> int:
            return send(url, "GET", path, {"Host": host_of(url), **headers}, context=trust).status

        for path in ("/", "/api/cluster", "/static/console.css"):
            assert status(path, {}) == 401
            assert status(path, basic("ada", "wrong")) == 401
            assert status(path, basic("ada", "correct horse")) == 200
            assert status(path, {"Authorization": "Bearer script-token"}) == 200
        answer = send(url, "GET", "/api/cluster", {"Host": host_of(url)}, context=trust)
        assert answer.headers["WWW-Authenticate"].startswith("Basic realm=")
        assert status("/api/cluster", {**basic("ada", "correct horse"), "Host": f"console.test:{port_of(url)}"}) == 200
        assert status("/api/cluster", {**basic("ada", "correct horse"), "Host": f"evil.example:{port_of(url)}"}) == 421


@pytest.fixture
def no_console_password(monkeypatch):
    monkeypatch.delenv("ODRADEK_CONSOLE_PASSWORD", raising=False)


@pytest.mark.parametrize(("options", "error"), [
    (["--host", "0.0.0.0"], "--host 0.0.0.0 is not loopback: everyone who reaches it would act with the console's "
                            "Kafka credentials; give --user (password in --password-file or $ODRADEK_CONSOLE_PASSWORD) "
                            "or --token-file, with --ssl-certfile and --ssl-keyfile, or --insecure-no-auth"),
    (["--host", "0.0.0.0", "--token-file", "{token}"],
     "--host 0.0.0.0 is not loopback: credentials would cross the network in plain text; "
     "give --ssl-certfile and --ssl-keyfile"),
    (["--user", "ada"], "--user needs a password: --password-file FILE or $ODRADEK_CONSOLE_PASSWORD"),
    (["--password-file", "{token}"], "--password-file needs --user"),
    (["--token-file", "{empty}"], "the console's token is empty"),
    (["--token-file", "{missing}"], "cannot read --token-file {missing}: No such file or directory"),
    (["--ssl-certfile", "{token}"], "--ssl-certfile and --ssl-keyfile go together"),
    (["--ssl-certfile", "{token}", "--ssl-keyfile", "{token}"], "cannot use --ssl-certfile/--ssl-keyfile: "),
    (["--token-file", "{token}", "--insecure-no-auth"], "--insecure-no-auth contradicts --user/--token-file: choose one"),
    (["--allowed-host", "http://console.test/"], "--allowed-host takes NAME or NAME:PORT, not 'http://console.test/'"),
])
def test_unsafe_or_incomplete_options_are_one_line(tmp_path, no_console_password, options, error):
    """Refused before the cluster is asked: with no cluster there, a console that would have
    started says so instead of serving (and a check broken fails at once, not at the timeout)."""
    (tmp_path / "token").write_text("t\n")
    (tmp_path / "empty").write_text("")
    paths = {name: str(tmp_path / name) for name in ("token", "empty", "missing")}
    result = run_cli("console", "--bootstrap-server", "127.0.0.1:1", "--port", "0", *[o.format(**paths) for o in options])
    assert result.code == 1 and result.err.startswith(f"odradek console: {error.format(**paths)}"), result.err
    assert result.err.count("\n") == 1 and result.out == ""


def test_help_says_whose_credentials_and_the_options():
    result = run_cli("console", "--help")
    text = " ".join(result.out.split())
    assert result.code == 0
    assert "The console acts with its own Kafka credentials (those of --command-config) for everyone who " \
           "reaches it" in text
    for option in ("--allowed-host NAME[:PORT]", "--user NAME", "--password-file FILE", "ODRADEK_CONSOLE_PASSWORD",
                   "--token-file FILE", "--ssl-certfile FILE", "--ssl-keyfile FILE", "--insecure-no-auth"):
        assert option in text, option


def test_the_password_file_holds_one_line_and_wins_over_the_environment(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from odradek.cli.console_cmd import _auth

    monkeypatch.setenv("ODRADEK_CONSOLE_PASSWORD", "from-the-environment")
    password = tmp_path / "password"
    password.write_bytes(b"from the file\r\n")
    args = SimpleNamespace(user="ada", password_file=str(password), token_file=None)
    auth = _auth(args)
    assert auth.admits(basic("ada", "from the file")["Authorization"])
    assert not auth.admits(basic("ada", "from-the-environment")["Authorization"])
    assert _auth(SimpleNamespace(user="ada", password_file=None, token_file=None)).admits(
        basic("ada", "from-the-environment")["Authorization"])
