//! Configuration and name service (ZooKeeper "Recipes and Solutions" 1.2), and a shared counter:
//! values are the data of persistent nodes, changed by versioned compare-and-set.

wazoo_guest::recipe_world!("wazoo:recipes/config-recipe@0.1.0");

use exports::wazoo::recipes::config::{Entry, Guest as Config};
use exports::wazoo::recipes::counter::Guest as Counter;
use wazoo_guest::{self as zk, CreateMode, Deadline, ZkError};

struct Recipe;

fn get(path: &str) -> Result<Option<Entry>, ZkError> {
    match zk::get_data(path) {
        Ok((data, stat)) => Ok(Some(Entry { data, version: stat.version })),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates `path` holding `data` if absent; `node-exists` if someone else created it first.
fn create(path: &str, data: &[u8]) -> Result<i32, ZkError> {
    match zk::create(path, data, CreateMode::Persistent) {
        Ok(created) => Ok(created.stat.version),
        Err(ZkError::NoNode) => {
            zk::ensure_parents(path)?;
            zk::create(path, data, CreateMode::Persistent).map(|c| c.stat.version)
        }
        Err(e) => Err(e),
    }
}

impl Config for Recipe {
    fn get(path: String) -> Result<Option<Entry>, ZkError> {
        zk::check_path(&path)?;
        get(&path)
    }

    fn set(path: String, data: Vec<u8>, expected_version: Option<i32>) -> Result<i32, ZkError> {
        zk::check_path(&path)?;
        loop {
            match zk::set_data(&path, &data, expected_version) {
                Ok(stat) => return Ok(stat.version),
                Err(ZkError::NoNode) if expected_version.is_none() => match create(&path, &data) {
                    Ok(version) => return Ok(version),
                    // Created meanwhile by someone else: write over it (no version was asked).
                    Err(ZkError::NodeExists) => continue,
                    // The create may have applied: an unconditional write can simply be done
                    // again, over the node if it is there.
                    Err(ZkError::ConnectionLoss) => continue,
                    Err(e) => return Err(e),
                },
                // Unconditional writes are idempotent: try again.
                Err(ZkError::ConnectionLoss) if expected_version.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn watch(path: String, known: Option<i32>, timeout_ms: Option<u64>) -> Result<Option<Entry>, ZkError> {
        zk::check_path(&path)?;
        let deadline = Deadline::after_ms(timeout_ms);
        loop {
            let (now, watcher) = match zk::get_data_watch(&path) {
                Ok((data, stat, watcher)) => (Some(Entry { data, version: stat.version }), watcher),
                Err(ZkError::NoNode) => match zk::exists_watch(&path)? {
                    (None, watcher) => (None, watcher),
                    (Some(_), _) => continue, // created between the two calls
                },
                Err(ZkError::ConnectionLoss) => continue,
                Err(e) => return Err(e),
            };
            if now.as_ref().map(|e| e.version) != known {
                return Ok(now);
            }
            zk::wait_on(&watcher, deadline)?;
        }
    }
}

fn parse(data: &[u8]) -> Result<i64, ZkError> {
    let text = std::str::from_utf8(data).map_err(|_| ZkError::Other("counter value is not text".into()))?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    text.parse().map_err(|_| ZkError::Other(format!("counter value {text:?} is not an integer")))
}

impl Counter for Recipe {
    fn value(path: String) -> Result<i64, ZkError> {
        zk::check_path(&path)?;
        match get(&path)? {
            Some(entry) => parse(&entry.data),
            None => Ok(0),
        }
    }

    fn add(path: String, delta: i64) -> Result<i64, ZkError> {
        zk::check_path(&path)?;
        loop {
            let Some(entry) = get(&path)? else {
                match create(&path, delta.to_string().as_bytes()) {
                    Ok(_) => return Ok(delta),
                    Err(ZkError::NodeExists) => continue,
                    Err(e) => return Err(e),
                }
            };
            let next = parse(&entry.data)?
                .checked_add(delta)
                .ok_or_else(|| ZkError::InvalidArgument("counter would overflow".into()))?;
            // Compare-and-set on the version read: a concurrent add makes this fail and retry.
            // A lost reply is not retried blindly (it may have applied): read again and decide.
            match zk::set_data(&path, next.to_string().as_bytes(), Some(entry.version)) {
                Ok(_) => return Ok(next),
                Err(ZkError::BadVersion) => continue,
                Err(ZkError::ConnectionLoss) => return Err(ZkError::ConnectionLoss),
                Err(e) => return Err(e),
            }
        }
    }
}

export!(Recipe);
