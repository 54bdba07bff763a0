// Leader election, ZooKeeper "Recipes and Solutions" 1.7, in Curator's `LeaderLatch` wire format
// (`<path>/_c_<uuid>-latch-<seq>`, data = participant id), plus what etcd's election has and
// Curator lacks: observing the leader without contending, resigning, and the seed's
// acknowledgement that the leader procedure ran. A port of recipes/election (Rust): both contend
// correctly on the same election path.
//
// The acknowledgement is the ephemeral node `<path>-leader-ack`, holding the leader's node path, a
// newline and the note, and is shown only with the node it names (handles on one host share a
// session). A leader writes it in one `multi` that checks its own node still exists and replaces
// an acknowledgement naming any other node; resigning deletes both together.
//
// World `wazoo:recipes/election-recipe@0.1.2`; built by ../build.mjs.

import {
  ZkError,
  CreateMode,
  Deadline,
  isZk,
  checkPath,
  contend,
  exclusive,
  exists,
  getData,
  getChildren,
  multi,
  sync,
  getChildrenWatch,
  existsWatch,
  watcherChanged,
  waitAny,
  dispose,
  retrying,
  releaseNode,
  getDataWatch,
  sorted,
  join,
  bytes,
  text,
  exportRecipe,
} from '../wazoo-guest.js';

/** Curator's latch name: the sequence follows it. */
const LATCH = 'latch-';
/** How many times an acknowledgement is written again after another write came in between. */
const ACK_ATTEMPTS = 10;

/** This instance's candidacy: `{ path, leadership: { node, token }, acknowledged }`, or null. */
let candidacy = null;

const ackPath = (path) => `${path}-leader-ack`;

/** The acknowledgement's data: the leader's node, a newline (never in a path), the note. */
const ackData = (node, note) => `${node}\n${note}`;

/** The note of an acknowledgement's `data` (bytes) if it names `node`, else undefined. */
function noteFor(data, node) {
  const all = text(data);
  return all.startsWith(`${node}\n`) ? all.slice(node.length + 1) : undefined;
}

/** What `observe`'s caller passes as `known` after seeing `leader` (undefined: no leader). */
function seen(leader) {
  if (leader === undefined) return undefined;
  return leader.acknowledged === undefined ? leader.node : `${leader.node}\n${leader.acknowledged}`;
}

async function campaign(path, id, timeoutMs) {
  if (candidacy !== null) {
    if (candidacy.path === path) return candidacy.leadership;
    throw ZkError.invalidArgument(`this handle already leads ${candidacy.path}`);
  }
  // 1. Create an ephemeral sequential proposal holding our id; 2. list the proposals; 3. if ours
  // is the lowest we lead; 4. otherwise watch only the next lower one and look again.
  const deadline = Deadline.afterMs(timeoutMs);
  const mine = await contend(path, LATCH, bytes(id), exclusive([LATCH]), deadline);
  const leadership = { node: mine.path, token: mine.stat.czxid };
  candidacy = { path, leadership, acknowledged: false };
  return leadership;
}

async function acknowledge(note) {
  if (candidacy === null) throw ZkError.invalidArgument('acknowledge: this handle does not lead');
  const mine = candidacy;
  const ack = ackPath(mine.path);
  const data = ackData(mine.leadership.node, note);
  for (let attempt = 0; attempt < ACK_ATTEMPTS; attempt += 1) {
    if (await retrying(() => writeAck(ack, mine.leadership.node, data))) {
      mine.acknowledged = true;
      return;
    }
  }
  throw ZkError.other(`acknowledge: ${ack} kept changing under this write`);
}

async function resign() {
  const mine = candidacy;
  if (mine === null) throw ZkError.invalidArgument('resign: this handle is not a candidate');
  candidacy = null;
  const node = mine.leadership.node;
  if (mine.acknowledged) {
    // Together, so no observer sees this leader without its acknowledgement. A node already gone
    // (deposed) leaves its acknowledgement to the next leader's.
    const ack = ackPath(mine.path);
    try {
      await retrying(() => {
        let data, stat;
        try {
          [data, stat] = getData(ack);
        } catch (e) {
          if (isZk(e, 'no-node')) return;
          throw e;
        }
        if (noteFor(data, node) === undefined) return;
        multi([
          { tag: 'delete', val: { path: ack, version: stat.version } },
          { tag: 'delete', val: { path: node, version: undefined } },
        ]);
      });
    } catch (e) {
      if (!isZk(e, 'no-node', 'bad-version')) throw e;
    }
  }
  // Unwaited (the host's delete-unwaited): the delete is sent now, this session's next request
  // is applied after it, and the host settles a lost reply. A node already gone (deleted with its
  // acknowledgement above, deposed, or gone with an expired session) counts as resigned.
  await releaseNode(node);
}

async function leader(path) {
  checkPath(path);
  // Catch up with the ensemble's leader first: a lagging server would still show a deposed leader.
  sync(path);
  return currentLeader(path);
}

async function observe(path, known, timeoutMs) {
  checkPath(path);
  const deadline = Deadline.afterMs(timeoutMs);
  const ack = ackPath(path);
  for (;;) {
    // Armed before the look, so no acknowledgement written after it goes unseen.
    const [, onAck] = existsWatch(ack);
    try {
      const now = await currentLeader(path);
      if (seen(now) !== known) return now;
      if (deadline.expired()) throw ZkError.timeout();
      if (now === undefined) {
        waitForCandidates(path, deadline);
        continue;
      }
      let onLeader;
      try {
        [, , onLeader] = getDataWatch(now.node);
      } catch (e) {
        if (isZk(e, 'no-node')) continue;
        throw e;
      }
      try {
        waitEither(onLeader, onAck, deadline);
      } finally {
        dispose(onLeader);
      }
    } finally {
      dispose(onAck);
    }
  }
}

/**
 * One try at writing this leader's acknowledgement `data` at `ack`: false when another write came
 * between our look and ours. Our `node` must still exist.
 */
function writeAck(ack, node, data) {
  let replaced;
  try {
    const [current, stat] = getData(ack);
    if (text(current) === data) {
      stillLeading(node);
      return true;
    }
    replaced = stat.version;
  } catch (e) {
    if (!isZk(e, 'no-node')) throw e;
  }
  const ops = [{ tag: 'check', val: { path: node, version: -1 } }];
  if (replaced !== undefined) ops.push({ tag: 'delete', val: { path: ack, version: replaced } });
  ops.push({ tag: 'create', val: { path: ack, data: bytes(data), mode: CreateMode.Ephemeral } });
  try {
    multi(ops);
    return true;
  } catch (e) {
    if (e.index === 0 && isZk(e, 'no-node')) throw deposed(node);
    if (e.index !== undefined && isZk(e, 'no-node', 'node-exists', 'bad-version')) return false;
    throw e;
  }
}

/** Throws unless this handle's `node` exists (so it leads). */
function stillLeading(node) {
  if (exists(node) === undefined) throw deposed(node);
}

function deposed(node) {
  return ZkError.other(`acknowledge: this handle no longer leads (${node} is gone)`);
}

/** The lowest proposal, its id, token and (if it names that proposal) acknowledgement. */
async function currentLeader(path) {
  for (;;) {
    let children;
    try {
      [children] = getChildren(path);
    } catch (e) {
      if (isZk(e, 'no-node')) return undefined;
      throw e;
    }
    const first = sorted(children.filter((c) => c.includes(LATCH)), [LATCH])[0];
    if (first === undefined) return undefined;
    const node = join(path, first);
    // The acknowledgement first, then the leader's node: a resign deletes both in one multi,
    // so a node still there after the read of its acknowledgement means that read was not torn
    // by a resignation in between.
    let acknowledged;
    try {
      const [ack] = getData(ackPath(path));
      acknowledged = noteFor(ack, node);
    } catch (e) {
      if (!isZk(e, 'no-node')) throw e;
    }
    let data, stat;
    try {
      [data, stat] = getData(node);
    } catch (e) {
      // It went between the listing and the read: look again.
      if (isZk(e, 'no-node')) continue;
      throw e;
    }
    return { node, id: text(data), token: stat.czxid, acknowledged };
  }
}

/**
 * Blocks until `first` or `second` fires (`session-expired` if the session ended), or the deadline
 * passes (`timeout`): one wait on both (the host's `wait-any`).
 */
function waitEither(first, second, deadline) {
  waitAny([first, second], deadline);
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
    watcherChanged(watcher, deadline.remainingMs());
  } finally {
    dispose(watcher);
  }
}

export const election = exportRecipe({ campaign, acknowledge, resign, leader, observe });
