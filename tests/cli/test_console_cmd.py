"""``odradek console`` as a command: a real process on a free port (``--port 0``) prints its
address, serves the pages and their JSON, and stops on Ctrl-C; bad options and an
unreachable cluster are one line and status 1."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.cli.conftest import BROKER_ID, run_cli

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
