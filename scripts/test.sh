#!/usr/bin/env bash
# Sets everything up (see setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,spark
specs="${ODRADEK_SHARED:-../shared}/kafka-protocol"
if [ -d "$specs/messages" ]; then
  .venv/bin/python tools/generate_protocol.py --check --protocol-dir "$specs"
else
  echo "no Kafka message specs at $specs: the codec regeneration check is skipped (README.md, 'The protocol codec')"
fi
exec .venv/bin/pytest -q -p no:cacheprovider "$@"
