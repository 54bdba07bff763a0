#!/usr/bin/env bash
# Builds {{name}}.wasm, a component for world wazoo:recipes/custom@0.1.2, with Debian's clang and
# wasi-libc (apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32): the world's C bindings are written into
# bindings/ by `wazoo new bindings`, recipe.c and wazoo_guest.c are compiled into a WASI reactor
# module, and `wazoo componentize` makes it a component (checked as a plugin is). No other
# toolchain. WAZOO names the wazoo binary (default: wazoo on PATH).
set -euo pipefail
cd "$(dirname "$0")"
# The recipe world: change it (and the exports in recipe.c) to implement a standard family.
WORLD=custom
wazoo="${WAZOO:-wazoo}"
if ! command -v clang >/dev/null 2>&1; then
    echo "build.sh: clang is missing: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
    exit 1
fi
if ! command -v "$wazoo" >/dev/null 2>&1; then
    echo "build.sh: $wazoo is missing: put the wazoo binary on PATH (cargo install --path host/cli) or set WAZOO" >&2
    exit 1
fi
"$wazoo" new bindings --world "$WORLD" --dir bindings >/dev/null
mkdir -p build
clang --target=wasm32-wasi -mexec-model=reactor -Os -Wall -Wextra -I bindings -I . \
    -o "build/{{name}}.core.wasm" recipe.c wazoo_guest.c bindings/recipe.c bindings/recipe_component_type.o
"$wazoo" componentize "build/{{name}}.core.wasm" --world "$WORLD" -o "{{name}}.wasm" >/dev/null
echo "built {{name}}.wasm: copy it into the host's plugins directory, then: wazoo run {{name}} /some/path"
