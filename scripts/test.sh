#!/usr/bin/env bash
# Sets everything up (see setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev,demo  # the test tools, and the demo (Spark, charts) the suite also tests
specs="${ODRADEK_SHARED:-../shared}/kafka-protocol"
if [ -d "$specs/messages" ]; then
  .venv/bin/python tools/generate_protocol.py --check --protocol-dir "$specs"
else
  echo "no Kafka message specs at $specs: the codec regeneration check is skipped (README.md, 'The protocol codec')"
fi
# Three workers on two cores: most tests wait (on brokers, ZooKeeper sessions, Spark) more than
# they compute. A test file stays on one worker (its module fixtures are built once).
exec .venv/bin/pytest -q -p no:cacheprovider -n "${ODRADEK_TEST_WORKERS:-3}" --dist loadfile "$@"
