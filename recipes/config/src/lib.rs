//! Configuration and name service (ZooKeeper "Recipes and Solutions" 1.2), and a shared counter:
//! values are the data of persistent nodes, changed by versioned compare-and-set. The counter
//! is stored as kazoo's `Counter` (decimal text), Curator's `SharedCount` (a 4-byte big-endian
//! int) or Curator's `DistributedAtomicLong` (an 8-byte big-endian long).

wazoo_guest::recipe_world!("wazoo:recipes/config-recipe@0.1.2");
wazoo_guest::protocol!("wazoo-config/1");

use exports::wazoo::recipes::config::{Entry, Guest as Config};
use exports::wazoo::recipes::counter::{CounterFormat, Guest as Counter};
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

/// Kazoo's text: decimal, surrounding blanks ignored, empty counting as 0.
fn parse_text(data: &[u8]) -> Result<i64, ZkError> {
    let text = std::str::from_utf8(data).map_err(|_| ZkError::Other("counter value is not text".into()))?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    text.parse().map_err(|_| ZkError::Other(format!("counter value {text:?} is not an integer")))
}

/// The value `data` holds in `format`. Data of the wrong size is refused: Curator fails on fewer
/// bytes and reads only the first 4 (or 8) of more, which an add would then rewrite.
fn parse(data: &[u8], format: CounterFormat) -> Result<i64, ZkError> {
    match format {
        CounterFormat::Kazoo => parse_text(data),
        CounterFormat::CuratorShared => match <[u8; 4]>::try_from(data) {
            Ok(bytes) => Ok(i64::from(i32::from_be_bytes(bytes))),
            Err(_) => Err(wrong_size(data, 4, "SharedCount")),
        },
        CounterFormat::CuratorAtomic if data.is_empty() => Ok(0),
        CounterFormat::CuratorAtomic => match <[u8; 8]>::try_from(data) {
            Ok(bytes) => Ok(i64::from_be_bytes(bytes)),
            Err(_) => Err(wrong_size(data, 8, "DistributedAtomicLong")),
        },
    }
}

fn wrong_size(data: &[u8], size: usize, class: &str) -> ZkError {
    ZkError::Other(format!("counter value is {} bytes, not the {size} of a Curator {class}", data.len()))
}

/// `value` as `format` stores it.
fn render(value: i64, format: CounterFormat) -> Vec<u8> {
    match format {
        CounterFormat::Kazoo => value.to_string().into_bytes(),
        // `next` checked the range already.
        CounterFormat::CuratorShared => (value as i32).to_be_bytes().to_vec(),
        CounterFormat::CuratorAtomic => value.to_be_bytes().to_vec(),
    }
}

/// `value + delta` as `format` adds: kazoo's and `SharedCount`'s must stay in range (a 32-bit
/// range for `SharedCount`), `DistributedAtomicLong`'s wraps as its `add` does.
fn next(value: i64, delta: i64, format: CounterFormat) -> Result<i64, ZkError> {
    let overflow = || ZkError::InvalidArgument("counter would overflow".into());
    match format {
        CounterFormat::Kazoo => value.checked_add(delta).ok_or_else(overflow),
        CounterFormat::CuratorShared => value
            .checked_add(delta)
            .filter(|sum| i32::try_from(*sum).is_ok())
            .ok_or_else(|| ZkError::InvalidArgument("counter would overflow 32 bits".into())),
        CounterFormat::CuratorAtomic => Ok(value.wrapping_add(delta)),
    }
}

fn value(path: &str, format: CounterFormat) -> Result<i64, ZkError> {
    zk::check_path(path)?;
    match get(path)? {
        Some(entry) => parse(&entry.data, format),
        None => Ok(0),
    }
}

fn add(path: &str, delta: i64, format: CounterFormat) -> Result<i64, ZkError> {
    zk::check_path(path)?;
    loop {
        let Some(entry) = get(path)? else {
            let first = next(0, delta, format)?;
            match create(path, &render(first, format)) {
                Ok(_) => return Ok(first),
                Err(ZkError::NodeExists) => continue,
                Err(e) => return Err(e),
            }
        };
        let sum = next(parse(&entry.data, format)?, delta, format)?;
        // Compare-and-set on the version read: a concurrent add makes this fail and retry. A
        // lost reply is not retried (the add may have applied): the caller sees connection-loss.
        match zk::set_data(path, &render(sum, format), Some(entry.version)) {
            Ok(_) => return Ok(sum),
            Err(ZkError::BadVersion) => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Counter for Recipe {
    fn value(path: String) -> Result<i64, ZkError> {
        value(&path, CounterFormat::Kazoo)
    }

    fn add(path: String, delta: i64) -> Result<i64, ZkError> {
        add(&path, delta, CounterFormat::Kazoo)
    }

    fn value_in(path: String, format: CounterFormat) -> Result<i64, ZkError> {
        value(&path, format)
    }

    fn add_in(path: String, delta: i64, format: CounterFormat) -> Result<i64, ZkError> {
        add(&path, delta, format)
    }
}

export!(Recipe);
