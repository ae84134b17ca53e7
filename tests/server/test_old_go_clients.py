"""Old Go clients from Debian write and read back: sarama 1.22 (its default protocol version
sends Produce v0 / Fetch v0) and kafka-go 0.2.1 (Fetch v2).

The programs in ``go_clients/`` are built with Debian's Go toolchain in GOPATH mode against
the packaged sources (``golang-go``, ``golang-github-shopify-sarama-dev``,
``golang-github-segmentio-kafka-go-dev``); without them these tests are skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.clients import unique_topic

SOURCES = Path(__file__).resolve().parent / "go_clients"
GOCODE = Path("/usr/share/gocode/src/github.com")
N = 25
PACKAGES = {"sarama_rw": GOCODE / "Shopify" / "sarama", "kafkago_rw": GOCODE / "segmentio" / "kafka-go"}


@pytest.fixture(scope="module")
def go_client(tmp_path_factory):
    """Build a program of ``go_clients/`` on first use; its path."""
    if shutil.which("go") is None:
        pytest.skip("Debian's Go toolchain is not installed (apt-get install golang-go)")
    root = tmp_path_factory.mktemp("gopath")
    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if not PACKAGES[name].is_dir():
            pytest.skip(f"{PACKAGES[name]} is missing (Debian's golang-github-... -dev package)")
        if name not in built:
            src = root / "src" / "oldclients" / name
            shutil.copytree(SOURCES / name, src)
            env = {**os.environ, "GO111MODULE": "off", "GOPATH": f"{root}:/usr/share/gocode", "CGO_CFLAGS": "-w"}
            subprocess.run(["go", "build", "-o", str(root / name), "."], cwd=src, env=env, check=True,
                           capture_output=True, timeout=300)
            built[name] = root / name
        return built[name]

    return build


def _run(program: Path, *args: str) -> list[str]:
    result = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout.splitlines()


@pytest.mark.parametrize("version,compression", [
    ("default", "none"), ("default", "gzip"), ("0.10.0.0", "none"), ("0.10.2.0", "gzip")])
def test_sarama_reads_what_it_wrote(shared_broker, go_client, version, compression):
    topic = unique_topic("sarama")
    lines = _run(go_client("sarama_rw"), shared_broker.bootstrap, topic, str(N), version, compression)
    assert lines == [f"{i} k{i} v{i}" for i in range(N)]


def test_kafka_go_reads_what_it_wrote(shared_broker, go_client):
    topic = unique_topic("kafka-go")
    lines = _run(go_client("kafkago_rw"), shared_broker.bootstrap, topic, str(N))
    assert lines == [f"{i} k{i} v{i}" for i in range(N)]
