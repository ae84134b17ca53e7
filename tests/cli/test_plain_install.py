"""A plain ``pip install`` of the checkout, no extras, into a fresh virtualenv gives a working
``odradek``: the command starts, runs a broker, and the console producer and consumer carry
records through it.

The suite's own virtualenv has every extra (scripts/test.sh installs ``dev,demo``), so a
run-time import that only an extra provides passes there unnoticed; here it fails. odradek is
built from a copy of the checkout, as a user's ``pip install .`` builds it: with build isolation
and pip's configured index, at the tested versions of constraints.txt, compiling the C
extensions (the copy leaves out the ``.so`` files that the editable install compiled in place,
and keeps the build's ``build/`` and egg-info out of the checkout). About a minute on the
project's 2-core machine, most of it pip; longer where pip downloads every package first.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What a build does not need, or must not find: the work of the editable install (compiled
# extensions, egg-info, build/), virtualenvs, data, caches.
_NOT_COPIED = shutil.ignore_patterns(".git", ".venv", "data", "build", "dist", "*.egg-info", "__pycache__",
                                     "*.so", ".pytest_cache", ".hypothesis", "results")
_BOOTSTRAP = re.compile(r"--bootstrap-server (\S+)")


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with ``pip install -c constraints.txt <copy of the checkout>``."""
    base = tmp_path_factory.mktemp("plain-install")
    source = base / "odradek-src"
    shutil.copytree(ROOT, source, ignore=_NOT_COPIED)
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=base)
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(source / "constraints.txt"),
         str(source)], cwd=base, timeout=900)
    return venv


def run(args: list[str], cwd: Path, stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``args`` run outside the checkout (so nothing imports its sources), the exit status checked."""
    result = subprocess.run(args, cwd=cwd, env=_clean_env(), input=stdin, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{' '.join(args)}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def _clean_env() -> dict[str, str]:
    """This environment without what points Python at the suite's virtualenv or sources."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}


@pytest.mark.timeout(1200)
def test_plain_install_runs_a_broker_and_a_console_round_trip(plain_venv, tmp_path):
    odradek = str(plain_venv / "bin" / "odradek")
    site = next((plain_venv / "lib").glob("python3*/site-packages"))
    assert sorted(p.name.split(".")[0] for p in (site / "odradek").glob("*/_*.so")) == [
        "_fast_append", "_log_validator", "_memory_records_builder", "_murmur2", "_produce_codec"]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run([odradek, "--version"], cwd=tmp_path).stdout == f"odradek {version}\n"

    broker = subprocess.Popen(
        [odradek, "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={tmp_path / 'data'}", "--override", "offsets.topic.num.partitions=1",
         "--override", "group.initial.rebalance.delay.ms=0"],
        cwd=tmp_path, env={**_clean_env(), "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    try:
        bootstrap = ["--bootstrap-server", _wait_ready(broker)]
        run([odradek, "topics", *bootstrap, "--create", "--topic", "plain", "--partitions", "1",
             "--replication-factor", "1"], cwd=tmp_path)
        run([odradek, "produce", *bootstrap, "--topic", "plain"], cwd=tmp_path, stdin="one\ntwo\nthree\n")
        consumed = run([odradek, "consume", *bootstrap, "--topic", "plain", "--from-beginning",
                        "--max-messages", "3"], cwd=tmp_path)
        assert consumed.stdout.splitlines() == ["one", "two", "three"]
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(60)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()


def _wait_ready(broker: subprocess.Popen, timeout: float = 60) -> str:
    """The address the broker prints once it listens; its output then drains in a thread."""
    output: list[str] = []
    timer = threading.Timer(timeout, broker.kill)
    timer.start()
    try:
        for line in broker.stdout:
            output.append(line)
            found = _BOOTSTRAP.search(line)
            if found:
                threading.Thread(target=lambda: [None for _ in broker.stdout], daemon=True).start()
                return found.group(1)
    finally:
        timer.cancel()
    raise AssertionError("the broker did not start:\n" + "".join(output[-30:]))
