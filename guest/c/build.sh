#!/usr/bin/env bash
# Builds the C barrier recipe into a component for world wazoo:recipes/barrier-recipe@0.1.2.
#
#   guest/c/build.sh [OUT]      (OUT defaults to <repo>/plugins/barrier-c.wasm)
#
# Needs Debian's clang, lld and wasi-libc (bash .ci/setup installs them) and the wazoo binary
# (${WAZOO:-target/release/wazoo}, from the repository root): it writes the world's C bindings
# into a directory of its own under target/c/, compiles a WASI reactor module and turns it into a component with
# `wazoo componentize`, which also runs the checks a plugin must pass. Works offline.
set -euo pipefail

cd "$(dirname "$0")/../.."
root="$PWD"
world="barrier-recipe"
wazoo="${WAZOO:-target/release/wazoo}"

out="${1:-$root/plugins/barrier-c.wasm}"
case "$out" in /*) ;; *) out="$root/$out" ;; esac

if ! command -v clang >/dev/null 2>&1; then
    echo "build.sh: clang is missing: install Debian's clang lld wasi-libc libclang-rt-14-dev-wasm32 (bash .ci/setup)" >&2
    exit 1
fi
if [ ! -x "$wazoo" ] && ! command -v "$wazoo" >/dev/null 2>&1; then
    echo "build.sh: $wazoo is missing: cargo build --release -p wazoo-cli (or set WAZOO)" >&2
    exit 1
fi

mkdir -p target/c "$(dirname "$out")"
# A directory per build: builds running at once never share their files.
build="$(mktemp -d target/c/barrier.XXXXXX)"
tmp="$(mktemp "$out.XXXXXX.tmp")"
trap 'rm -rf "$build" "$tmp"' EXIT
"$wazoo" new bindings --world "$world" --dir "$build" >/dev/null

cc=(clang --target=wasm32-wasi -Os -Wall -Wextra -I "$build" -I guest/c)
# The project's own files must compile without a warning; the generated bindings need not.
"${cc[@]}" -Werror -c guest/c/wazoo_guest.c -o "$build/wazoo_guest.o"
"${cc[@]}" -Werror -c guest/c/barrier/barrier.c -o "$build/barrier.o"
"${cc[@]}" -c "$build/recipe.c" -o "$build/recipe.o"
"${cc[@]}" -mexec-model=reactor -o "$build/barrier.core.wasm" \
    "$build/barrier.o" "$build/wazoo_guest.o" "$build/recipe.o" "$build/recipe_component_type.o"

# Write beside OUT, then rename: a host watching the plugins directory never sees half a file.
"$wazoo" componentize "$build/barrier.core.wasm" --world "$world" -o "$tmp" >/dev/null
chmod 644 "$tmp"
mv -f "$tmp" "$out"
echo "built $out ($(stat -c %s "$out") bytes)"
