#!/usr/bin/env bash
# Runs the tests of odradek's C extensions with the extensions built under AddressSanitizer
# and UndefinedBehaviorSanitizer (gcc's -fsanitize=address,undefined).
#
# The build goes to a separate tree, build/sanitizers/ (a copy of odradek/ and tests/ whose
# extensions are compiled with the sanitizers; the normal in-place build is untouched).
# Python itself is not instrumented, so libasan is preloaded (LD_PRELOAD), and
# PYTHONMALLOC=malloc sends Python's object allocations through malloc, where ASan sees them:
# a use of a freed object (a reference not held) is reported, not just C buffers. Leak
# detection is off (the interpreter does not free everything at exit). Any report fails the
# run: ASan aborts on its first error, UBSan is made to (-fno-sanitize-recover).
#
# Usage: scripts/test-sanitizers.sh [--quick] [PYTEST_ARGS...]
#   --quick: the example-based tests of the builder, the Produce codec and the partitioner
#   (seconds, after a build of ~15 s), run by the default suite (tests/test_c_sanitizers.py);
#   without it: every test that drives the extensions, property-based ones and the broker's
#   produce paths included (a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=$(command -v python3)
out=$root/build/sanitizers

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi

libasan=$(${CC:-gcc} -print-file-name=libasan.so)
if [ ! -e "$libasan" ]; then
  echo "test-sanitizers: libasan not found (gcc's AddressSanitizer runtime: apt-get install gcc)" >&2
  exit 2
fi

# A fresh copy of the sources (no compiled extensions of the normal build), then the
# extensions built in place in it.
rm -rf "$out"
mkdir -p "$out"
cp -r odradek tests setup.py pyproject.toml README.md "$out"/
find "$out" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"
(cd "$out" && CFLAGS="$flags" LDFLAGS="-fsanitize=address,undefined" \
  "$python" setup.py -q build_ext --inplace --build-temp "$out/tmp" >/dev/null)

if ((quick)); then
  # The example-based tests of the builder, the Produce codec and the murmur2 partitioner
  # (the property-based ones, which take a minute or more under the sanitizers, are left to
  # the full run).
  tests=(tests/client/test_memory_records_builder.py tests/protocol/test_produce_codec.py
         tests/client/test_partitioner.py
         -k "not byte_identical and not agrees and not mutated and not leaves_transactions and not _is_the_generic")
else
  tests=(tests/client/test_memory_records_builder.py tests/client/test_partitioner.py
         tests/client/test_producer_batch.py tests/protocol/test_produce_codec.py
         tests/records/test_log_validator.py tests/records/test_client_batches.py
         tests/records/test_crc32c_fused.py tests/storage/test_fast_append.py tests/storage/test_fast_append_declines.py
         tests/server/test_produce_fast_path.py tests/server/test_request_memory.py)
fi

cd "$out"
export ODRADEK_SHARED=${ODRADEK_SHARED:-$(dirname "$root")/shared}
export LD_PRELOAD=$libasan PYTHONMALLOC=malloc PYTHONPATH=$out
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# (--capture=sys: a sanitizer writes its report to file descriptor 2 and ends the process,
# which fd capture would swallow.)
exec "$python" -m pytest -q -p no:cacheprovider --capture=sys "${tests[@]}" "$@"
