// Builds {{name}}.wasm, a component for world wazoo:recipes/custom@0.1.2, with componentize-js
// 0.23 (npm install, then node build.mjs). No jco, no cargo-component.
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
// componentize-js resolves the module's relative imports from the current directory.
process.chdir(here);
const { component } = await componentize({
  sourcePath: resolve(here, 'recipe.js'),
  witPath: resolve(here, 'wit'),
  worldName: 'wazoo:recipes/custom@0.1.2',
  // The host offers WASI p2 without wasi:http.
  disableFeatures: ['http', 'fetch-event'],
});
await writeFile(resolve(here, '{{name}}.wasm'), component);
console.log("built {{name}}.wasm: copy it into the host's plugins directory, then: wazoo run {{name}} /some/path");
