#!/usr/bin/env bash
# Sets everything up (see setup.sh) and runs odradek's main job: the activity-stream demo
# (an embedded broker, a synthetic activity stream, a PySpark streaming job and batch loader,
# and a report). Arguments go to `odradek demo` (--events N, --duration S, --follow, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh demo  # the demo extra (Spark, the report's charts), not the test tools
exec .venv/bin/odradek demo "$@"
