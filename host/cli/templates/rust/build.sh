#!/usr/bin/env bash
# Builds {{name}}.wasm, a component for world wazoo:recipes/custom@0.1.2.
# Needs the wasm32-wasip2 target (rustup target add wasm32-wasip2); no cargo-component.
set -euo pipefail
cd "$(dirname "$0")"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release --target wasm32-wasip2 --target-dir "$target"
cp "$target/wasm32-wasip2/release/$(echo '{{name}}' | tr - _).wasm" "{{name}}.wasm"
echo "built {{name}}.wasm: copy it into the host's plugins directory, then: wazoo run {{name}} /some/path"
