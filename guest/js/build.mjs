// Builds the JavaScript recipes into components with componentize-js (its Node API; no jco):
//
//   node guest/js/build.mjs [OUT.wasm]
//
// from any directory. Without OUT it writes <repo>/plugins/election-js.wasm, where the host
// looks for `--recipe election-js`. Needs only `npm install` in guest/js (build.sh does it); runs
// offline after that.

import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile, rename, mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url)); // guest/js
const root = resolve(here, '..', '..');
const wit = resolve(root, 'wit');

/** Each recipe: its module (relative to guest/js), its world and its default output. */
const recipes = [
  {
    name: 'election-js',
    source: 'election/election.js',
    world: 'wazoo:recipes/election-recipe@0.1.2',
    // Curator's LeaderLatch format, as recipes/election.
    protocol: 'curator-leader-latch/1',
    out: resolve(root, 'plugins', 'election-js.wasm'),
  },
];

// The host links WASI p2 (cli, io, clocks, random, filesystem, sockets) but not wasi:http:
// without these two features the component imports no wasi:http. `clocks` stays (setTimeout for
// back-off, performance.now for deadlines), `random` and `stdio` too (console, error reports).
const disableFeatures = ['http', 'fetch-event'];

const args = process.argv.slice(2);
if (args.some((a) => a === '-h' || a === '--help') || args.length > 1) {
  console.error('usage: node guest/js/build.mjs [OUT.wasm]');
  process.exit(args.length > 1 ? 2 : 0);
}
const outOverride = args[0] === undefined ? undefined : resolve(process.cwd(), args[0]);

// componentize-js maps the current directory to `/` inside the engine while it snapshots the
// module graph, so relative imports (../wazoo-guest.js) resolve only from within guest/js.
process.chdir(here);

for (const recipe of recipes) {
  const out = outOverride ?? recipe.out;
  const started = Date.now();
  const { component } = await componentize({
    sourcePath: resolve(here, recipe.source),
    witPath: wit,
    worldName: recipe.world,
    disableFeatures,
  });
  await mkdir(dirname(out), { recursive: true });
  // Write beside and rename, so a watching host never loads a half-written file.
  const tmp = `${out}.tmp-${process.pid}`;
  await writeFile(tmp, recipe.protocol ? declareProtocol(component, recipe.protocol) : component);
  await rename(tmp, out);
  const secs = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`${recipe.name}: ${out} (${component.length} bytes, ${secs}s)`);
}

// The component with a top-level `wazoo-protocol` custom section naming the wire protocol it
// speaks (docs/src/recipes/index.md, "Declaring the wire protocol"): componentize-js has no way
// to emit one from the source, so it is appended to the finished component.
function declareProtocol(component, protocol) {
  const leb = (n) => {
    const out = [];
    do {
      let byte = n & 0x7f;
      n >>>= 7;
      if (n) byte |= 0x80;
      out.push(byte);
    } while (n);
    return out;
  };
  const name = Buffer.from('wazoo-protocol');
  const body = Buffer.concat([Buffer.from(leb(name.length)), name, Buffer.from(protocol)]);
  return Buffer.concat([Buffer.from(component), Buffer.from([0]), Buffer.from(leb(body.length)), body]);
}
