"""The committed generated codec is exactly what the generator makes from Kafka's specs.

The specs are not part of the repository (README.md, "The protocol codec"): where they are
absent the check cannot run, and says so as a skip; everything else tests the committed code.
"""

import subprocess
import sys

import pytest

from tests.conftest import PROTOCOL_DIR, ROOT


@pytest.mark.skipif(not (PROTOCOL_DIR / "messages").is_dir(),
                    reason=f"Kafka's message specs are not at {PROTOCOL_DIR}: nothing to regenerate from")
def test_regenerating_changes_nothing():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_protocol.py"), "--check",
         "--protocol-dir", str(PROTOCOL_DIR)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
