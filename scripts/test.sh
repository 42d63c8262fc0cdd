#!/usr/bin/env bash
# Installs what the tests need, checks lint, format and types, then runs the whole suite (slow,
# interop and Spark tests too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
. scripts/python.sh  # the Python bootstrap installed into (a .venv where it made one)
# Lint, format and types first: all of rmq (dashboard and tools included) is mypy --strict.
"$PY" -m ruff check rmq tests spark bench
"$PY" -m ruff format --check rmq tests spark bench
"$PY" -m mypy rmq
# One worker process per core, each taking whole files (module fixtures stay shared): most of
# the suite's time is brokers, elections and JVMs starting and waiting, not CPU.
exec "$PY" -m pytest -q -m "" -n auto --dist loadfile --durations=15 "$@"
