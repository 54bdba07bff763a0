#!/usr/bin/env bash
# Builds {{name}}.wasm, a component for world wazoo:recipes/custom@0.1.2, with componentize-py
# 0.25 (python3 -m pip install 'componentize-py==0.25.1'). No cargo-component.
set -euo pipefail
cd "$(dirname "$0")"
# An empty site-packages: componentize-py bundles only app.py and wazoo_guest/.
mkdir -p build/venv/lib/python3/site-packages
VIRTUAL_ENV="$PWD/build/venv" componentize-py -d wit -w wazoo:recipes/custom@0.1.2 \
    componentize -p . -o {{name}}.wasm app
echo "built {{name}}.wasm: copy it into the host's plugins directory, then: wazoo run {{name}} /some/path"
