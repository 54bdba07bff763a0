#!/usr/bin/env bash
# Generates the Python stubs of the `wazoo` package from the daemon's API: wazoo_pb2.py and
# wazoo_pb2_grpc.py from host/proto/wazoo.proto. (The google.rpc types the daemon's errors travel
# in come from googleapis-common-protos, through grpcio-status: no copy here.)
#
#   clients/python/gen_stubs.sh [OUT_DIR]
#
# OUT_DIR defaults to clients/python/wazoo/_proto, where the generated files are checked in; run
# it after every change of the proto files. Needs grpcio-tools 1.66.1 (.ci/setup installs it;
# `pip install './clients/python[stubs]'` too).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
proto_dir="$(cd "$here/../../host/proto" && pwd)"
out="${1:-$here/wazoo/_proto}"
mkdir -p "$out"
cd "$proto_dir"
python3 -m grpc_tools.protoc -I . --python_out="$out" --grpc_python_out="$out" wazoo.proto
# protoc writes `import wazoo_pb2`, which only works with the stubs' directory on sys.path.
sed -i 's/^import wazoo_pb2 as wazoo__pb2$/from . import wazoo_pb2 as wazoo__pb2/' "$out/wazoo_pb2_grpc.py"
grep -q '^from \. import wazoo_pb2 as wazoo__pb2$' "$out/wazoo_pb2_grpc.py" ||
  { echo "gen_stubs.sh: the import of wazoo_pb2 in wazoo_pb2_grpc.py was not found to make relative" >&2; exit 1; }
