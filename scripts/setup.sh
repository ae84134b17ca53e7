#!/usr/bin/env bash
# Sets up everything odradek needs on a fresh Debian machine, idempotently:
# Debian packages (when missing), a virtualenv in .venv, and odradek with its extras, at the exact
# versions of constraints.txt (pyproject.toml declares ranges; constraints.txt pins what is tested).
# Usage: scripts/setup.sh [EXTRAS]   (EXTRAS defaults to "dev"; e.g. "dev,demo"; "" for none)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1-dev}"

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)  # Spark and ZooKeeper
if [[ ",$extras," == *",dev,"* ]]; then  # what only the tests use
  command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
  # ZooKeeper's server jar, for the tests of the ZooKeeper-backed metadata store.
  [ -f /usr/share/java/zookeeper.jar ] || need_apt+=(libzookeeper-java)
  # Debian's Go and two old Go clients (sarama 1.22, kafka-go 0.2.1), for the old-client tests.
  command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
  [ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || need_apt+=(golang-github-shopify-sarama-dev)
  [ -d /usr/share/gocode/src/github.com/segmentio/kafka-go ] || need_apt+=(golang-github-segmentio-kafka-go-dev)
  # A headless browser and its WebDriver, for the tests of `odradek console`.
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
  command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
fi
# A C compiler and Python's headers, for odradek's C extension (setup.py).
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
python=${PYTHON:-python3}
"$python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
  || need_apt+=(python3-dev)
if ((${#need_apt[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing Debian packages (a minute or two): ${need_apt[*]}"
  # Another apt-get (unattended upgrades on a fresh machine) may hold dpkg's lock: wait for
  # it rather than fail at once.
  wait_lock=(-o DPkg::Lock::Timeout=600)
  $sudo apt-get "${wait_lock[@]}" update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends \
    "${need_apt[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || { echo "setup: creating the virtualenv .venv"; "$python" -m venv .venv; }
# Reinstall (and so recompile the C extension) whenever the packaging, the pinned versions or the
# C sources change.
stamp=".venv/.odradek-$extras-$(cat pyproject.toml setup.py constraints.txt odradek/*/*.c odradek/*/*.h | sha1sum | cut -c1-12)"
built=1
for c in odradek/*/_*.c; do compgen -G "${c%.c}.*.so" >/dev/null || built=0; done
if [ ! -f "$stamp" ] || [ "$built" = 0 ]; then
  started=$SECONDS
  target="odradek${extras:+[$extras]}"
  echo "setup: installing $target into .venv at the versions of constraints.txt and building its C extensions"
  echo "setup: (the first time, pip downloads them: with pyspark, several hundred MB, a few minutes)"
  .venv/bin/python -m pip install -q -c constraints.txt --upgrade pip
  # pip's own output is a screenful of "Requirement already satisfied"; one line per package it
  # fetches and per build shows the progress (errors, on standard error, pass as they are).
  # PYTHONWARNINGS: setuptools' build backend prints a boxed warning about editable installs
  # that concerns packaging tools, not users.
  PYTHONWARNINGS=ignore .venv/bin/python -m pip install --progress-bar off -c constraints.txt -e ".${extras:+[$extras]}" \
    | awk '/^(Collecting|Building)/ { print "setup:   " $0; fflush() }'
  rm -f .venv/.odradek-"$extras"-*
  touch "$stamp"
  echo "setup: $target installed ($((SECONDS - started)) s)"
fi
