//! Interop: Apache Curator 5.4's InterProcessMutex (Debian's jars, run as a real JVM) and
//! wazoo's lock recipe on the same path exclude each other, both ways.

use std::time::Duration;

use wazoo_runtime::{RecipeError, ZkError};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(60);

fn is_curator_name(name: &str) -> bool {
    // _c_<36-char uuid>-lock-<10 digits>
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    let Some((uuid, seq)) = rest.split_once("-lock-") else { return false };
    uuid.len() == 36 && seq.len() == 10 && seq.chars().all(|c| c.is_ascii_digit())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn curator_and_wazoo_exclude_each_other_both_ways() {
    let address = zk().address();
    let checker = client(&address).await;
    let path = unique("curator");
    let host = host().await;
    let mut curator = Curator::start(&address, &path, "mutex").await;
    let mut lock = host.lock("lock").await.unwrap();

    // wazoo holds: Curator cannot take it.
    let held = lock.acquire(&path, None).await.unwrap();
    assert!(is_curator_name(held.node.rsplit('/').next().unwrap()), "wazoo's node {}", held.node);
    curator.send("acquire 300").await;
    assert_eq!(curator.line().await, "timeout");

    // Curator waits on wazoo's node; wazoo's release wakes it.
    curator.send("acquire -1").await;
    wait_children(&checker, &path, 2).await;
    lock.release().await.unwrap();
    let acquired = curator.line().await;
    let curator_node = acquired.strip_prefix("acquired ").expect("Curator acquired").to_string();
    assert!(is_curator_name(curator_node.rsplit('/').next().unwrap()), "Curator's node {curator_node}");

    // Curator holds: wazoo cannot take it, then waits on Curator's node.
    assert!(matches!(
        lock.acquire(&path, Some(Duration::from_millis(300))).await,
        Err(RecipeError::Zk(ZkError::Timeout))
    ));
    assert_eq!(children(&checker, &path).await.len(), 1, "the timed-out wazoo attempt left nothing");
    let path2 = path.clone();
    let waiting = tokio::spawn(async move {
        let held = lock.acquire(&path2, None).await.unwrap();
        (lock, held)
    });
    wait_children(&checker, &path, 2).await;
    curator.send("release").await;
    assert_eq!(curator.line().await, "released");
    let (mut lock, taken) = within(LIMIT, "wazoo acquires after Curator releases", waiting).await.unwrap();
    assert!(taken.token > held.token);
    lock.release().await.unwrap();

    // Both contend at full speed; an append-only log shows whether two ever held at once.
    let log = std::env::temp_dir().join(format!("wazoo-curator-{}.log", std::process::id()));
    std::fs::write(&log, "").unwrap();
    curator.send(&format!("loop 25 {}", log.display())).await;
    for _ in 0..25 {
        lock.acquire(&path, None).await.unwrap();
        append(&log, "W enter\n");
        tokio::time::sleep(Duration::from_millis(2)).await;
        append(&log, "W exit\n");
        lock.release().await.unwrap();
    }
    assert_eq!(curator.line().await, "looped");
    let history = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 100, "{history}");
    for pair in lines.chunks(2) {
        let who = pair[0].strip_suffix(" enter").unwrap_or_else(|| panic!("overlap:\n{history}"));
        assert_eq!(pair[1], format!("{who} exit"), "two holders at once:\n{history}");
    }
    assert!(lines.iter().any(|l| l.starts_with('C')) && lines.iter().any(|l| l.starts_with('W')));
    curator.send("quit").await;
    lock.close().await;
}

fn append(path: &std::path::Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(line.as_bytes()).unwrap();
}
