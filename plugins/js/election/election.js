// Leader election, ZooKeeper "Recipes and Solutions" 1.7, in Curator's `LeaderLatch` wire format
// (`<path>/_c_<uuid>-latch-<seq>`, data = participant id), plus what etcd's election has and
// Curator lacks: observing the leader without contending, resigning, and the seed's
// acknowledgement that the leader procedure ran. A port of recipes/election (Rust): both contend
// correctly on the same election path.
//
// World `wazoo:recipes/election-recipe@0.1.0`; built by ../build.mjs.

import {
  ZkError,
  CreateMode,
  Deadline,
  isZk,
  checkPath,
  contend,
  exclusive,
  create,
  getData,
  setData,
  getChildren,
  getChildrenWatch,
  existsWatch,
  waitWatcher,
  dispose,
  retrying,
  deleteRetrying,
  waitForChange,
  sessionId,
  sorted,
  join,
  bytes,
  text,
  exportRecipe,
} from '../wazoo-guest.js';

/** Curator's latch name: the sequence follows it. */
const LATCH = 'latch-';

/** This instance's candidacy: `{ path, leadership: { node, token }, acknowledged }`, or null. */
let candidacy = null;

const ackPath = (path) => `${path}-leader-ack`;

async function campaign(path, id, timeoutMs) {
  if (candidacy !== null) {
    if (candidacy.path === path) return candidacy.leadership;
    throw ZkError.invalidArgument(`this handle already leads ${candidacy.path}`);
  }
  // 1. Create an ephemeral sequential proposal holding our id; 2. list the proposals; 3. if ours
  // is the lowest we lead; 4. otherwise watch only the next lower one and look again.
  const deadline = Deadline.afterMs(timeoutMs);
  const mine = await contend(path, LATCH, bytes(id), [LATCH], deadline, exclusive);
  const leadership = { node: mine.path, token: mine.stat.czxid };
  candidacy = { path, leadership, acknowledged: false };
  return leadership;
}

async function acknowledge(note) {
  if (candidacy === null) throw ZkError.invalidArgument('acknowledge: this handle does not lead');
  const ack = ackPath(candidacy.path);
  try {
    await retrying(() => create(ack, note, CreateMode.Ephemeral));
  } catch (e) {
    if (!isZk(e, 'node-exists')) throw e;
    // Ours from an earlier acknowledgement (ephemeral, so a stale one from another session
    // would be gone once that session is).
    const [, stat] = await retrying(() => getData(ack));
    if (stat.ephemeralOwner !== sessionId()) {
      throw ZkError.other("another session's acknowledgement is still there");
    }
    await retrying(() => setData(ack, note, undefined));
  }
  if (candidacy !== null) candidacy.acknowledged = true;
}

async function resign() {
  const mine = candidacy;
  if (mine === null) throw ZkError.invalidArgument('resign: this handle is not a candidate');
  candidacy = null;
  if (mine.acknowledged) await deleteRetrying(ackPath(mine.path));
  await deleteRetrying(mine.leadership.node);
}

async function leader(path) {
  checkPath(path);
  return currentLeader(path);
}

async function observe(path, known, timeoutMs) {
  checkPath(path);
  const deadline = Deadline.afterMs(timeoutMs);
  for (;;) {
    const now = await currentLeader(path);
    if ((now === undefined ? undefined : now.node) !== known) return now;
    if (deadline.expired()) throw ZkError.timeout();
    if (now !== undefined) {
      // The leader changes only when its node goes.
      waitForChange(now.node, deadline);
    } else {
      waitForCandidates(path, deadline);
    }
  }
}

/** The lowest proposal, its id, token and (if the same session wrote it) acknowledgement. */
async function currentLeader(path) {
  for (;;) {
    let children;
    try {
      [children] = await retrying(() => getChildren(path));
    } catch (e) {
      if (isZk(e, 'no-node')) return undefined;
      throw e;
    }
    const first = sorted(children.filter((c) => c.includes(LATCH)), [LATCH])[0];
    if (first === undefined) return undefined;
    const node = join(path, first);
    let data, stat;
    try {
      [data, stat] = await retrying(() => getData(node));
    } catch (e) {
      // It went between the listing and the read: look again.
      if (isZk(e, 'no-node')) continue;
      throw e;
    }
    let acknowledged;
    try {
      const [note, ack] = await retrying(() => getData(ackPath(path)));
      if (ack.ephemeralOwner === stat.ephemeralOwner) acknowledged = text(note);
    } catch (e) {
      if (!isZk(e, 'no-node')) throw e;
    }
    return { node, id: text(data), token: stat.czxid, acknowledged };
  }
}

/** Blocks until the election directory gains a child (or is created). */
function waitForCandidates(path, deadline) {
  let watcher;
  try {
    const [children, , w] = getChildrenWatch(path);
    if (children.length !== 0) {
      dispose(w);
      return;
    }
    watcher = w;
  } catch (e) {
    if (!isZk(e, 'no-node')) throw e;
    const [stat, w] = existsWatch(path);
    if (stat !== undefined) {
      dispose(w);
      return;
    }
    watcher = w;
  }
  try {
    const event = waitWatcher(watcher, deadline.remainingMs());
    if (event.kind === 'session-expired' || event.kind === 'session-closed') {
      throw ZkError.sessionExpired();
    }
  } finally {
    dispose(watcher);
  }
}

export const election = exportRecipe({ campaign, acknowledge, resign, leader, observe });
