"""Fixtures: a broker whose id is 1000 (as in ``controller.assignment``'s worked example), one
per test module, and ``cli`` to run ``odradek`` in-process with its input and output captured."""

from __future__ import annotations

import io
import itertools
import logging
import sys
import uuid
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from unittest import mock

import pytest

from odradek.cli.main import main
from odradek.testing.broker import InProcessBroker

BROKER_ID = 1000
_names = itertools.count()

# kafka-python logs every connection a broker closes at the end of a module.
logging.getLogger("kafka").setLevel(logging.CRITICAL)


@dataclass
class Result:
    code: int
    out: str
    err: str
    out_bytes: bytes

    def lines(self) -> list[str]:
        return self.out.splitlines()


def run_cli(*argv: str, stdin: bytes | str = b"") -> Result:
    """``odradek ARGV`` in this process: exit status, stdout and stderr (argparse errors
    exit with status 2 through SystemExit, as the real command does)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", newline="\n", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", newline="\n", write_through=True)
    stdin_stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    with mock.patch.object(sys, "stdin", stdin_stream), redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        out.flush()
        err.flush()
    raw = out_bytes.getvalue()
    return Result(code, raw.decode("utf-8", "replace"), err_bytes.getvalue().decode("utf-8", "replace"), raw)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("cli") / "data", node_id=BROKER_ID) as b:
        yield b


@pytest.fixture
def cli(broker):
    """``cli("topics", "--list")``: run a command against the module's broker."""
    def run(command: str, *args: str, stdin: bytes | str = b"") -> Result:
        if command == "perf":
            sub, rest = args[0], args[1:]
            return run_cli(command, sub, "--bootstrap-server", broker.bootstrap, *rest, stdin=stdin)
        return run_cli(command, "--bootstrap-server", broker.bootstrap, *args, stdin=stdin)

    return run


@pytest.fixture
def topic_name():
    """A topic name no other test uses."""
    return f"t{next(_names)}-{uuid.uuid4().hex[:6]}"
