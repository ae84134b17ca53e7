"""``odradek broker``'s process-level set-up (``cli/broker_cmd.serve``)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import subprocess
import sys

import pytest

from odradek.cli.broker_cmd import log_level, serve
from odradek.server.broker import Broker, BrokerStartError
from odradek.server.config import BrokerConfig
from odradek.storage.log_dir_lock import LogDirLocks
from odradek.testing.broker import test_config as broker_props


def test_serve_freezes_what_start_up_built_and_stops_on_sigterm(tmp_path, capsys):
    """Once the broker is up, the objects start-up made are frozen out of the collector's
    full passes (``gc.freeze``); SIGTERM then stops the broker cleanly."""
    config = BrokerConfig.from_props(broker_props(tmp_path / "data"))
    frozen_when_ready = []

    def ready(broker):
        frozen_when_ready.append(gc.get_freeze_count())
        signal.raise_signal(signal.SIGTERM)  # serve's own handler: a clean stop

    assert gc.get_freeze_count() == 0
    try:
        assert asyncio.run(serve(config, ready)) == 0
    finally:
        gc.unfreeze()
    assert frozen_when_ready and frozen_when_ready[0] > 1000
    assert "ready" in capsys.readouterr().out


# --- start-up failures: one line naming the setting, a non-zero exit, no traceback ------------
def _broker(tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "odradek.cli.main", "broker",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0", *overrides]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path)


def _one_clear_line(result: subprocess.CompletedProcess, *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "cannot start" in line or "error:" in line]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_a_port_in_use_is_one_line_naming_listeners(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _broker(tmp_path, "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                         "--override", f"log.dirs={tmp_path / 'data'}")
    _one_clear_line(result, "listeners", f"127.0.0.1:{port}", "in use")


def test_a_log_dir_that_cannot_be_created_is_one_line_naming_log_dirs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = _broker(tmp_path, "--override", f"log.dirs={blocker / 'data'}")
    _one_clear_line(result, "log.dirs", str(blocker / "data"))


def test_a_log_dir_held_by_another_broker_is_refused(tmp_path):
    """Two brokers appending to the same segment files would corrupt both logs: the second
    one finds the first one's ``.lock`` and stops, as Kafka's LogManager does."""
    data = tmp_path / "data"
    locks = LogDirLocks([str(data)])
    locks.acquire()
    try:
        result = _broker(tmp_path, "--override", f"log.dirs={data}")
    finally:
        locks.release()
    _one_clear_line(result, "log.dirs", str(data), "in use by another odradek broker")


def test_an_unknown_log_level_is_refused_by_the_argument_parser(tmp_path):
    result = _broker(tmp_path, "--log-level", "bogus", "--override", f"log.dirs={tmp_path / 'data'}")
    assert result.returncode == 2
    _one_clear_line(result, "--log-level", "bogus")


def test_kafka_level_names_are_accepted():
    assert log_level("WARN") == log_level("warning") == logging.WARNING
    assert log_level("trace") == logging.DEBUG


def test_a_failed_start_releases_what_it_took(tmp_path):
    """A broker whose listener cannot bind gives its log directories back: the next start on
    the same directories (in the same process, as tests do) succeeds."""
    data = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        props = broker_props(data)
        props["listeners"] = f"PLAINTEXT://127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(BrokerStartError, match="listeners"):
            asyncio.run(Broker(BrokerConfig.from_props(props)).start())

    async def start_and_stop():
        broker = Broker(BrokerConfig.from_props(broker_props(data)))
        await broker.start()
        await broker.stop()

    asyncio.run(start_and_stop())


def test_a_first_start_on_an_empty_directory_is_not_called_unclean(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="odradek")

    async def start_and_stop():
        broker = Broker(BrokerConfig.from_props(broker_props(tmp_path / "new")))
        await broker.start()
        await broker.stop()

    asyncio.run(start_and_stop())
    assert "unclean" not in caplog.text
    assert "no logs in" in caplog.text


def test_a_wrong_keystore_password_is_one_line_naming_it(tmp_path):
    from tests.server.tls_certs import make_pki, pkcs12_keystore

    pki = make_pki(tmp_path / "pki")
    keystore = pkcs12_keystore(pki, "server", tmp_path / "server.keystore.p12", "store-secret", chain=False)
    result = _broker(tmp_path, "--override", "listeners=SSL://127.0.0.1:0", "--override", "ssl.keystore.type=PKCS12",
                     "--override", f"ssl.keystore.location={keystore}", "--override", "ssl.keystore.password=wrong",
                     "--override", f"log.dirs={tmp_path / 'data'}")
    _one_clear_line(result, "listener SSL", keystore, "wrong ssl.keystore.password")
