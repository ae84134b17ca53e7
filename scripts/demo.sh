#!/usr/bin/env bash
# Sets everything up (see setup.sh) and runs odradek's main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
# The demo pipeline (issue 7) replaces this; until then the main job is a broker.
exec .venv/bin/odradek broker "$@"
