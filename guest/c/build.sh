#!/usr/bin/env bash
# Builds the C recipes into components: the barrier (world wazoo:recipes/barrier-recipe@0.1.2)
# and the lock (world wazoo:recipes/lock-recipe@0.1.2).
#
#   guest/c/build.sh                  every recipe: <repo>/plugins/barrier-c.wasm and lock-c.wasm
#   guest/c/build.sh RECIPE [OUT]     one recipe, `barrier` or `lock` (OUT defaults to
#                                     <repo>/plugins/RECIPE-c.wasm)
#   guest/c/build.sh OUT              the barrier, into OUT
#
# Needs Debian's clang, lld and wasi-libc (bash .ci/setup installs them) and the wazoo binary
# (${WAZOO:-target/release/wazoo}, from the repository root): it writes the world's C bindings
# into a directory of its own under target/c/, compiles a WASI reactor module and turns it into a component with
# `wazoo componentize`, which also runs the checks a plugin must pass. Works offline.
set -euo pipefail

cd "$(dirname "$0")/../.."
root="$PWD"
wazoo="${WAZOO:-target/release/wazoo}"

if ! command -v clang >/dev/null 2>&1; then
    echo "build.sh: clang is missing: install Debian's clang lld wasi-libc libclang-rt-14-dev-wasm32 (bash .ci/setup)" >&2
    exit 1
fi
if [ ! -x "$wazoo" ] && ! command -v "$wazoo" >/dev/null 2>&1; then
    echo "build.sh: $wazoo is missing: cargo build --release -p wazoo-cli (or set WAZOO)" >&2
    exit 1
fi

# Builds recipe $1 (guest/c/$1/$1.c, world $1-recipe) into $2.
build_one() {
    local recipe="$1" out="$2"
    local world="$recipe-recipe"
    case "$out" in /*) ;; *) out="$root/$out" ;; esac
    mkdir -p target/c "$(dirname "$out")"
    # A directory per build: builds running at once never share their files.
    local build tmp
    build="$(mktemp -d "target/c/$recipe.XXXXXX")"
    tmp="$(mktemp "$out.XXXXXX.tmp")"
    trap 'rm -rf "$build" "$tmp"' EXIT
    "$wazoo" new bindings --world "$world" --dir "$build" >/dev/null

    local cc=(clang --target=wasm32-wasi -Os -Wall -Wextra -I "$build" -I guest/c)
    # The project's own files must compile without a warning; the generated bindings need not.
    "${cc[@]}" -Werror -c guest/c/wazoo_guest.c -o "$build/wazoo_guest.o"
    "${cc[@]}" -Werror -c "guest/c/$recipe/$recipe.c" -o "$build/$recipe.o"
    "${cc[@]}" -c "$build/recipe.c" -o "$build/recipe.o"
    "${cc[@]}" -mexec-model=reactor -o "$build/$recipe.core.wasm" \
        "$build/$recipe.o" "$build/wazoo_guest.o" "$build/recipe.o" "$build/recipe_component_type.o"

    # Write beside OUT, then rename: a host watching the plugins directory never sees half a file.
    "$wazoo" componentize "$build/$recipe.core.wasm" --world "$world" -o "$tmp" >/dev/null
    chmod 644 "$tmp"
    mv -f "$tmp" "$out"
    rm -rf "$build"
    trap - EXIT
    echo "built $out ($(stat -c %s "$out") bytes)"
}

recipes=(barrier lock)
case "${1:-}" in
    "")
        for recipe in "${recipes[@]}"; do
            build_one "$recipe" "$root/plugins/$recipe-c.wasm"
        done
        ;;
    barrier | lock)
        build_one "$1" "${2:-$root/plugins/$1-c.wasm}"
        ;;
    *)
        if [ $# -gt 1 ]; then
            echo "build.sh: no C recipe $1 (there are: ${recipes[*]})" >&2
            exit 2
        fi
        build_one barrier "$1"
        ;;
esac
