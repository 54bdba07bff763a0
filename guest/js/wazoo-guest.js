// The guest side of wazoo for JavaScript recipes: the JS counterpart of guest/rust (Rust).
//
// It wraps the `wazoo:zk` imports that componentize-js generates in the helpers every ZooKeeper
// recipe needs and that are easy to get subtly wrong: typed errors, sorting sequential children
// the way Curator does, contending for a turn by watching only the predecessor, deadlines, and
// deleting through connection loss.
//
// The subtlest steps are the host's, once for every language (`wazoo:zk@0.1.5`): the protected
// create that finds its node again after a lost reply (`createProtected`), the whole contention
// for a turn with its hand-over (`contend`), waiting until a node changes or the session ends
// (`waitForChange`, `watcher.changed`) or until one of several watches fires (`waitAny`), the
// ownership check (`owns`), trying reads again through connection loss (every read the host
// lends), several requests in one round trip (`pipeline`), and a claim's release that does not
// wait for ZooKeeper's answer, its outcome settled by the host (`deleteUnwaited`, `releaseNode`).
// The helpers here are thin names for those.
//
// How WIT maps to JavaScript here (componentize-js 0.23 / jco conventions):
// - `result<T, zk-error>` from an import returns T or throws; the wrappers below throw a
//   `ZkError`. An export that throws a `ZkError` returns its `err` (the glue reads the error's own
//   `payload` property); see `exportRecipe`.
// - `option<T>` is T or `undefined`; `s64`/`u64` are BigInt (`u64` arguments also accept a
//   whole Number); `list<u8>` is a Uint8Array; tuples are arrays; enums are their kebab-case
//   names as strings; variants are `{ tag, val }`.
// - Resources (the `watcher`) are released with `[Symbol.dispose]()`; the glue's
//   FinalizationRegistry does not drop a watcher once `wait` was called on it, so `dispose` here
//   is called explicitly (`finally`) wherever a watcher goes out of use.
// - A blocking host call blocks the whole guest (the host awaits ZooKeeper meanwhile). Waiting
//   without a host call (the back-off between retries) uses `setTimeout`, so helpers that may
//   back off are `async`; exports may be async functions: componentize-js runs the event loop
//   until their promise settles.

import {
  create as zkCreate,
  createProtected as zkCreateProtected,
  delete as zkDelete,
  deleteUnwaited as zkDeleteUnwaited,
  exists as zkExists,
  getData as zkGetData,
  getChildren as zkGetChildren,
  setData as zkSetData,
  multi as zkMulti,
  sync as zkSync,
  listEphemerals as zkListEphemerals,
  checkPath as zkCheckPath,
  pipeline as zkPipeline,
} from 'wazoo:zk/znode@0.1.5';
import {
  existsWatch as zkExistsWatch,
  getDataWatch as zkGetDataWatch,
  getChildrenWatch as zkGetChildrenWatch,
  waitForChange as zkWaitForChange,
  waitAny as zkWaitAny,
} from 'wazoo:zk/watch@0.1.5';
import { info as zkInfo, uniqueId as zkUniqueId, owns as zkOwns } from 'wazoo:zk/session@0.1.5';
import { contend as zkContend } from 'wazoo:zk/contention@0.1.5';

// ---------------------------------------------------------------------------------------------
// Errors

/**
 * The WIT `zk-error` variant as a JavaScript error. `tag` is the case name (`'no-node'`,
 * `'connection-loss'`, `'invalid-argument'`…) and `detail` the text of the cases that carry one.
 * Throwing it from an export returns `err(payload)` to the host.
 */
export class ZkError extends Error {
  constructor(tag, detail) {
    super(detail === undefined ? tag : `${tag}: ${detail}`);
    this.name = 'ZkError';
    this.tag = tag;
    this.detail = detail;
    // componentize-js turns a thrown value with an own `payload` into the result's err.
    Object.defineProperty(this, 'payload', {
      value: detail === undefined ? { tag } : { tag, val: detail },
      enumerable: false,
    });
  }

  /** Whether this is the `tag` case. */
  is(tag) {
    return this.tag === tag;
  }

  /**
   * Any caught value as a ZkError: an import's error (a ComponentError whose payload is the
   * `zk-error` variant, or a `multi-error` record), a ZkError, or anything else as `other`. From
   * a `multi-error`, `index` is the failing op's position (undefined when the request failed).
   */
  static from(e) {
    if (e instanceof ZkError) return e;
    if (e !== null && typeof e === 'object' && Object.prototype.hasOwnProperty.call(e, 'payload')) {
      let p = e.payload;
      let index;
      if (p && typeof p === 'object' && 'error' in p && !('tag' in p)) {
        index = p.index;
        p = p.error;
      }
      if (p && typeof p === 'object' && typeof p.tag === 'string') {
        const err = new ZkError(p.tag, p.val);
        if (index !== undefined && index !== null) err.index = Number(index);
        return err;
      }
    }
    return new ZkError('other', e instanceof Error ? `${e.name}: ${e.message}` : String(e));
  }

  static noNode() { return new ZkError('no-node'); }
  static nodeExists() { return new ZkError('node-exists'); }
  static timeout() { return new ZkError('timeout'); }
  static sessionExpired() { return new ZkError('session-expired'); }
  static invalidArgument(why) { return new ZkError('invalid-argument', why); }
  static other(why) { return new ZkError('other', why); }
}

/** True if `e` is a ZkError of one of `tags`. */
export function isZk(e, ...tags) {
  return e instanceof ZkError && tags.includes(e.tag);
}

function wrap(fn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (e) {
      throw ZkError.from(e);
    }
  };
}

// ---------------------------------------------------------------------------------------------
// The primitives, throwing ZkError

/** The WIT `create-mode` variant's cases without payload. */
export const CreateMode = Object.freeze({
  Persistent: Object.freeze({ tag: 'persistent' }),
  PersistentSequential: Object.freeze({ tag: 'persistent-sequential' }),
  Ephemeral: Object.freeze({ tag: 'ephemeral' }),
  EphemeralSequential: Object.freeze({ tag: 'ephemeral-sequential' }),
  Container: Object.freeze({ tag: 'container' }),
  persistentTtl: (ms) => ({ tag: 'persistent-ttl', val: BigInt(ms) }),
  persistentSequentialTtl: (ms) => ({ tag: 'persistent-sequential-ttl', val: BigInt(ms) }),
});

const encoder = new TextEncoder();
const decoder = new TextDecoder(); // replaces invalid UTF-8, like Rust's from_utf8_lossy

/** A string as UTF-8 bytes (Uint8Arrays pass through). */
export function bytes(data) {
  return typeof data === 'string' ? encoder.encode(data) : data;
}

/** UTF-8 bytes as a string, invalid sequences replaced. */
export function text(data) {
  return decoder.decode(data);
}

/** `create(path, data, mode)` → `{ path, stat }`. `data` may be a string. */
export const create = wrap((path, data, mode) => zkCreate(path, bytes(data), mode));
/**
 * `createProtected(dir, name, data, mode)` → `{ path, stat }`: the host's protected create of
 * `<dir>/_c_<uuid>-<name>` (sequential modes append the sequence). After a lost reply the host
 * finds the node again by its unique prefix (for ephemeral modes only one this session owns);
 * missing parents become containers. `data` may be a string.
 */
export const createProtected = wrap((dir, name, data, mode) => zkCreateProtected(dir, name, bytes(data), mode));
/** `deleteNode(path, version?)` (`delete` is a reserved word). */
export const deleteNode = wrap((path, version) => zkDelete(path, version));
/**
 * `deleteUnwaited(path)`: the host's `delete-unwaited` (`wazoo:zk@0.1.5`), a claim's release that
 * does not wait for ZooKeeper's answer; `releaseNode` is the one a recipe wants.
 *
 * Deletes an ephemeral node this handle created (a lock's, a lease's). The delete is sent before
 * the call returns, and while the connection holds every request this session sends afterwards
 * (the next acquire, any call of any handle on this host) is applied after it; other sessions see
 * the node go when the server applies it, which may be a moment after the call returns. The host
 * settles the outcome itself: if the reply is lost, it looks at the node again once the
 * connection is back and deletes it if it is still the one this handle created (its czxid), for
 * as long as the session lasts; a session that ends first takes the node with it. So returning
 * means the delete was sent, not that it was applied yet. A node the host's ledger does not hold
 * (one this handle did not create, one already deleted, one whose create's reply was lost), or a
 * call made while the session is not connected, is deleted as `deleteNode(path)` deletes it,
 * waiting for the answer and throwing its errors (`no-node` when it is gone, `connection-loss`
 * when the outcome is unknown, `session-expired`). `invalid-path` and `limit-exceeded` are
 * thrown before anything is sent.
 */
export const deleteUnwaited = wrap((path) => zkDeleteUnwaited(path));
/** `exists(path)` → stat or undefined. */
export const exists = wrap(zkExists);
/** `getData(path)` → `[data, stat]`. */
export const getData = wrap(zkGetData);
/** `getChildren(path)` → `[names, stat]`. */
export const getChildren = wrap(zkGetChildren);
/** `setData(path, data, version?)` → stat. */
export const setData = wrap((path, data, version) => zkSetData(path, bytes(data), version));
/** `multi(ops)` → op results; throws a ZkError of the failing op's error, `index` its position. */
export const multi = wrap(zkMulti);
export const sync = wrap(zkSync);
export const listEphemerals = wrap(zkListEphemerals);
/** Throws `invalid-path` unless the host accepts `path`. */
export const checkPath = wrap(zkCheckPath);
/** `existsWatch(path)` → `[stat | undefined, watcher]`. */
export const existsWatch = wrap(zkExistsWatch);
/** `getDataWatch(path)` → `[data, stat, watcher]`; `no-node` (and no watch) when absent. */
export const getDataWatch = wrap(zkGetDataWatch);
/** `getChildrenWatch(path)` → `[names, stat, watcher]`. */
export const getChildrenWatch = wrap(zkGetChildrenWatch);
/**
 * `owns(path, data?)` → whether `path` exists and is this session's ephemeral node (holding
 * exactly `data`, a string or bytes, when given: handles on one host share a session).
 */
export const owns = wrap((path, data) => zkOwns(path, data === undefined ? undefined : bytes(data)));
/**
 * The requests of a `pipeline` (the WIT `step` cases, `{ tag, val }`), each what the function of
 * the same name does. `data` may be a string.
 */
export const Step = Object.freeze({
  create: (path, data, mode) => ({ tag: 'create', val: { path, data: bytes(data), mode } }),
  createProtected: (dir, name, data, mode) => ({
    tag: 'create-protected',
    val: { dir, name, data: bytes(data), mode },
  }),
  deleteNode: (path, version) => ({ tag: 'delete', val: { path, version } }),
  setData: (path, data, version) => ({ tag: 'set-data', val: { path, data: bytes(data), version } }),
  exists: (path) => ({ tag: 'exists', val: path }),
  getData: (path) => ({ tag: 'get-data', val: path }),
  getChildren: (path) => ({ tag: 'get-children', val: path }),
});

const zkPipelineWrapped = wrap(zkPipeline);

/**
 * `pipeline(steps)` (built with `Step`): sends every step at once and returns their results in
 * order, for the price of one round trip. Each entry is the step's `step-result` (`{ tag, val }`:
 * `created`, `deleted`, `data-set`, `exists`, `data`, `children`, `val` as its function returns
 * it), or the `ZkError` it failed with (returned, not thrown: a failed step does not stop the
 * ones after it). Not atomic, unlike `multi`; each step sees what the steps before it did.
 * Throws only when the whole call fails (more than 64 steps: `limit-exceeded`).
 */
export function pipeline(steps) {
  const results = zkPipelineWrapped(steps);
  return results.map((r) => (r.tag === 'ok' ? r.val : ZkError.from({ payload: r.val })));
}

/** `{ id, timeoutMs, generation }` of the session this handle runs on. */
export const sessionInfo = zkInfo;
/** A random version-4 UUID from the host. */
export const uniqueId = zkUniqueId;

const disposeSymbol = Symbol.dispose || Symbol.for('dispose');

const disposed = new WeakSet();

/**
 * Drops a watcher now (the host forgets it). Safe on undefined and twice: the glue's own
 * dispose would pass a cleared handle to the host on a second call, which traps.
 */
export function dispose(watcher) {
  if (!watcher || disposed.has(watcher) || typeof watcher[disposeSymbol] !== 'function') return;
  disposed.add(watcher);
  watcher[disposeSymbol]();
}

/**
 * Blocks until `watcher` fires (`{ kind, path }`), or `timeoutMs` (a Number or undefined for no
 * limit) passes (`timeout`; the watch stays armed).
 */
export function waitWatcher(watcher, timeoutMs) {
  try {
    return watcher.wait(timeoutMs);
  } catch (e) {
    throw ZkError.from(e);
  }
}

/**
 * As `waitWatcher`, but the session's end is the error `session-expired` (the host's
 * `watcher.changed`): the event returned is always a change to the node.
 */
export function watcherChanged(watcher, timeoutMs) {
  try {
    return watcher.changed(timeoutMs);
  } catch (e) {
    throw ZkError.from(e);
  }
}

/**
 * Blocks until one of `watchers` fires, and returns its index in the list (the first that fired
 * already, if any); throws `session-expired` if the session ended, `timeout` once the deadline
 * passes: the host's `wait-any`. Every watcher stays armed (dispose them as usual); the one that
 * fired keeps its event.
 */
export function waitAny(watchers, deadline) {
  try {
    const [index] = zkWaitAny(watchers, deadline.remainingMs());
    return index;
  } catch (e) {
    throw ZkError.from(e);
  }
}

// ---------------------------------------------------------------------------------------------
// Session, ids, paths

/**
 * How many times a write that failed with `connection-loss` is tried again before giving up
 * (reads are tried again by the host).
 */
export const CONNECTION_LOSS_RETRIES = 20;

let knownSessionId;

/** This handle's session id (BigInt, the `ephemeralOwner` of its nodes); asked once. */
export function sessionId() {
  if (knownSessionId === undefined) knownSessionId = sessionInfo().id;
  return knownSessionId;
}

let instance;

/** An id unique to this recipe instance (handles on one host share a session). */
export function instanceId() {
  if (instance === undefined) instance = newGuid();
  return instance;
}

const U64 = (1n << 64n) - 1n;
let guidState; // [hi, lo] as BigInt, seeded from the host's unique-id on first use

function splitmix(i) {
  guidState[i] = (guidState[i] + 0x9e3779b97f4a7c15n) & U64;
  let z = guidState[i];
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & U64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & U64;
  return z ^ (z >> 31n);
}

const hex = (v, width) => v.toString(16).padStart(width, '0');

/**
 * A fresh version-4 UUID, for a protected create a recipe makes itself (inside a `multi`;
 * `protectedCreate` has the host pick its own). The host's `unique-id` seeds a SplitMix64
 * generator once per instance (the same scheme as the Rust guest); later ids cost no host call.
 */
export function newGuid() {
  if (guidState === undefined) {
    const seed = uniqueId().replace(/[^0-9a-fA-F]/g, '');
    let bits = 0n;
    try {
      bits = seed ? BigInt('0x' + seed) : 0n;
    } catch (_) {
      bits = 0n;
    }
    bits &= (1n << 128n) - 1n;
    guidState = [bits >> 64n, bits & U64];
  }
  const a = splitmix(0);
  const b = splitmix(1);
  return (
    `${hex(a >> 32n, 8)}-${hex((a >> 16n) & 0xffffn, 4)}-4${hex(a & 0xfffn, 3)}-` +
    `${hex(0x8000n | ((b >> 48n) & 0x3fffn), 4)}-${hex(b & 0xffffffffffffn, 12)}`
  );
}

/** `dir` + "/" + `name`. */
export function join(dir, name) {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

/** The last component of `path`. */
export function nodeName(path) {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** The parent of `path` ("/" for a top-level node). */
export function parent(path) {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

/**
 * Ordering of sequential children, as Curator's lock drivers do it: by the part after the last
 * occurrence of each marker in turn (e.g. `latch-`), or the whole name when it has none.
 */
export function sortKey(name, markers) {
  return markers.reduce((key, marker) => {
    const i = key.lastIndexOf(marker);
    return i < 0 ? key : key.slice(i + marker.length);
  }, name);
}

/** `children` sorted by `sortKey` (stable, by code unit: byte order for ASCII names). */
export function sorted(children, markers) {
  const keyed = children.map((name) => [sortKey(name, markers), name]);
  keyed.sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
  return keyed.map(([, name]) => name);
}

// ---------------------------------------------------------------------------------------------
// Time

const now = () => performance.now(); // monotonic

/** A point in time a blocking step must finish by; `never()` does not expire. */
export class Deadline {
  constructor(at) {
    this.at = at; // ms on the monotonic clock, or undefined
  }

  /** From a WIT `option<u64>` timeout (BigInt, Number or undefined). */
  static afterMs(timeoutMs) {
    if (timeoutMs === undefined || timeoutMs === null) return new Deadline(undefined);
    const ms = Number(timeoutMs);
    // Beyond ~285 000 years it is no limit at all.
    return new Deadline(ms > 9e15 ? undefined : now() + ms);
  }

  static never() {
    return new Deadline(undefined);
  }

  /** Whole milliseconds left (a Number, 0 once passed), or undefined for no limit. */
  remainingMs() {
    if (this.at === undefined) return undefined;
    return Math.max(0, Math.floor(this.at - now()));
  }

  expired() {
    return this.remainingMs() === 0;
  }
}

/** Resolves after `ms` milliseconds (no host call; needs the engine's clocks feature). */
export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function backoff(attempt) {
  return sleep(50 * Math.min(attempt, 10));
}

// ---------------------------------------------------------------------------------------------
// Recipe building blocks

/**
 * Runs `op` again while it fails with `connection-loss`: for writes whose repeat is harmless (a
 * delete, an unconditional write, a step that looks before it writes). Reads need none: the host
 * tries them again itself.
 */
export async function retrying(op) {
  let attempt = 0;
  for (;;) {
    try {
      return await op();
    } catch (e) {
      const err = ZkError.from(e);
      if (err.is('connection-loss') && attempt < CONNECTION_LOSS_RETRIES) {
        attempt += 1;
        await backoff(attempt);
        continue;
      }
      throw err;
    }
  }
}

/**
 * Creates every missing ancestor of `path` as a container node, as Curator's
 * `creatingParentContainersIfNeeded` does: the server removes them once they are empty.
 */
export async function ensureParents(path) {
  let at = 0;
  for (;;) {
    const i = path.indexOf('/', at + 1);
    if (i < 0) return;
    const ancestor = path.slice(0, i);
    try {
      await retrying(() => create(ancestor, new Uint8Array(), CreateMode.Container));
    } catch (e) {
      if (!isZk(e, 'node-exists')) throw e;
    }
    at = i;
  }
}

/**
 * Creates `<dir>/_c_<uuid>-<name>` (sequential modes append the sequence), Curator's protected
 * mode: the host's `createProtected`, which finds the node again after a lost reply (for
 * ephemeral modes only one this session owns) and makes missing parents as containers.
 * Returns `{ path, stat }`.
 */
export function protectedCreate(dir, name, data, mode) {
  return createProtected(dir, name, data, mode);
}

/**
 * Blocks until `path` is deleted or changes (then the caller looks again; at once if it is gone
 * already), the session ends (`session-expired`), or the deadline passes (`timeout`): the host's
 * `waitForChange`.
 */
export function waitForChange(path, deadline) {
  try {
    zkWaitForChange(path, deadline.remainingMs());
  } catch (e) {
    throw ZkError.from(e);
  }
}

/**
 * Waits until the node at `path` changes: true when it was deleted (or was already gone), false
 * for any other change. The session's end is `session-expired`; the deadline passing is
 * `timeout`. A data watch, as Curator's, so an absent node leaves no watch behind.
 */
export function waitGone(path, deadline) {
  if (deadline.expired()) throw ZkError.timeout();
  let watcher;
  try {
    [, , watcher] = getDataWatch(path);
  } catch (e) {
    if (isZk(e, 'no-node')) return true;
    throw e;
  }
  try {
    return watcherChanged(watcher, deadline.remainingMs()).kind === 'node-deleted';
  } finally {
    dispose(watcher);
  }
}

/**
 * Blocks until `watcher` fires (`session-expired` if the session ended), or the deadline passes
 * (`timeout`). Does not dispose the watcher.
 */
export function waitOn(watcher, deadline) {
  if (deadline.expired()) throw ZkError.timeout();
  watcherChanged(watcher, deadline.remainingMs());
}

/**
 * Deletes `path`, trying again through connection loss. A node already gone (or gone with an
 * expired session) counts as deleted.
 */
export async function deleteRetrying(path) {
  try {
    await retrying(() => deleteNode(path, undefined));
  } catch (e) {
    if (!isZk(e, 'no-node', 'session-expired')) throw e;
  }
}

/**
 * Releases our claim node `path` (a lock's, a lease's, a leadership's) without waiting for
 * ZooKeeper's answer: `deleteUnwaited` through connection loss (which only a waited delete can
 * answer). A node already gone (or gone with an expired session) counts as released, as in
 * guest/rust's `release_node`. The host settles a lost reply; a node its ledger does not hold is
 * deleted the waited way, as `deleteRetrying` deletes it.
 */
export async function releaseNode(path) {
  try {
    await retrying(() => deleteUnwaited(path));
  } catch (e) {
    if (!isZk(e, 'no-node', 'session-expired')) throw e;
  }
}

/**
 * Steps 1 and 2 of a contention in one round trip (`pipeline`): the protected create of `name`
 * under `dir`, and the listing of `dir` that follows it. Returns `[created, children]`;
 * `children` is undefined if the listing failed (the caller lists again), and always shows the
 * node when given.
 */
export function createAndList(dir, name, data, mode) {
  const steps = [Step.createProtected(dir, name, data, mode), Step.getChildren(dir)];
  const [first, second] = pipeline(steps);
  if (first instanceof ZkError) throw first;
  if (first === undefined || first.tag !== 'created') {
    const answer = first === undefined ? 'nothing' : first.tag;
    throw ZkError.other(`pipeline answered ${answer} for a create`);
  }
  const listed = second !== undefined && !(second instanceof ZkError) && second.tag === 'children';
  return [first.val, listed ? second.val[0] : undefined];
}

/**
 * The whole contention for a turn, the host's `contend`: creates our ephemeral sequential node
 * `_c_<uuid>-<name><seq>` (holding `data`) under `dir` and lists `dir` in one round trip
 * (protected: after a lost reply the host claims only a node this session owns), waits while
 * `rule` (`exclusive(markers)`, `firstContaining(markers, kinds)`) says a node ahead keeps ours
 * waiting, holding without listing again when the node it waited for was the lowest and is
 * deleted (the hand-over), and deletes the node again if we give up (`timeout`) or fail. Returns
 * `{ path, stat }` of our node.
 */
export async function contend(dir, name, data, rule, deadline) {
  try {
    return zkContend(dir, { tag: 'protected', val: name }, bytes(data), rule, deadline.remainingMs());
  } catch (e) {
    throw ZkError.from(e);
  }
}

/**
 * The exclusive lock's rule over children ordered by `markers` (Curator's `['lock-']`): ours
 * holds when it is the first, and otherwise watches the node just before it.
 */
export function exclusive(markers) {
  return { order: [...markers], blockers: { tag: 'any' }, pick: 'nearest' };
}

/**
 * Curator's reader's rule over children ordered by `markers`: ours holds when no node whose name
 * contains one of `kinds` (`__WRIT__`) is ahead of it, and otherwise watches the first such node.
 */
export function firstContaining(markers, kinds) {
  return { order: [...markers], blockers: { tag: 'containing', val: [...kinds] }, pick: 'first' };
}

/** A blocking acquire run with a zero timeout, as a try: `timeout` becomes undefined. */
export async function tryNow(acquiring) {
  try {
    return await acquiring;
  } catch (e) {
    if (isZk(e, 'timeout')) return undefined;
    throw e;
  }
}

/**
 * Wraps a recipe's exported interface object: every function's failure reaches the host as a
 * `zk-error` (a ZkError as itself, anything else, e.g. a bug, as `other`) instead of trapping.
 */
export function exportRecipe(iface) {
  const wrapped = {};
  for (const [name, fn] of Object.entries(iface)) {
    wrapped[name] = async (...args) => {
      try {
        return await fn(...args);
      } catch (e) {
        throw ZkError.from(e);
      }
    };
  }
  return wrapped;
}
