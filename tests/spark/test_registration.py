"""``registration.worker_python``: which Python Spark's workers are to run, without Spark.

Unset ``PYSPARK_PYTHON`` becomes this interpreter; one set by the user is kept, and with a
local master checked: a Python that cannot import odradek and pyarrow (the system's, a path
that does not exist) is refused in one line that says what to set. A job doing all this for
real, outside the virtualenv, is ``test_user_job``.
"""

from __future__ import annotations

import os
import sys

import pytest

from odradek.spark.registration import worker_python


def test_unset_becomes_this_interpreter(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert worker_python("local[2]") == sys.executable
    assert os.environ["PYSPARK_PYTHON"] == sys.executable  # for SparkContexts started later


def test_this_interpreter_is_kept(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    assert worker_python("local[2]") == sys.executable


@pytest.mark.parametrize("kind", ["without-odradek", "missing"])
def test_a_python_without_odradek_is_refused_in_one_line(monkeypatch, tmp_path, kind):
    python = str(tmp_path / "python")
    if kind == "without-odradek":  # this Python without its site-packages, as the system's would be
        (tmp_path / "python").write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
        (tmp_path / "python").chmod(0o755)
    monkeypatch.setenv("PYSPARK_PYTHON", python)
    with pytest.raises(RuntimeError) as refused:
        worker_python("local[*]")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"Spark's Python workers would run {python} (PYSPARK_PYTHON), which cannot "
                              "'import odradek, pyarrow' (")
    assert message.endswith(f"): set PYSPARK_PYTHON to a Python that has odradek[spark] installed, e.g. "
                            f"PYSPARK_PYTHON={sys.executable}, or leave it unset")


def test_a_cluster_master_is_not_checked(monkeypatch):
    """The executors' Python is on other machines: the driver cannot tell."""
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/conda/bin/python")
    assert worker_python("spark://master:7077") == "/opt/conda/bin/python"
