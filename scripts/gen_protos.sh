#!/usr/bin/env bash
# Regenerates rmq/proxy/v2/*_pb2.py(i) from the vendored apache/rocketmq-apis protos
# (rmq/proxy/protos). Needs grpcio-tools (pip install grpcio-tools); the committed modules
# name the protoc they were made with, so users need no protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$PY" -m grpc_tools.protoc -Irmq/proxy/protos --python_out="$out" --pyi_out="$out" \
    rmq/proxy/protos/apache/rocketmq/v2/*.proto
for f in "$out"/apache/rocketmq/v2/*_pb2.py*; do
    # the modules live in rmq.proxy.v2, not in a top-level package `apache`
    sed 's/^from apache\.rocketmq\.v2 import/from rmq.proxy.v2 import/' "$f" > "rmq/proxy/v2/$(basename "$f")"
done
