"""Shared test configuration."""

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("ODRADEK_SHARED", ROOT.parent / "shared"))
PROTOCOL_DIR = SHARED / "kafka-protocol"
sys.path.insert(0, str(ROOT / "tools"))

settings.register_profile(
    "odradek", deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=50
)
settings.load_profile("odradek")
