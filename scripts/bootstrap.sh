#!/usr/bin/env bash
# Installs what rmq needs on a fresh Debian/Ubuntu machine: the package with its test and
# Spark extras, a Java runtime (17+) for PySpark, Chromium for the dashboard's browser test,
# and, where the system's Python takes no packages from pip (PEP 668) or has no pip, a .venv
# for them (scripts/python.sh then picks it). Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python.sh

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else echo "bootstrap: need root to run: $*" >&2; return 1
    fi
}

apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: no apt-get here; install these yourself: $*" >&2
        return 1
    fi
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

java_major() {
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "bootstrap: rmq needs Python 3.11 or later; $PY is $("$PY" --version 2>&1)" >&2
    exit 1
fi

# A Python the system manages, or one without pip: a virtual environment of our own.
if [ "$PY" = python3 ] && ! "$PY" - <<'PY'
import os, sys, sysconfig
managed = sys.prefix == sys.base_prefix and os.path.exists(
    os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
try:
    import pip  # noqa: F401
except ImportError:
    sys.exit(1)
sys.exit(1 if managed else 0)
PY
then
    echo "bootstrap: $("$PY" --version) takes no packages from pip here: making .venv"
    if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
        ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
        apt_install "python$ver-venv" || apt_install python3-venv
    fi
    "$PY" -m venv .venv
    PY=$PWD/.venv/bin/python
fi

if [ "$(java_major)" -lt 17 ] 2>/dev/null || [ -z "$(java_major)" ]; then
    echo "bootstrap: installing a Java 17 runtime for PySpark"
    apt_install openjdk-17-jre-headless || echo "bootstrap: Java 17+ is missing; Spark features will say so" >&2
fi

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "bootstrap: installing Chromium and its driver for the dashboard's browser test"
    apt_install chromium chromium-driver || echo "bootstrap: Chromium is missing; the browser test will say so" >&2
fi

"$PY" -m pip install --disable-pip-version-check -q --only-binary rocketmq -e ".[test,spark]"

# The official RocketMQ 5.x Python client for the gRPC proxy's tests (tests/proxy), in a
# directory of its own: its import name `rocketmq` is the C++ client's (rocketmq 0.4.4) too.
if [ ! -d .cache/rocketmq5/rocketmq/v5 ]; then
    "$PY" -m pip install --disable-pip-version-check -q --target .cache/rocketmq5 rocketmq-python-client==5.1.2
fi

# The official RocketMQ 5.x Node.js client for tests/proxy/test_client5_node.py, at the versions
# tests/proxy/node/package-lock.json pins, in a directory of its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "bootstrap: installing Node.js and npm for the 5.x Node.js client's tests"
    apt_install nodejs npm || echo "bootstrap: Node.js is missing; the Node.js client's tests will say so" >&2
fi
if command -v npm >/dev/null && ! cmp -s tests/proxy/node/package-lock.json .cache/node5/package-lock.json; then
    rm -rf .cache/node5 && mkdir -p .cache/node5
    cp tests/proxy/node/package.json tests/proxy/node/package-lock.json .cache/node5/
    (cd .cache/node5 && npm ci --no-audit --no-fund --silent) \
        || { rm -f .cache/node5/package-lock.json; echo "bootstrap: npm could not install the Node.js 5.x client" >&2; }
fi
