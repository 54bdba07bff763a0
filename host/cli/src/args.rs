//! How `wazoo` reads its options: durations (`humantime`, a bare number being seconds), the
//! options every claim command shares, and what a wait's end says (`--timeout` passing,
//! `--no-wait` finding a claim taken: exit status 3). A value out of range, or a recipe's path
//! that is not one ([`check_path`]), is a usage error (exit status 2) that says why.

use std::time::Duration;

use clap::Args;
use wazoo_runtime::family::Family;

use crate::exit;

/// The longest duration any option takes: longer is a usage error, not an overflow.
pub(crate) const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);
/// The longest session timeout: ZooKeeper counts it in milliseconds in a 32-bit integer.
pub(crate) const LONGEST_SESSION: Duration = Duration::from_secs(24 * 24 * 3600);

/// A duration: `500ms`, `1m30s`, `2d` (humantime), or a plain number of seconds (`10`, `0.5`);
/// zero allowed, at most [`LONGEST`].
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let parsed = match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
            if seconds > LONGEST.as_secs_f64() {
                return Err(too_long(text, LONGEST));
            }
            Duration::from_secs_f64(seconds)
        }
        Ok(_) => return Err(format!("not a duration: {text:?} (try 500ms, 10s, 1m30s, 2d)")),
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| format!("not a duration: {text:?}: {e} (try 500ms, 10s, 1m30s, 2d)"))?,
    };
    if parsed > LONGEST {
        return Err(too_long(text, LONGEST));
    }
    Ok(parsed)
}

/// A duration above zero.
pub(crate) fn positive_duration(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        Duration::ZERO => Err(format!("must be above zero: {text:?}")),
        d => Ok(d),
    }
}

/// A ZooKeeper session timeout: above zero, at most [`LONGEST_SESSION`] (the server grants
/// what lies within its own bounds, 2 to 20 ticks by default).
pub(crate) fn session_timeout(text: &str) -> Result<Duration, String> {
    let d = positive_duration(text)?;
    if d > LONGEST_SESSION {
        return Err(too_long(text, LONGEST_SESSION));
    }
    Ok(d)
}

/// How often `serve` looks at its plugins directory: at least 100 ms.
pub(crate) fn watch_every(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        d if d < Duration::from_millis(100) => Err(format!("{text:?} is too short: at least 100ms")),
        d => Ok(d),
    }
}

/// `serve --max-ttl`: between 1s and 1h.
pub(crate) fn max_ttl(text: &str) -> Result<Duration, String> {
    match duration(text)? {
        d if d < Duration::from_secs(1) => Err(format!("{text:?} is too short: at least 1s")),
        d if d > Duration::from_secs(3600) => Err(format!("{text:?} is too long: at most 1h")),
        d => Ok(d),
    }
}

/// An election participant's id: not empty, one line of printable text.
/// Who a claim is for unless `--id` says: `HOSTNAME:PID`, as Curator and kazoo name a client.
pub(crate) fn default_id() -> String {
    format!("{}:{}", wazoo_runtime::rollout::host_name(), std::process::id())
}

/// A claim's `--id`: one line of printable text, at most 128 bytes (what a daemon takes).
pub(crate) fn holder_id(text: &str) -> Result<String, String> {
    let id = participant_id(text)?;
    if id.len() > 128 {
        return Err(format!("an id is at most 128 bytes, not {}", id.len()));
    }
    Ok(id)
}

pub(crate) fn participant_id(text: &str) -> Result<String, String> {
    if text.is_empty() || text.chars().any(char::is_control) {
        return Err(format!("{text:?}: an id is one line of printable text, not empty"));
    }
    Ok(text.to_string())
}

/// A node name (a site of a transaction, a group member): not empty, no `/`, not `.` or `..`,
/// no control characters.
pub(crate) fn node_name(text: &str) -> Result<String, String> {
    if text.is_empty()
        || text == "."
        || text == ".."
        || text.contains('/')
        || text.chars().any(char::is_control)
    {
        return Err(format!("{text:?} is not a node name (not empty, no '/', not . or .., printable)"));
    }
    Ok(text.to_string())
}

/// `HOST[:PORT]` (IPv6 in brackets), the port a number from 1 to 65535; `default_port` says
/// whether it may be left out. Which part is wrong, in words.
fn host_port(one: &str, default_port: bool) -> Result<(), String> {
    let (host, port) = match one.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, port)) => {
                (host, Some(port.strip_prefix(':').ok_or(format!("{one:?}: not HOST:PORT"))?))
            }
            None => return Err(format!("{one:?}: an IPv6 address has no closing ']'")),
        },
        None => match one.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (one, None),
        },
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c.is_control() || c == '/') {
        return Err(format!("{one:?}: no host (expected HOST:PORT)"));
    }
    match port {
        None if default_port => Ok(()),
        None => Err(format!("{one:?}: no port (expected HOST:PORT)")),
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok(()),
            _ => Err(format!("{one:?}: the port must be a number from 1 to 65535")),
        },
    }
}

/// `--zookeeper`: `HOST[:PORT][,HOST[:PORT]…][/CHROOT]` as ZooKeeper's clients take it (the port
/// 2181 when left out), the chroot a valid path. TLS is `--zookeeper-tls-ca`'s business.
pub(crate) fn zookeeper_address(text: &str) -> Result<String, String> {
    let (hosts, chroot) = wazoo_runtime::keeper::split_chroot(text);
    zookeeper_hosts(text, hosts, chroot).map_err(|why| format!("{why} (--zookeeper, or WAZOO_ZOOKEEPER)"))?;
    Ok(text.to_string())
}

/// What is wrong with the hosts and chroot of ZooKeeper address `text`, if anything.
fn zookeeper_hosts(text: &str, hosts: &str, chroot: Option<&str>) -> Result<(), String> {
    if hosts.is_empty() {
        return Err("no ZooKeeper address (expected HOST:PORT[,HOST:PORT…][/CHROOT])".into());
    }
    for one in hosts.split(',') {
        if one.is_empty() {
            return Err(format!("an empty address in {text:?} (expected HOST:PORT[,HOST:PORT…][/CHROOT])"));
        }
        host_port(one, true)?;
    }
    if let Some(root) = chroot {
        wazoo_runtime::paths::check_node(root).map_err(|why| format!("chroot {root:?}: {why}"))?;
    }
    Ok(())
}

/// `--server`: the daemon's `HOST:PORT` (or `http://`, `https://` before it), several members
/// of a group comma-separated.
pub(crate) fn daemon_addresses(text: &str) -> Result<String, String> {
    let checked: Result<(), String> = text.split(',').map(str::trim).try_for_each(|one| {
        let bare = one.strip_prefix("https://").or_else(|| one.strip_prefix("http://")).unwrap_or(one);
        if bare.is_empty() {
            return Err(format!("an empty address in {text:?} (expected HOST:PORT[,HOST:PORT…])"));
        }
        host_port(bare, false)
    });
    checked.map_err(|why| format!("{why} (--server, or WAZOO_SERVER)"))?;
    Ok(text.to_string())
}

/// A value given on the command line, or with `-` read from stdin as it is (etcdctl's and
/// kubectl's `-`).
pub(crate) fn value_or_stdin(text: String) -> anyhow::Result<Vec<u8>> {
    use std::io::Read as _;
    if text != "-" {
        return Ok(text.into_bytes());
    }
    let mut data = Vec::new();
    std::io::stdin()
        .lock()
        .read_to_end(&mut data)
        .map_err(|e| exit::usage(format!("reading the value from stdin: {e}")))?;
    Ok(data)
}

fn too_long(text: &str, longest: Duration) -> String {
    format!("{text:?} is too long: at most {} days", longest.as_secs() / 86400)
}

/// A duration as the messages say it: `1m 30s`, `500ms`.
pub(crate) fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// `recipes publish|status|rollback --wait [--timeout DUR]`: waiting for a rollout.
#[derive(Args, Clone, Debug)]
pub(crate) struct RolloutWait {
    /// Then wait until every following host serves the version (the canary, on a canary host):
    /// exit status 3 past --timeout, 1 if a host refused it
    #[arg(long)]
    pub(crate) wait: bool,
    /// With --wait: how long to wait
    #[arg(long, default_value = "60s", value_parser = positive_duration, requires = "wait")]
    pub(crate) timeout: Duration,
}

impl RolloutWait {
    /// How long to wait, if at all.
    pub(crate) fn limit(&self) -> Option<Duration> {
        self.wait.then_some(self.timeout)
    }
}

/// What holding a claim takes: how a lost claim stops CMD, and the statuses that say so.
#[derive(Args, Clone, Debug)]
pub(crate) struct HoldArgs {
    /// After SIGTERM, how long CMD's processes have before SIGKILL when the claim is lost
    /// [default: a fifth of --session-timeout]
    #[arg(long, value_parser = duration)]
    pub(crate) grace: Option<Duration>,
    /// Exit status when the claim is lost while held (instead of 4)
    #[arg(long, value_name = "N", default_value_t = exit::LOST)]
    pub(crate) lost_exit_code: u8,
    /// Through a daemon group (--server A,B): stop CMD as when the claim is lost as soon as its
    /// daemon stops answering, rather than letting it run while another member takes the claim
    /// up (lock, rwlock, semaphore, elect, group join)
    #[arg(long)]
    pub(crate) stop_in_jeopardy: bool,
}

/// What waiting for a claim takes: how long, and the status when it is not had.
#[derive(Args, Clone, Debug)]
pub(crate) struct WaitArgs {
    /// Give up if not held within this time (exit status 3, or --conflict-exit-code)
    #[arg(long, value_parser = duration, conflicts_with = "no_wait")]
    pub(crate) timeout: Option<Duration>,
    /// Do not wait: if another holds it, exit at once (exit status 3, or --conflict-exit-code)
    #[arg(short = 'n', long)]
    pub(crate) no_wait: bool,
    /// Exit status when it was not held in time, or was taken with --no-wait (instead of 3)
    #[arg(long, value_name = "N", default_value_t = exit::CONFLICT)]
    pub(crate) conflict_exit_code: u8,
    /// Exit status when another client revoked it and CMD was stopped (instead of 5)
    #[arg(long, value_name = "N", default_value_t = exit::REVOKED)]
    pub(crate) revoked_exit_code: u8,
    /// Say nothing about the wait, as flock: no line after a second of waiting (else it names
    /// who holds it), and none when --no-wait or --timeout gives up (the exit status says it)
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,
}

impl WaitArgs {
    /// How long the recipe may wait: none with `--no-wait` (one try), else `--timeout`.
    pub(crate) fn wait(&self) -> Option<Duration> {
        if self.no_wait {
            Some(Duration::ZERO)
        } else {
            self.timeout
        }
    }
}

/// The exit statuses a command run under a claim ends with when the claim, not CMD, ends it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Statuses {
    pub(crate) lost: u8,
    pub(crate) revoked: u8,
}

impl Statuses {
    pub(crate) fn new(hold: &HoldArgs, wait: Option<&WaitArgs>) -> Statuses {
        Statuses { lost: hold.lost_exit_code, revoked: wait.map_or(exit::REVOKED, |w| w.revoked_exit_code) }
    }
}

/// The path of a recipe's node, checked before anything is asked of ZooKeeper (`kind` names it
/// in the message).
pub(crate) fn check_path(kind: &str, path: &str) -> anyhow::Result<()> {
    wazoo_runtime::paths::check_node(path).map_err(|why| exit::usage(format!("invalid {kind} path: {why}")))
}

/// What a command waited for when its `--timeout` passed.
#[derive(Clone, Copy)]
pub(crate) enum Waited {
    /// A claim of a family: its words are in its description.
    Claim(&'static Family),
    QueueItem,
    BarrierDown,
}

/// Says that `--timeout` passed while waiting at `path`: exit status 3.
pub(crate) fn timed_out(waited: Waited, path: &str, timeout: Option<Duration>) -> u8 {
    let after = human(timeout.unwrap_or_default());
    match waited {
        Waited::Claim(family) => eprintln!("wazoo: {}", family.say(family.timed_out, path, None, &after)),
        Waited::QueueItem => eprintln!("wazoo: queue {path} empty after {after}"),
        Waited::BarrierDown => eprintln!("wazoo: barrier {path} still up after {after}"),
    }
    exit::CONFLICT
}

/// A claim was not had: `--no-wait` found it taken, or `--timeout` passed. Exit status 3, or
/// `--conflict-exit-code`; said on stderr unless `--quiet` (as flock says nothing then).
pub(crate) fn not_held(waited: Waited, path: &str, wait: &WaitArgs) -> u8 {
    if wait.quiet {
        return wait.conflict_exit_code;
    }
    if wait.no_wait {
        let family = match waited {
            Waited::Claim(family) => family,
            _ => &wazoo_runtime::family::LOCK,
        };
        eprintln!("wazoo: {}", family.say(family.taken, path, None, ""));
    } else {
        timed_out(waited, path, wait.timeout);
    }
    wait.conflict_exit_code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked_before_anything_is_tried() {
        for good in ["127.0.0.1:2181", "zk1:2181,zk2:2181/app", "zk1", "[::1]:2181"] {
            assert_eq!(zookeeper_address(good).as_deref(), Ok(good), "{good}");
        }
        for bad in ["", "host:notaport", "host:0", "host:70000", ":2181", "a:1,,b:2", "a:1/x/", "[::1"] {
            assert!(zookeeper_address(bad).is_err(), "{bad:?}");
        }
        for good in ["127.0.0.1:7181", "a:7181, b:7181", "https://d.example:443", "[::1]:7181"] {
            assert!(daemon_addresses(good).is_ok(), "{good}");
        }
        for bad in ["", " ", "a:7181,", "a", "a:x", "http://", "a b:1"] {
            assert!(daemon_addresses(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_read_as_users_write_them() {
        assert_eq!(duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("2d"), Ok(Duration::from_secs(2 * 86400)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn bad_durations_are_refused_with_a_reason() {
        for bad in ["", "-1", "nan", "inf", "1e300", "10x", "1000000d", "99999999999999999999s"] {
            assert!(duration(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(positive_duration("0s").is_err());
        assert!(session_timeout("25d").is_err());
        assert_eq!(session_timeout("24d"), Ok(Duration::from_secs(24 * 86400)));
        assert_eq!(duration("366d").unwrap_err(), "\"366d\" is too long: at most 365 days");
    }
}
