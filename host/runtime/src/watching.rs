//! [`Watching`]: a cache that outlives the sessions it runs on, starting a new cache handle on
//! the host's next session and reporting the differences. Above the host, which makes its
//! handles.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::bindings::types::ZkError;
use crate::bindings::{CacheChange, CachedNode};
use crate::error::RecipeError;
use crate::handle::CacheHandle;
use crate::host::Host;

/// How long [`Watching`] waits between tries to start a cache again in a new session.
const AGAIN: Duration = Duration::from_millis(500);

/// A cache of `path` (and, recursive, the tree below it) that outlives sessions: when the
/// session its cache runs on ends, it starts a new cache in the host's new session and reports
/// the differences between what it had reported and what the new cache found, as changes. So a
/// follower sees every node's creation, changes and deletion as one consistent story, whatever
/// happens to connections and sessions (a change made and undone while no session was up is
/// not reported).
pub struct Watching {
    host: Host,
    recipe: String,
    path: String,
    recursive: bool,
    cache: Option<CacheHandle>,
    /// What has been reported so far.
    known: BTreeMap<String, CachedNode>,
    /// Changes found, not yet reported.
    pending: VecDeque<CacheChange>,
    /// Whether `initialized` has been reported.
    initialized: bool,
    /// Caches started so far.
    sessions: u64,
    /// A cache being started again, on a task of its own.
    restarting:
        Option<tokio::task::JoinHandle<Result<(CacheHandle, BTreeMap<String, CachedNode>), RecipeError>>>,
}

impl Watching {
    /// A cache of `path` run by the cache recipe `recipe`; it starts with the first [`next`].
    ///
    /// [`next`]: Watching::next
    pub fn new(host: Host, recipe: &str, path: &str, recursive: bool) -> Watching {
        Watching {
            host,
            recipe: recipe.to_string(),
            path: path.to_string(),
            recursive,
            cache: None,
            known: BTreeMap::new(),
            pending: VecDeque::new(),
            initialized: false,
            sessions: 0,
            restarting: None,
        }
    }

    /// Starts the first cache now: an error (a bad path, no such recipe, ZooKeeper out of reach)
    /// is the caller's to report.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        if self.cache.is_none() && self.restarting.is_none() {
            self.cache = Some(self.opener()().await?);
            self.sessions += 1;
        }
        Ok(())
    }

    /// How many times the cache was started again (after its session ended, or a call on it
    /// was cancelled).
    pub fn restarts(&self) -> u64 {
        self.sessions.saturating_sub(1)
    }

    /// The nodes reported so far, by path.
    pub fn known(&self) -> &BTreeMap<String, CachedNode> {
        &self.known
    }

    /// The next change: first a `created` for every node there, then `initialized`, then each
    /// change; `timeout` once `timeout` has passed without one. An error other than `timeout`
    /// leaves the cache as it was: call again to go on. Cancelling a call is safe: a cache
    /// cancelled mid-call is started again on the next, as after a session's end.
    pub async fn next(&mut self, timeout: Option<Duration>) -> Result<CacheChange, RecipeError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        loop {
            if let Some(change) = self.pending.pop_front() {
                self.note(&change);
                return Ok(change);
            }
            if let Some(restarting) = self.restarting.as_mut() {
                // The restart runs on its own: a deadline here only stops the waiting for it.
                let done = match deadline {
                    Some(at) => match tokio::time::timeout_at(at, restarting).await {
                        Ok(done) => done,
                        Err(_) => return Err(RecipeError::Zk(ZkError::Timeout)),
                    },
                    None => restarting.await,
                };
                self.restarting = None;
                let (cache, found) =
                    done.map_err(|e| RecipeError::Trapped(format!("restarting the cache: {e}")))??;
                self.sessions += 1;
                self.pending.extend(differences(&self.known, &found));
                // A first cache that ended before it was ready has its first reading only now.
                if !self.initialized {
                    self.pending.push_back(CacheChange::Initialized);
                }
                self.cache = Some(cache);
                continue;
            }
            let Some(cache) = self.cache.as_mut() else {
                self.restarting = Some(tokio::spawn(restart(self.opener())));
                continue;
            };
            match cache.next(left()).await {
                Ok(change) => {
                    self.note(&change);
                    return Ok(change);
                }
                Err(e @ RecipeError::Zk(ZkError::SessionExpired) | e @ RecipeError::Retired) => {
                    tracing::info!(path = %self.path, error = %e, "starting the cache again");
                    if let Some(cache) = self.cache.take() {
                        cache.close().await;
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// What opens a fresh cache of this path (in the host's current session) each time it is
    /// called: the first cache, and every restart.
    fn opener(
        &self,
    ) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<CacheHandle>> + Send>> + Send + 'static
    {
        let (host, recipe, path, recursive) =
            (self.host.clone(), self.recipe.clone(), self.path.clone(), self.recursive);
        move || {
            let (host, recipe, path) = (host.clone(), recipe.clone(), path.clone());
            Box::pin(async move { open(&host, &recipe, &path, recursive).await })
        }
    }

    fn note(&mut self, change: &CacheChange) {
        match change {
            CacheChange::Created(node) | CacheChange::Changed(node) => {
                self.known.insert(node.path.clone(), node.clone());
            }
            CacheChange::Deleted(node) => {
                self.known.remove(&node.path);
            }
            CacheChange::Initialized => self.initialized = true,
        }
    }

    /// Ends the cache.
    pub async fn close(mut self) {
        if let Some(restarting) = self.restarting.take() {
            restarting.abort();
        }
        if let Some(cache) = self.cache.take() {
            cache.close().await;
        }
    }
}

/// Starts new caches (each in the host's current session) until one has read what is there:
/// that cache and what it found. A recipe's own verdict ends it; anything else (no session
/// yet, ZooKeeper out of reach, the host's limits) is tried again.
async fn restart<F>(open: F) -> Result<(CacheHandle, BTreeMap<String, CachedNode>), RecipeError>
where
    F: Fn() -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<CacheHandle>> + Send>>,
{
    loop {
        let attempt = async {
            let mut cache = open().await?;
            let mut found = BTreeMap::new();
            loop {
                match cache.next(None).await {
                    Ok(CacheChange::Created(node)) => {
                        found.insert(node.path.clone(), node);
                    }
                    Ok(CacheChange::Initialized) => break,
                    Ok(_) => {}
                    Err(e) => {
                        cache.close().await;
                        return Err(e.into());
                    }
                }
            }
            anyhow::Ok((cache, found))
        };
        match attempt.await {
            Ok(done) => return Ok(done),
            Err(e) => match e.downcast::<RecipeError>() {
                Ok(RecipeError::Zk(e)) if !transient(&e) => return Err(RecipeError::Zk(e)),
                Ok(e @ RecipeError::Trapped(_)) => return Err(e),
                Ok(e) => tracing::debug!(error = %e, "starting the cache again"),
                Err(e) => tracing::debug!(error = %e, "starting the cache again"),
            },
        }
        tokio::time::sleep(AGAIN).await;
    }
}

/// A new cache handle of `recipe`, started on `path`.
async fn open(host: &Host, recipe: &str, path: &str, recursive: bool) -> anyhow::Result<CacheHandle> {
    let mut cache = host.cache(recipe).await?;
    match cache.start(path, recursive).await {
        Ok(()) => Ok(cache),
        Err(e) => {
            cache.close().await;
            Err(e.into())
        }
    }
}

/// Errors a new session (or ZooKeeper back within reach) may cure.
fn transient(e: &ZkError) -> bool {
    matches!(e, ZkError::SessionExpired | ZkError::ConnectionLoss | ZkError::Timeout)
}

/// What turns `was` into `now`: first deletions, deepest first, of the nodes gone and of those
/// made again since (a new `czxid`), so no node is ever left without its parent; then creations
/// (those made again included) and changes, parents first.
fn differences(was: &BTreeMap<String, CachedNode>, now: &BTreeMap<String, CachedNode>) -> Vec<CacheChange> {
    let replaced =
        |path: &String, old: &CachedNode| now.get(path).is_none_or(|n| n.stat.czxid != old.stat.czxid);
    let mut changes: Vec<CacheChange> = was
        .iter()
        .rev()
        .filter(|(path, old)| replaced(path, old))
        .map(|(_, n)| CacheChange::Deleted(n.clone()))
        .collect();
    for (path, node) in now {
        match was.get(path) {
            Some(old) if old.stat.czxid == node.stat.czxid => {
                if old.stat.mzxid != node.stat.mzxid {
                    changes.push(CacheChange::Changed(node.clone()));
                }
            }
            _ => changes.push(CacheChange::Created(node.clone())),
        }
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::Stat;

    fn node(path: &str, czxid: i64, mzxid: i64) -> CachedNode {
        let stat = Stat {
            czxid,
            mzxid,
            pzxid: 0,
            ctime: 0,
            mtime: 0,
            version: (mzxid - czxid) as i32,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        };
        CachedNode { path: path.into(), data: Vec::new(), stat }
    }

    fn said(changes: &[CacheChange]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                CacheChange::Created(n) => format!("created {}", n.path),
                CacheChange::Changed(n) => format!("changed {}", n.path),
                CacheChange::Deleted(n) => format!("deleted {}", n.path),
                CacheChange::Initialized => "initialized".into(),
            })
            .collect()
    }

    #[test]
    fn differences_delete_deepest_first_then_change_and_create_parents_first() {
        let was: BTreeMap<_, _> =
            [node("/a", 1, 1), node("/a/b", 2, 2), node("/a/b/c", 3, 3), node("/d", 4, 4)]
                .into_iter()
                .map(|n| (n.path.clone(), n))
                .collect();
        let now: BTreeMap<_, _> =
            [node("/a", 1, 9), node("/d", 10, 10), node("/e", 11, 11), node("/e/f", 12, 12)]
                .into_iter()
                .map(|n| (n.path.clone(), n))
                .collect();
        assert_eq!(
            said(&differences(&was, &now)),
            [
                "deleted /d",
                "deleted /a/b/c",
                "deleted /a/b",
                "changed /a",
                "created /d",
                "created /e",
                "created /e/f"
            ]
        );
        assert!(differences(&now, &now).is_empty());
    }
}
