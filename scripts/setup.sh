#!/usr/bin/env bash
# Sets up everything odradek needs on a fresh Debian machine, idempotently:
# Debian packages (when missing), a virtualenv in .venv, and odradek with its pinned extras.
# Usage: scripts/setup.sh [EXTRAS]   (EXTRAS defaults to "dev"; e.g. "dev,spark")
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"

need_apt=()
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# ZooKeeper's server jar, for the tests of the ZooKeeper-backed metadata store.
[ -f /usr/share/java/zookeeper.jar ] || need_apt+=(libzookeeper-java)
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless)
if ((${#need_apt[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: ${need_apt[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=".venv/.odradek-$extras-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "installing odradek[$extras] into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[$extras]"
  rm -f .venv/.odradek-"$extras"-*
  touch "$stamp"
fi
