"""``leader-epoch-checkpoint``: Kafka's format, atomic writes, and what a bad file does."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.storage.errors import CheckpointError
from odradek.storage.leader_epoch_checkpoint import EpochEntry, LeaderEpochCheckpointFile


def _file(tmp_path, content: bytes | None = None) -> LeaderEpochCheckpointFile:
    checkpoint = LeaderEpochCheckpointFile.in_directory(str(tmp_path))
    if content is not None:
        with open(checkpoint.path, "wb") as f:
            f.write(content)
    return checkpoint


def test_kafka_format(tmp_path):
    checkpoint = _file(tmp_path)
    checkpoint.write([EpochEntry(0, 1), EpochEntry(1, 2)])
    with open(checkpoint.path, "rb") as f:
        assert f.read() == b"0\n2\n0 1\n1 2\n"
    assert not os.path.exists(checkpoint.path + ".tmp")
    assert checkpoint.read() == [(0, 1), (1, 2)]


def test_a_file_kafka_wrote_is_read(tmp_path):
    # Kafka's own writer: version, count, "epoch offset" (any whitespace between them).
    assert _file(tmp_path, b"0\n3\n0 0\n4  1250\n7\t90000\n").read() == [(0, 0), (4, 1250), (7, 90000)]


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=20))
def test_round_trip(tmp_path_factory, pairs):
    epochs = sorted({e for e, _ in pairs})
    offsets = sorted(o for _, o in pairs)[: len(epochs)]
    entries = [EpochEntry(e, o) for e, o in zip(epochs, offsets)]
    checkpoint = _file(tmp_path_factory.mktemp("cp"))
    checkpoint.write(entries)
    assert checkpoint.read() == entries


def test_missing_and_empty_files(tmp_path):
    assert _file(tmp_path).read() is None  # never written
    assert _file(tmp_path, b"").read() == []  # Kafka creates the file empty
    assert _file(tmp_path, b"0\n").read() == []
    assert _file(tmp_path, b"0\n0\n").read() == []


@pytest.mark.parametrize("content", [
    b"1\n0\n",  # unknown version
    b"0\n2\n0 1\n",  # torn: fewer entries than counted
    b"0\n1\n0 1\n1 2\n",  # more entries than counted
    b"0\n1\n0\n",  # a torn line
    b"0\n1\nzero 1\n",
    b"0\n1\n0 1 2\n",
    b"0\nx\n",
    b"0\n1\n-1 5\n",
    b"0\n2\n3 1\n2 5\n",  # epochs out of order
    b"0\n2\n1 9\n2 5\n",  # offsets out of order
    b"\xff\xfe\n",
])
def test_a_garbled_file_raises(tmp_path, content):
    with pytest.raises(CheckpointError):
        _file(tmp_path, content).read()
