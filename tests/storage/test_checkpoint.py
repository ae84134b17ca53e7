import os

import pytest

from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.storage.errors import CheckpointError


def test_round_trip_in_kafka_format(tmp_path):
    cp = OffsetCheckpointFile(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert cp.read() == {}
    cp.write({("my-topic", 1): 987, ("my-topic", 0): 1234, ("a.b_c", 7): 0})
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == (
        "0\n3\na.b_c 7 0\nmy-topic 0 1234\nmy-topic 1 987\n"
    )
    assert cp.read() == {("my-topic", 1): 987, ("my-topic", 0): 1234, ("a.b_c", 7): 0}
    assert not os.path.exists(cp.path + ".tmp")
    cp.write({})
    assert cp.read() == {}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1\n0\n",
        "0\n2\nt 0 1\n",
        "0\n1\nt 0\n",
        "0\n1\nt x 1\n",
        "0\n1\nt 0 -1\n",
        "0\nmany\n",
        "0\n-1\n",
    ],
)
def test_malformed_files_raise(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(str(path)).read()


def test_binary_garbage_raises(tmp_path):
    path = tmp_path / "cp"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(CheckpointError):
        OffsetCheckpointFile(str(path)).read()
