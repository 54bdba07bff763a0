#!/usr/bin/env bash
# Generates the Python gRPC stubs of `wazoo serve` (wazoo_pb2.py, wazoo_pb2_grpc.py) from
# host/proto/wazoo.proto into the directory $1, which is created if missing.
# Needs grpcio-tools (.ci/setup installs it). Usage: tests/python/gen_stubs.sh OUT_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
proto_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../host/proto" && pwd)"
mkdir -p "$1"
python3 -m grpc_tools.protoc -I "$proto_dir" --python_out="$1" --grpc_python_out="$1" \
  "$proto_dir/wazoo.proto"
