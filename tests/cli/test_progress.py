"""Progress bars of the long commands: drawn on standard error when it is a terminal (here a
rich Console forced to be one, writing into a StringIO), and nothing at all otherwise, with
standard output the same either way."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from rich.console import Console

from odradek.cli import progress, reassign_partitions_cmd
from odradek.cli.mirror_cmd import catch_up
from odradek.client import AdminClient, NewTopic, TopicPartition
from odradek.mirror.mirror_lag import MirrorProgress
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record
from tests.cli.conftest import run_cli


@pytest.fixture
def terminal(monkeypatch) -> io.StringIO:
    """Standard error as a terminal, for the bars: what they draw lands in the returned StringIO."""
    screen = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console",
                        lambda: Console(file=screen, force_terminal=True, width=120))
    return screen


def test_no_terminal_no_bar(capsys):
    with progress.count_bar("copying") as bar:
        task = bar.add_task("x", total=10, note="")
        bar.update(task, completed=10)
    assert bar.disable and capsys.readouterr() == ("", "")


def test_a_terminal_gets_the_bar(terminal):
    with progress.count_bar("copying", "things") as bar:
        task = bar.add_task("x", total=10, note="fast")
        bar.update(task, completed=7)
    assert not bar.disable
    assert "copying" in terminal.getvalue() and "7/10" in terminal.getvalue() and "fast" in terminal.getvalue()


def test_no_progress_on_a_terminal_draws_nothing(terminal):
    with progress.count_bar("copying", enabled=False) as bar:
        bar.add_task("x", total=10, note="")
    assert bar.disable and terminal.getvalue() == ""


def test_perf_produce_bar_on_stderr_json_on_stdout(cli, broker, topic_name, terminal):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    result = cli("perf", "produce", "--topic", topic_name, "--num-records", "500", "--record-size", "10",
                 "--throughput", "-1", "--output", "json")
    assert result.code == 0 and result.err == "", result.err
    assert json.loads(result.out)["records"] == 500  # stdout: the JSON alone
    assert "producing" in terminal.getvalue() and "500/500" in terminal.getvalue()


def test_dump_log_bar_of_the_bytes_read(tmp_path, terminal):
    segment = tmp_path / f"{0:020d}.log"
    segment.write_bytes(b"".join(build_batch([Record(i, 1_000 + i, None, b"v%d" % i)], BatchSpec(base_offset=i))
                                 for i in range(300)))
    plain = run_cli("dump-log", "--files", str(segment), "--no-progress")
    assert terminal.getvalue() == ""
    shown = run_cli("dump-log", "--files", str(segment))
    assert (shown.code, shown.out) == (0, plain.out) and "300 batches, 300 records" in shown.out
    assert f"reading {segment.name}" in terminal.getvalue()


def test_reassignment_wait_counts_partitions_done(terminal, monkeypatch, capsys):
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    answers = iter([{a: 1, b: 1}, {b: 1}, {}])
    admin = SimpleNamespace(list_partition_reassignments=lambda partitions: next(answers))
    monkeypatch.setattr(reassign_partitions_cmd, "WAIT_POLL_S", 0)
    reassign_partitions_cmd._wait(admin, [a, b], SimpleNamespace(no_progress=None))
    assert "reassigning" in terminal.getvalue() and "2/2" in terminal.getvalue()
    assert capsys.readouterr() == ("", "")


def test_mirror_catch_up_counts_from_where_this_run_started():
    mirror = MirrorProgress()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    mirror.start(a, 100)
    mirror.start(b, 0)
    started: dict = {}
    assert catch_up(mirror, started) == (0, 0, None)  # no end offset known yet
    mirror.ends({a: 150, b: 40})
    mirror.committed({a: 130, b: 10}, {a: 30, b: 10})
    assert catch_up(mirror, started) == (40, 90, 50)  # 30 + 10 mirrored; 20 + 30 behind
