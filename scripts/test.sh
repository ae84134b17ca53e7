#!/usr/bin/env bash
# Sets everything up (see setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,spark
.venv/bin/python tools/generate_protocol.py --check
exec .venv/bin/pytest -q -p no:cacheprovider "$@"
