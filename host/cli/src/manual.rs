//! What `--help` says after the options and what the manual pages say after theirs, written
//! once: the exit statuses, the environment, and examples. [`command`] is wazoo's clap command
//! with them added to every subcommand's long help (`--help`, not `-h`), and [`sections`] writes
//! the same text as the EXIT STATUS, ENVIRONMENT and EXAMPLES sections of a manual page, which
//! [`man`] writes (`wazoo man`), as [`completions`] writes the shells' completion scripts.

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_mangen::roff::{bold, roman, Roff};

use crate::cli::{Cli, CompletionShell};
use crate::exit;

/// The exit statuses every command ends with (the table of [`crate::exit`]).
pub(crate) const EXIT_STATUSES: &[(u8, &str)] = &[
    (0, "Done; under a claim, CMD's own status when it ran and ended by itself."),
    (
        exit::NOTHING,
        "Nothing there, or a definite no: no value, no leader, no holders, a stale version, a fenced \
         write refused, a transaction still running, a name taken, a recipe's err answer.",
    ),
    (exit::USAGE, "Bad usage: an unknown option, a value out of range or malformed (an address too), `--` with no CMD, an invalid path."),
    (exit::CONFLICT, "Not held: --timeout passed, or --no-wait found it taken (--conflict-exit-code)."),
    (
        exit::LOST,
        "The claim was lost while CMD ran: session expired or cut off, node deleted (--lost-exit-code).",
    ),
    (
        exit::REVOKED,
        "Another client revoked the claim; CMD was stopped and the claim released (--revoked-exit-code).",
    ),
    (exit::ABORTED, "A two-phase commit transaction aborted."),
    (
        exit::UNAVAILABLE,
        "ZooKeeper or the daemon could not be reached, or the connection was lost before the outcome \
         was known.",
    ),
    (
        exit::FAILED,
        "Anything else that failed: ZooKeeper or the daemon refused, a recipe trapped or is missing, \
         a local I/O error.",
    ),
    (exit::CANNOT_RUN, "CMD was found but cannot be run; said before any claim is taken."),
    (exit::NOT_FOUND, "CMD was not found; said before any claim is taken."),
    (141, "stdout was closed by its reader (as SIGPIPE ends a shell tool)."),
    (128, "128 + N: signal N came before the claim was held, or while waiting for it."),
];

/// The variables read besides the options' own (which `--help` shows beside each option).
const ENVIRONMENT: &[(&str, &str)] = &[
    ("WAZOO_LOG", "What is logged to stderr, as a tracing filter (e.g. wazoo=info, debug) [default: warn; with -v, wazoo's info log and recipes' output]."),
    ("NO_COLOR", "When set and not empty, log lines carry no colour; they carry none anyway unless stderr is a terminal."),
];

/// What CMD finds in its environment under each claim command.
const CMD_ENVIRONMENT: &[(&str, &[(&str, &str)])] = &[
    (
        "lock",
        &[
            ("WAZOO_LOCK_PATH", "The lock's path."),
            ("WAZOO_LOCK_NODE", "The lock's node: `wazoo fence` and `wazoo zk rm` know it as this command's own."),
            ("WAZOO_FENCING_TOKEN", "The fencing token (the node's czxid): higher for every later holder."),
            ("WAZOO_LOCK_COUNT", "With --also: how many locks are held; WAZOO_LOCK_PATH_1, WAZOO_LOCK_NODE_1, WAZOO_FENCING_TOKEN_1, … name each."),
        ],
    ),
    (
        "rwlock",
        &[
            ("WAZOO_LOCK_PATH", "The lock's path."),
            ("WAZOO_LOCK_MODE", "read or write."),
            ("WAZOO_LOCK_NODE", "The lock's node."),
            ("WAZOO_FENCING_TOKEN", "The fencing token (the node's czxid)."),
        ],
    ),
    (
        "semaphore",
        &[
            ("WAZOO_SEMAPHORE_PATH", "The semaphore's path."),
            ("WAZOO_LEASE_NODE", "The lease's node."),
            ("WAZOO_FENCING_TOKEN", "The lease node's czxid."),
        ],
    ),
    (
        "elect",
        &[
            ("WAZOO_ELECTION_PATH", "The election's path."),
            ("WAZOO_LEADER_ID", "This participant's id."),
            ("WAZOO_LEADER_NODE", "The leader's node."),
            ("WAZOO_FENCING_TOKEN", "The leader node's czxid."),
            ("WAZOO_TERM", "With --requeue: the term, from 1."),
        ],
    ),
    ("group join", &[("WAZOO_GROUP_PATH", "The group's path."), ("WAZOO_MEMBER", "This member's name.")]),
    (
        "claim",
        &[
            ("WAZOO_<FAMILY>_PATH", "The claim's path (FAMILY in capitals, - as _)."),
            ("WAZOO_<FAMILY>_NODE", "The claim's node."),
            ("WAZOO_FENCING_TOKEN", "The claim node's czxid."),
            ("the description's data.env", "--data, for a family whose description names it."),
        ],
    ),
    ("partition", &[("WAZOO_PARTITION", "A file naming this member's items, one a line.")]),
];

/// Examples, by subcommand (as typed after `wazoo`): the command line, and what it does.
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            ("wazoo server", "Run a throwaway ZooKeeper on 127.0.0.1:2181 (for trying wazoo out)."),
            ("wazoo lock /app/locks/deploy ./deploy.sh", "Run ./deploy.sh under a lock."),
            ("wazoo serve", "Run the daemon; then `wazoo --server 127.0.0.1:7181 lock …` goes through it."),
            ("wazoo man --dir /usr/local/share/man/man1", "Install the manual pages."),
        ],
    ),
    (
        "lock",
        &[
            (
                "wazoo lock /app/locks/deploy ./deploy.sh --prod",
                "Run ./deploy.sh --prod under the lock, waiting for it as long as it takes.",
            ),
            (
                "wazoo lock /app/locks/deploy --timeout 30s -- ./deploy.sh",
                "Give up after 30 s (exit status 3); `--` before CMD is allowed.",
            ),
            (
                "wazoo lock -n --conflict-exit-code 75 /app/locks/deploy ./deploy.sh",
                "Do not wait: exit 75 if another holds it.",
            ),
            (
                "wazoo lock /db/orders --also /db/invoices ./migrate.sh",
                "Both locks or neither, taken in path order.",
            ),
            ("wazoo lock /app/locks/maintenance", "Print `held NODE token T` and hold until Ctrl-C."),
            (
                "wazoo lock --id deploy@$(hostname) /app/locks/deploy ./deploy.sh",
                "Say who holds it: `holders`, `claims` and kazoo show the id (default HOSTNAME:PID).",
            ),
        ],
    ),
    (
        "rwlock",
        &[(
            "wazoo rwlock read /app/locks/config cat /etc/app.conf",
            "Run CMD under the shared side; writers wait.",
        )],
    ),
    (
        "semaphore",
        &[
            (
                "wazoo semaphore /app/slots --leases 3 ./job.sh",
                "At most three ./job.sh at once, over every machine.",
            ),
            ("wazoo semaphore -n /app/slots --leases 3 ./job.sh", "Run now if a lease is free, else exit 3."),
        ],
    ),
    (
        "elect",
        &[
            ("wazoo elect /app/leader --id $(hostname) ./primary.sh", "Run ./primary.sh while leading."),
            ("wazoo elect --requeue /app/leader ./primary.sh", "Campaign again each time ./primary.sh ends."),
        ],
    ),
    (
        "claim",
        &[(
            "wazoo claim baton /app/batons/release --data $(hostname) ./release.sh",
            "Run ./release.sh holding the baton of a family described by baton.family.toml beside baton.wasm.",
        )],
    ),
    (
        "group join",
        &[(
            "wazoo group join /app/workers $(hostname) --data - ./work.sh < info.json",
            "Be a member (with data from stdin) while ./work.sh runs.",
        )],
    ),
    (
        "config set",
        &[
            ("wazoo config set /app/config/replicas -5", "A value may start with `-`."),
            ("wazoo config set /app/config/motd - < motd.txt", "The value from stdin."),
            (
                "wazoo config set /app/config/replicas 5 --version 3",
                "Only if still at version 3 (exit status 1 if not).",
            ),
        ],
    ),
    (
        "config get",
        &[(
            "wazoo config get --prefix /app/config",
            "Every value at /app/config and below, `PATH VALUE` a line.",
        )],
    ),
    (
        "config delete",
        &[(
            "wazoo config delete /app/config/replicas",
            "Delete the value (exit status 1 if there was none).",
        )],
    ),
    (
        "config watch",
        &[(
            "wazoo config watch /app/config/replicas",
            "`created|changed PATH VERSION VALUE` or `deleted PATH`, as `wazoo watch` prints them.",
        )],
    ),
    ("watch", &[("wazoo watch -r --initial /services", "Every node below /services, then every change.")]),
    ("zk rm", &[("wazoo zk rm /app/config/old", "Delete a node; another's claim node only with --force.")]),
    ("holders", &[("wazoo holders /app/locks/deploy", "Who holds the lock and who waits, in queue order.")]),
    (
        "claims",
        &[
            ("wazoo claims /app", "Every lock, semaphore and election under /app: who holds, who waits, since when."),
            ("wazoo --server 127.0.0.1:7181 claims --json", "The same through a daemon, as one JSON document."),
        ],
    ),
    (
        "sessions",
        &[(
            "wazoo --server 127.0.0.1:7181 sessions",
            "The daemon's client sessions and their claims; without --server, exit status 2.",
        )],
    ),
    (
        "top",
        &[
            ("wazoo top /app", "Who holds and who waits under /app, refreshed every second until q or Ctrl-C."),
            (
                "wazoo --server 127.0.0.1:7181 top --every 5s",
                "Every claim of the daemon's namespace and its client sessions, every 5 s.",
            ),
            ("wazoo top /app | grep waits", "Not on a terminal: one snapshot, then exit."),
        ],
    ),
    ("counter add", &[("wazoo counter add /app/visits -1", "Subtract one.")]),
    (
        "serve",
        &[(
            "wazoo serve --listen 127.0.0.1:7181",
            "Serve on loopback; `wazoo server` is a throwaway ZooKeeper, not this.",
        )],
    ),
    (
        "server",
        &[("wazoo server --port 2181", "A throwaway ZooKeeper; `wazoo serve` is the daemon, not this.")],
    ),
];

/// wazoo's clap command: every subcommand's long help ends with its exit statuses, environment
/// and examples, and `--version` names the WIT packages and the commit.
pub(crate) fn command() -> clap::Command {
    let root = Cli::command().long_version(LONG_VERSION);
    decorate(root, "")
}

/// `wazoo --version`: the version, the commit, and the WIT packages served.
const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("WAZOO_COMMIT"),
    ")\nWIT packages: ",
    env!("WAZOO_WIT_PACKAGES")
);

fn decorate(command: clap::Command, path: &str) -> clap::Command {
    let names: Vec<String> = command.get_subcommands().map(|s| s.get_name().to_string()).collect();
    let mut command = command.after_long_help(help_text(path));
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        command = command.mut_subcommand(&name, |sub| decorate(sub, &sub_path));
    }
    command
}

/// The subcommand path (`lock`, `config set`) of a command as clap names it (`wazoo-config-set`).
fn path_of(command: &clap::Command) -> String {
    let name = command.get_display_name().unwrap_or(command.get_name());
    name.strip_prefix("wazoo").unwrap_or(name).trim_start_matches('-').replace('-', " ")
}

fn examples(path: &str) -> &'static [(&'static str, &'static str)] {
    EXAMPLES.iter().find(|(p, _)| *p == path).map_or(&[], |(_, e)| e)
}

fn cmd_environment(path: &str) -> &'static [(&'static str, &'static str)] {
    CMD_ENVIRONMENT.iter().find(|(p, _)| *p == path).map_or(&[], |(_, e)| e)
}

/// The variables of the global options, with their help's first sentence.
fn option_environment() -> Vec<(String, String)> {
    Cli::command()
        .get_arguments()
        .filter_map(|arg| {
            let var = arg.get_env()?.to_string_lossy().into_owned();
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let flag = arg.get_long().map(|l| format!("--{l}: ")).unwrap_or_default();
            Some((var, format!("{flag}{}", first_sentence(&help))))
        })
        .collect()
}

fn first_sentence(help: &str) -> String {
    let line = help.lines().next().unwrap_or_default();
    let end = line.find("; ").unwrap_or(line.len());
    line[..end].to_string()
}

/// The whole environment of a command: CMD's, the options', and the rest.
fn environment(path: &str) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = cmd_environment(path)
        .iter()
        .map(|(var, text)| (var.to_string(), format!("(set for CMD) {text}")))
        .collect();
    all.extend(option_environment());
    all.extend(ENVIRONMENT.iter().map(|(var, text)| (var.to_string(), text.to_string())));
    all
}

/// The text after the options in `--help`.
fn help_text(path: &str) -> String {
    let mut text = String::from("Exit status:\n");
    for (code, meaning) in EXIT_STATUSES {
        text.push_str(&format!("  {code:<4} {meaning}\n"));
    }
    text.push_str("\nEnvironment:\n");
    for (var, meaning) in environment(path) {
        text.push_str(&format!("  {var}\n          {meaning}\n"));
    }
    let examples = examples(path);
    if !examples.is_empty() {
        text.push_str("\nExamples:\n");
        for (line, meaning) in examples {
            text.push_str(&format!("  {line}\n          {meaning}\n"));
        }
    }
    text
}

/// The EXIT STATUS, ENVIRONMENT and EXAMPLES sections of `command`'s manual page.
pub(crate) fn sections(command: &clap::Command) -> Roff {
    let path = path_of(command);
    let mut roff = Roff::default();
    roff.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in EXIT_STATUSES {
        roff.control("TP", []).text([bold(code.to_string())]).text([roman(*meaning)]);
    }
    roff.control("SH", ["ENVIRONMENT"]);
    for (var, meaning) in environment(&path) {
        roff.control("TP", []).text([bold(var)]).text([roman(meaning)]);
    }
    let examples = examples(&path);
    if !examples.is_empty() {
        roff.control("SH", ["EXAMPLES"]);
        for (line, meaning) in examples {
            roff.control("TP", []).text([bold(*line)]).text([roman(*meaning)]);
        }
    }
    roff
}

/// `wazoo completions SHELL`: the shell's completion script on stdout.
pub(crate) fn completions(shell: CompletionShell) -> anyhow::Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell.generator(), &mut Cli::command(), "wazoo", &mut script);
    write_stdout(&script)?;
    Ok(0)
}

/// `wazoo man [--dir DIR]`: wazoo(1) on stdout, or with `dir` every page written into it
/// (`wazoo.1`, and `wazoo-lock.1`, `wazoo-queue-put.1`, … for the subcommands), saying how many.
pub(crate) fn man(dir: Option<&std::path::Path>) -> anyhow::Result<u8> {
    let mut command = self::command().disable_help_subcommand(true);
    command.build();
    let Some(dir) = dir else {
        write_stdout(&man_page(command)?)?;
        return Ok(0);
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    /// Writes the page of `command` and of each of its visible subcommands: how many.
    fn pages(command: clap::Command, dir: &std::path::Path) -> anyhow::Result<usize> {
        let mut written = 0;
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            written += pages(sub.clone(), dir)?;
        }
        let file = dir.join(clap_mangen::Man::new(command.clone()).get_filename());
        std::fs::write(&file, man_page(command)?).with_context(|| format!("writing {}", file.display()))?;
        Ok(written + 1)
    }
    let written = pages(command, dir)?;
    out!("wrote {written} manual pages into {}", dir.display());
    Ok(0)
}

/// The manual page of `command` (wazoo's or a subcommand's, from `wazoo VERSION`) as roff, its
/// `.TH` title line first (as file(1) and man-db look for it), then the definitions
/// clap_mangen puts before it.
fn man_page(command: clap::Command) -> anyhow::Result<Vec<u8>> {
    let sections = sections(&command);
    let has_options = command.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = command.get_subcommands().any(|s| !s.is_hide_set());
    let has_version = command.get_version().is_some() || command.get_long_version().is_some();
    let page = clap_mangen::Man::new(command).source(format!("wazoo {}", env!("CARGO_PKG_VERSION")));
    // clap_mangen's own sections, then ours (its EXTRA section, the long help's text after the
    // options, is the same text as ours, so it is left out).
    let mut roff = Vec::new();
    page.render_title(&mut roff)?;
    page.render_name_section(&mut roff)?;
    page.render_synopsis_section(&mut roff)?;
    page.render_description_section(&mut roff)?;
    if has_options {
        page.render_options_section(&mut roff)?;
    }
    if has_subcommands {
        page.render_subcommands_section(&mut roff)?;
    }
    sections.to_writer(&mut roff)?;
    if has_version {
        page.render_version_section(&mut roff)?;
    }
    let text = String::from_utf8(roff).context("a manual page that is not UTF-8")?;
    let (before, title) = match text.find("\n.TH ") {
        Some(at) => text.split_at(at + 1),
        None => return Ok(text.into_bytes()),
    };
    let (title, rest) = title.split_at(title.find('\n').map_or(title.len(), |end| end + 1));
    Ok(format!("{title}{before}{rest}").into_bytes())
}

/// Writes `bytes` to stdout as they are; a reader gone away ends wazoo with status 141.
fn write_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        written => Ok(written.context("writing to stdout")?),
    }
}
