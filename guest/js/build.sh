#!/bin/sh
# Builds the JavaScript recipes (see build.mjs); installs componentize-js first if it is missing.
# Usage: guest/js/build.sh [OUT.wasm]   (from any directory)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/@bytecodealliance/componentize-js" ]; then
    # `npm install` at the versions package-lock.json pins, leaving the lock file as it is. Not
    # `npm ci`: it refuses a lock file without every other platform's optional binaries (the
    # registry reached here lacks some, e.g. @rolldown/binding-darwin-arm64).
    (cd "$here" && npm install --no-save --no-audit --no-fund)
fi
exec node "$here/build.mjs" "$@"
