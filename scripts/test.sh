#!/usr/bin/env bash
# Installs what the tests need, checks lint, format and types, then runs the whole suite (slow,
# interop and Spark tests too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# Lint, format and types first: the public client API and the sans-IO core are mypy --strict.
python3 -m ruff check rmq tests spark bench
python3 -m ruff format --check rmq tests spark bench
python3 -m mypy rmq/protocol rmq/client
exec python3 -m pytest -q -m "" --durations=15 "$@"
