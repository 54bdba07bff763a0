// {{name}}: a custom wazoo recipe in JavaScript. `wazoo run {{name}} PATH [--timeout-ms N]` waits
// until the znode PATH exists and prints its data.
//
// Every `wazoo:zk` call blocks this guest while the host awaits ZooKeeper, so a recipe reads as
// straight-line code. `wazoo-guest.js` (beside this file) gives the calls typed errors
// (`ZkError` with a `tag`: 'no-node', 'timeout', ...) and the helpers recipes share.

import { ZkError, isZk, checkPath, existsWatch, getData, waitWatcher, dispose, text } from './wazoo-guest.js';

/** The world's export: ok text goes to stdout, error text to stderr. */
export function run(args) {
  let path, timeoutMs;
  try {
    ({ path, timeoutMs } = parse(args));
  } catch (e) {
    throw fail(e.message);
  }
  try {
    return waitFor(path, timeoutMs);
  } catch (e) {
    const err = ZkError.from(e);
    throw fail(isZk(err, 'timeout') ? `${path}: still absent when the timeout passed` : `${path}: ${err.message}`);
  }
}

function waitFor(path, timeoutMs) {
  checkPath(path);
  for (;;) {
    // Read and arm a watch in one call: a creation between the two cannot be missed.
    const [stat, watcher] = existsWatch(path);
    try {
      if (stat !== undefined) {
        try {
          const [data] = getData(path);
          return text(data);
        } catch (e) {
          if (isZk(e, 'no-node')) continue; // deleted again in between: wait for the next creation
          throw e;
        }
      }
      const event = waitWatcher(watcher, timeoutMs);
      if (event.kind === 'session-expired' || event.kind === 'session-closed') {
        throw ZkError.sessionExpired();
      }
    } finally {
      dispose(watcher);
    }
  }
}

function parse(args) {
  let path;
  let timeoutMs;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--timeout-ms') {
      timeoutMs = Number(args[++i]);
      if (!Number.isInteger(timeoutMs) || timeoutMs < 0) throw new Error('--timeout-ms needs a number');
    } else if (path === undefined) {
      path = args[i];
    } else {
      throw new Error(`unexpected argument ${JSON.stringify(args[i])}`);
    }
  }
  if (path === undefined) throw new Error('usage: {{name}} PATH [--timeout-ms N]');
  return { path, timeoutMs };
}

/** What the world's `result<string, string>` error becomes: the thrown value's `payload`. */
function fail(message) {
  const e = new Error(message);
  Object.defineProperty(e, 'payload', { value: message, enumerable: false });
  return e;
}
