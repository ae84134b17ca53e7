"""The C extensions' example-based tests pass with the extensions built under AddressSanitizer
and UndefinedBehaviorSanitizer (``scripts/test-sanitizers.sh --quick``; the full run, with the
property-based tests and the broker's produce paths, is ``scripts/test-sanitizers.sh``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_c_extensions_pass_their_tests_under_asan_and_ubsan():
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "test-sanitizers.sh"), "--quick"],
        env={**os.environ, "PYTHON": sys.executable}, capture_output=True, text=True, timeout=600)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    assert " passed" in output and "runtime error" not in output and "Sanitizer" not in output
