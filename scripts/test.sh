#!/usr/bin/env bash
# Installs what the tests need, then runs the whole suite (slow, interop and Spark tests too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec python3 -m pytest -q -m "" --durations=15 "$@"
