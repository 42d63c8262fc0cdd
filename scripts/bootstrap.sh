#!/usr/bin/env bash
# Installs what rmq needs on a fresh Debian/Ubuntu machine: the package with its test and
# Spark extras, and a Java runtime (17+) for PySpark. Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

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

if [ "$(java_major)" -lt 17 ] 2>/dev/null || [ -z "$(java_major)" ]; then
    echo "bootstrap: installing a Java 17 runtime for PySpark"
    apt_install openjdk-17-jre-headless || echo "bootstrap: Java 17+ is missing; Spark features will say so" >&2
fi

if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "bootstrap: installing Chromium and its driver for the dashboard's browser test"
    apt_install chromium chromium-driver || echo "bootstrap: Chromium is missing; the browser test will say so" >&2
fi

"$PY" -m pip install --disable-pip-version-check -q --only-binary rocketmq -e ".[test,spark]"
