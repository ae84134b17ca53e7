#!/usr/bin/env bash
# Sets everything up (see setup.sh) and runs odradek's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
exec .venv/bin/odradek demo "$@"
