#!/usr/bin/env bash
# The first-minute job: install, start a name server and a broker (separate processes, as
# RocketMQ runs them), send 1,000 messages with the quickstart producer, read them back
# with the quickstart consumer, then stop both servers cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
. scripts/python.sh  # the Python bootstrap installed into

NAMESRV_PORT=${NAMESRV_PORT:-9876}
BROKER_PORT=${BROKER_PORT:-10911}
STORE=${STORE:-$PWD/store}
LOGS=${LOGS:-$PWD/store/logs}
export NAMESRV_ADDR=127.0.0.1:$NAMESRV_PORT
mkdir -p "$LOGS"

cleanup() {
    "$PY" -m rmq shutdown broker --port "$BROKER_PORT" >/dev/null 2>&1 || true
    "$PY" -m rmq shutdown namesrv --port "$NAMESRV_PORT" >/dev/null 2>&1 || true
}
trap cleanup EXIT

wait_port() {
    "$PY" - "$1" <<'PY'
import socket, sys, time
port = int(sys.argv[1]); end = time.monotonic() + 15
while time.monotonic() < end:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(f"nothing listens on 127.0.0.1:{port} after 15 s")
PY
}

"$PY" -m rmq namesrv -p "$NAMESRV_PORT" >"$LOGS/namesrv.log" 2>&1 &
wait_port "$NAMESRV_PORT"
head -n 3 "$LOGS/namesrv.log"
cat >"$STORE/broker.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerIP1=127.0.0.1
listenPort=$BROKER_PORT
storePathRootDir=$STORE
flushDiskType=ASYNC_FLUSH
CONF
"$PY" -m rmq broker -n "$NAMESRV_ADDR" -c "$STORE/broker.conf" >"$LOGS/broker.log" 2>&1 &
wait_port "$BROKER_PORT"
head -n 3 "$LOGS/broker.log"

"$PY" -m rmq quickstart producer
"$PY" -m rmq quickstart consumer --count 1000 --seconds 60
