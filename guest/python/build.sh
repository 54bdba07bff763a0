#!/usr/bin/env bash
# Builds the Python semaphore recipe into a component for world
# wazoo:recipes/semaphore-recipe@0.1.2.
#
#   guest/python/build.sh [OUT]      (OUT defaults to <repo>/plugins/semaphore-py.wasm)
#
# Needs componentize-py 0.25 (python3 -m pip install 'componentize-py==0.25.1'); works offline
# once that is installed. No cargo-component, no committed bindings: componentize-py generates
# the `wit_world` bindings itself while it builds. Set WAZOO_PY_BINDINGS=1 to also write them to
# target/python/bindings for editors and type checkers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
world="wazoo:recipes/semaphore-recipe@0.1.2"
want="0.25."

out="${1:-$root/plugins/semaphore-py.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

if command -v componentize-py >/dev/null 2>&1; then
    cpy=(componentize-py)
elif python3 -c 'import componentize_py' >/dev/null 2>&1; then
    # Installed, but its console script is not on PATH: call its entry point.
    cpy=(python3 -c 'import sys; from componentize_py import script; sys.argv[0] = "componentize-py"; sys.exit(script())')
else
    echo "build.sh: componentize-py is not installed: python3 -m pip install 'componentize-py==0.25.1'" >&2
    exit 1
fi
version="$("${cpy[@]}" --version | awk '{print $2}')"
case "$version" in
    "$want"*) ;;
    *) echo "build.sh: warning: componentize-py $version found; this recipe is built and tested with 0.25.x" >&2 ;;
esac

# Stage exactly the recipe's Python sources, so nothing else under guest/python (or a stray
# __pycache__) is bundled, and no site-packages directory is searched: componentize-py scans
# $VIRTUAL_ENV (or the interpreter's site-packages) for dependencies, so point it at an empty one.
build="$root/target/python"
stage="$build/semaphore"
rm -rf "$stage" "$build/venv"
mkdir -p "$stage" "$build/venv/lib/python3/site-packages" "$(dirname "$out")"
cp -r "$here/wazoo_guest" "$stage/"
cp "$here/semaphore/app.py" "$stage/app.py"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +

if [ "${WAZOO_PY_BINDINGS:-0}" = 1 ]; then
    rm -rf "$build/bindings"
    "${cpy[@]}" -q -d "$root/wit" -w "$world" bindings "$build/bindings"
fi

# Write beside OUT, then rename: a host watching the plugins directory never sees half a file.
tmp="$(mktemp "$out.XXXXXX.tmp")"
trap 'rm -f "$tmp"' EXIT
(
    cd "$stage"
    VIRTUAL_ENV="$build/venv" "${cpy[@]}" -q -d "$root/wit" -w "$world" \
        componentize -p "$stage" -o "$tmp" app
)
# The wire protocol it speaks, in a top-level `wazoo-protocol` custom section
# (docs/src/recipes/index.md, "Declaring the wire protocol"): componentize-py cannot emit one
# from the source, so it is appended to the finished component.
python3 - "$tmp" curator-semaphore-v2/1 <<'PY'
import sys
path, protocol = sys.argv[1], sys.argv[2].encode()
def leb(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
name = b"wazoo-protocol"
body = leb(len(name)) + name + protocol
with open(path, "ab") as f:
    f.write(b"\x00" + leb(len(body)) + body)
PY
chmod 644 "$tmp"
mv -f "$tmp" "$out"
trap - EXIT
echo "built $out ($(stat -c %s "$out") bytes)"
