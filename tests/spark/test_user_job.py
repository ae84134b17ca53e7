"""A Spark job as a user writes and runs it: README.md's ``job.py`` block and its two
commands (``.venv/bin/python job.py``; ``spark-submit`` with ``PYSPARK_PYTHON``), each run
as printed in a directory of its own holding the job and ``.venv`` (a link to this
checkout's), in a clean environment: no activated virtualenv, ``PATH`` without ``.venv/bin``
(so ``python3`` is the system's, without odradek), nothing of the test process's
``PYSPARK_*``. The job reads ``events`` from a broker of its own on 127.0.0.1 (the README's
address replaced by the broker's, nothing else changed), writes it upper-cased to
``events-upper`` in Spark's local[2] mode, and counts what that topic holds.

tests/test_readme.py leaves these two blocks to this file (its ``CLAIMS``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from odradek.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from odradek.testing.broker import InProcessBroker

ROOT = Path(__file__).resolve().parents[2]
README_BOOTSTRAP = "127.0.0.1:9092"
EVENTS = [(b"k1", b"hello"), (b"k2", b"world"), (b"member-42", b"page-view")]
# What a shell started by cron or a service has: the system's directories only (and the Java
# a user may have chosen).
CLEAN_ENV = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
             **{k: os.environ[k] for k in ("JAVA_HOME",) if k in os.environ}}
# The JVMs' JIT stops at its first tier, as odradek.spark.session's fast_start has it: a third
# less CPU for a job this short, on a machine the whole suite keeps busy. It changes nothing of
# what is checked (which Python Spark starts, where it finds odradek and pyarrow).
JOB_ENV = {**CLEAN_ENV, "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"}


def _readme_block(marker: str) -> str:
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.S | re.M)
    found = [text for _, text in blocks if marker in text]
    assert len(found) == 1, f"expected one README block containing {marker!r}, found {len(found)}"
    return found[0]


def _commands() -> list[str]:
    block = _readme_block("PYSPARK_PYTHON=$PWD/.venv/bin/python")
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def test_the_readme_gives_both_commands():
    assert [c.split()[0] for c in _commands()] == [".venv/bin/python", "PYSPARK_PYTHON=$PWD/.venv/bin/python"]


@pytest.mark.parametrize("command", [0, 1], ids=["python", "spark-submit"])
def test_readme_job_runs_outside_the_virtualenv(command, tmp_path):
    line = _commands()[command]
    with InProcessBroker(tmp_path / "data") as broker:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("events", 2, 1)])
        with Producer(broker.bootstrap) as producer:
            for key, value in EVENTS:
                producer.send("events", value, key=key).result(30)
        project = tmp_path / "project"
        project.mkdir()
        (project / ".venv").symlink_to(ROOT / ".venv")
        (project / "job.py").write_text(_readme_block("# job.py").replace(README_BOOTSTRAP, broker.bootstrap))
        result = subprocess.run(["bash", "-c", line], cwd=project, env=JOB_ENV, capture_output=True,
                                text=True, timeout=280)
        assert result.returncode == 0, result.stdout + result.stderr[-6000:]
        assert f"{len(EVENTS)} records in events-upper" in result.stdout, result.stdout + result.stderr[-6000:]
        assert sorted(_values(broker.bootstrap, "events-upper")) == sorted(v.upper() for _, v in EVENTS)


def _values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of ``topic``, read from the start to the end offsets."""
    with Consumer(bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000) as consumer:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == sum(ends.values()):
                break
        return values
