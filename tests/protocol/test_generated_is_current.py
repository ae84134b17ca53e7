"""The committed generated codec is exactly what the generator makes from Kafka's specs."""

import subprocess
import sys

from tests.conftest import PROTOCOL_DIR, ROOT


def test_regenerating_changes_nothing():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_protocol.py"), "--check",
         "--protocol-dir", str(PROTOCOL_DIR)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
