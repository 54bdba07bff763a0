//! `wazoo partition` (kazoo's `SetPartitioner`): members share out a set of items, each item
//! owned by exactly one live member, and share again when a member goes, even killed.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};
use wazoo_tests::daemon::{cli, output};
use wazoo_tests::*;

const LIMIT: Duration = Duration::from_secs(90);

/// Each round's command: copies its share to `DIR/<member>.<round>`, says `round R MEMBERS SIZE`,
/// and works (in a forked child) until stopped.
const ROUND: &str = r#"cp "$WAZOO_PARTITION" "$DIR/$WAZOO_MEMBER.$WAZOO_PARTITION_ROUND"
echo "round $WAZOO_PARTITION_ROUND $WAZOO_MEMBERS $WAZOO_PARTITION_SIZE"
sleep 600 & wait"#;

struct Member {
    name: String,
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Member {
    fn start(path: &str, name: &str, items: &str, dir: &Path) -> Member {
        let mut child = cli()
            .env("DIR", dir)
            .args(["--session-timeout", "2s", "partition", path, "--member", name, "--items", items])
            .args(["--grace", "1s", "--", "sh", "-c", ROUND])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Member { name: name.to_string(), child, lines }
    }

    /// Reads the member's rounds until one among `members` members: that round's share.
    async fn share_among(&mut self, members: usize, dir: &Path) -> BTreeSet<String> {
        loop {
            let line = within(LIMIT, "the member runs a round", self.lines.next_line()).await.unwrap();
            let line = line.unwrap_or_else(|| panic!("{} exited", self.name));
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words[0], "round", "{line}");
            if words[2] != members.to_string() {
                continue;
            }
            let file = dir.join(format!("{}.{}", self.name, words[1]));
            let share: BTreeSet<String> =
                std::fs::read_to_string(file).unwrap().lines().map(str::to_string).collect();
            assert_eq!(share.len().to_string(), words[3], "{line}");
            return share;
        }
    }
}

/// Every item in exactly one share.
fn assert_partition(shares: &[&BTreeSet<String>], items: &BTreeSet<String>) {
    let mut all = BTreeSet::new();
    for share in shares {
        for item in share.iter() {
            assert!(all.insert(item.clone()), "item {item} is in two shares: {shares:?}");
        }
    }
    assert_eq!(&all, items, "every item has an owner");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_share_thirty_items_and_share_again_when_one_is_killed() {
    let checker = client(&zk().address()).await;
    let path = unique("partition");
    let dir = tempfile::tempdir().unwrap();
    let items: BTreeSet<String> = (0..30).map(|i| format!("item{i:02}")).collect();
    let listed = items.iter().cloned().collect::<Vec<_>>().join(",");

    let mut members: Vec<Member> =
        ["m1", "m2", "m3"].iter().map(|m| Member::start(&path, m, &listed, dir.path())).collect();
    let mut shares = Vec::new();
    for member in &mut members {
        shares.push(member.share_among(3, dir.path()).await);
    }
    assert_partition(&shares.iter().collect::<Vec<_>>(), &items);
    assert!(shares.iter().all(|s| s.len() == 10), "{shares:?}");

    // m3's wazoo is killed: its command dies with it, its session expires, and the two left share
    // the thirty items between them.
    let mut killed = members.pop().unwrap();
    killed.child.kill().await.unwrap();
    let mut shares = Vec::new();
    for member in &mut members {
        shares.push(member.share_among(2, dir.path()).await);
    }
    assert_partition(&shares.iter().collect::<Vec<_>>(), &items);
    assert!(shares.iter().all(|s| s.len() == 15), "{shares:?}");

    // Each item's lock is held by exactly one node, of the live members' session.
    for item in &items {
        let holders = ephemerals(&checker, &format!("{path}/items/{item}")).await;
        assert_eq!(holders.len(), 1, "item {item}: {holders:?}");
    }
    assert_eq!(wait_children(&checker, &format!("{path}/members"), 2).await, ["m1", "m2"]);

    // A member that ends on a signal leaves: the other takes every item.
    let mut m2 = members.pop().unwrap();
    assert_eq!(unsafe { libc::kill(m2.child.id().unwrap() as i32, libc::SIGTERM) }, 0);
    let status = within(LIMIT, "m2 ends", m2.child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(143), "the command's status: killed by SIGTERM");
    let last = members[0].share_among(1, dir.path()).await;
    assert_eq!(last, items);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_is_checked_before_anything_is_asked() {
    let path = unique("partition-usage");
    for args in [
        vec!["partition", &path, "--member", "a", "--", "true"],
        vec!["partition", &path, "--member", "a", "--items", "x,x", "--", "true"],
        vec!["partition", &path, "--member", "a", "--items", "x/y", "--", "true"],
        vec!["partition", &path, "--member", "a/b", "--items", "x", "--", "true"],
        vec!["partition", &path, "--member", "a", "--items", "x"],
        vec!["partition", &path, "--member", "a", "--items-file", "/nonexistent/items", "--", "true"],
    ] {
        let (code, _, stderr) = output(cli().args(&args)).await;
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    }
    // A command that ends ends the member: its status, the group left.
    let (code, stdout, stderr) = output(cli().args([
        "partition",
        &path,
        "--member",
        "solo",
        "--items",
        "b,a,c",
        "--",
        "sh",
        "-c",
        "cat \"$WAZOO_PARTITION\"; exit 7",
    ]))
    .await;
    assert_eq!(code, 7, "{stderr}");
    assert_eq!(stdout, "a\nb\nc\n");
    let checker = client(&zk().address()).await;
    assert!(ephemerals(&checker, &path).await.is_empty(), "nothing left behind");
}
