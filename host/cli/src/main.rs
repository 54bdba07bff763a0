//! The `wazoo` command line: run commands under a lock, run custom recipes, list recipes, and
//! start a local ZooKeeper for development. With `--server ADDR` the subcommands go through a
//! `wazoo serve` daemon ([`remote`]) instead of a ZooKeeper session of their own.

/// `println!` that never panics: a reader that went away ends wazoo with status 141, as SIGPIPE
/// ends a shell tool ([`show::emit`]).
macro_rules! out {
    () => {
        $crate::show::emit("")
    };
    ($($arg:tt)*) => {
        $crate::show::emit(&format!($($arg)*))
    };
}

mod args;
mod backend;
mod claims;
mod commands;
mod exit;
mod local;
mod remote;
mod scaffold;
mod show;
mod supervise;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use tokio::signal::unix::{signal, SignalKind};

use args::{HoldArgs, WaitArgs};
use claims::interrupted;
use supervise::{Signals, Supervised};
use wazoo_runtime::{
    Host, HostConfig, KeeperConfig, Mode, RecipeError, Registry, SandboxLimits, World, ZkError,
};
use wazoo_testkit::{ServerOptions, ZkServer};

#[derive(Parser)]
#[command(
    name = "wazoo",
    version,
    about = "ZooKeeper coordination recipes as sandboxed WebAssembly components"
)]
struct Cli {
    /// ZooKeeper to use: host:port[,host:port…][/chroot]
    #[arg(long, global = true, env = "WAZOO_ZOOKEEPER", default_value = "127.0.0.1:2181")]
    zookeeper: String,
    /// Directory holding the recipe components (<name>.wasm)
    #[arg(long, global = true, env = "WAZOO_PLUGINS", default_value = "plugins")]
    plugins: PathBuf,
    /// ZooKeeper session timeout (e.g. 500ms, 10s, 1m); with --server, the client session's TTL
    #[arg(long, global = true, env = "WAZOO_SESSION_TIMEOUT", default_value = "10s", value_parser = args::session_timeout)]
    session_timeout: Duration,
    /// How long to try to reach ZooKeeper (with --server, the daemon) before giving up
    #[arg(long, global = true, env = "WAZOO_CONNECT_TIMEOUT", default_value = "10s", value_parser = args::positive_duration)]
    connect_timeout: Duration,
    /// Go through the `wazoo serve` daemon at ADDR (host:port) instead of opening a ZooKeeper
    /// session; --zookeeper, --plugins and --cache are then the daemon's business
    #[arg(long, global = true, env = "WAZOO_SERVER", value_name = "ADDR")]
    server: Option<String>,
    /// With --server: the tenant's API token, sent as `authorization: Bearer TOKEN` (a daemon
    /// serving --tenants refuses calls without a known one)
    #[arg(long, global = true, env = "WAZOO_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Private directory for compiled components [default: $XDG_CACHE_HOME/wazoo/components,
    /// else ~/.cache/wazoo/components]; `none` compiles on every start
    #[arg(long, global = true, env = "WAZOO_CACHE")]
    cache: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run CMD while holding the lock at PATH (Curator-compatible); stop it if the lock is lost.
    /// Without CMD: print `held NODE token TOKEN` and hold until SIGINT, SIGTERM or SIGHUP
    Lock {
        /// Lock path, e.g. /app/locks/deploy
        path: String,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Lock recipe component: a name in the plugins directory or a .wasm path
        #[arg(long, default_value = World::Lock.default_recipe())]
        recipe: String,
        /// The command and its arguments, after `--`
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD while holding the read or write lock at PATH (Curator InterProcessReadWriteLock);
    /// without CMD, hold it until a signal
    Rwlock {
        /// read (shared) or write (exclusive)
        #[arg(value_parser = parse_mode)]
        mode: Mode,
        /// Lock path, e.g. /app/locks/config
        path: String,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Read/write lock recipe component
        #[arg(long, default_value = World::RwLock.default_recipe())]
        recipe: String,
        /// The command and its arguments, after `--`
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD while holding one of N leases at PATH (Curator InterProcessSemaphoreV2); without
    /// CMD, hold it until a signal
    Semaphore {
        /// Semaphore path, e.g. /app/slots
        path: String,
        /// How many holders at once, 1 or more (every participant must agree)
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        leases: u32,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Semaphore recipe component
        #[arg(long, default_value = World::Semaphore.default_recipe())]
        recipe: String,
        /// The command and its arguments, after `--`
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD while this process leads the election at PATH (Curator LeaderLatch); stop it on
    /// loss. Without CMD, lead until a signal
    Elect {
        /// Election path, e.g. /app/election
        path: String,
        /// This participant's id, shown to observers (default: hostname-pid)
        #[arg(long, value_parser = args::participant_id)]
        id: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Election recipe component
        #[arg(long, default_value = World::Election.default_recipe())]
        recipe: String,
        /// The command and its arguments, after `--`
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// List the holders and waiters of the lock, read/write lock, semaphore or election at PATH,
    /// in queue order, with their data, session and fencing token (exit status 1 if none)
    Holders {
        path: String,
        /// lock, rwlock, semaphore or election [default: told by the node names]
        #[arg(long)]
        kind: Option<wazoo_runtime::holders::Kind>,
        /// A semaphore's lease count: the first N lease nodes hold [default: every lease node
        /// but a waiting one]
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        leases: Option<u32>,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Print the current leader of the election at PATH without contending
    Leader {
        /// Election path
        path: String,
        /// Keep printing each new leader until interrupted
        #[arg(long)]
        watch: bool,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
        /// Election recipe component
        #[arg(long, default_value = World::Election.default_recipe())]
        recipe: String,
    },
    /// Queue at PATH: put items, take them (each goes to exactly one consumer), count them
    Queue {
        #[command(subcommand)]
        command: QueueCommand,
    },
    /// Group membership at PATH: join it while CMD runs, list it, watch it
    Group {
        #[command(subcommand)]
        command: GroupCommand,
    },
    /// Configuration / name service values: get, set (compare-and-set with --version), watch
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Shared counter (kazoo Counter format): print it, or add to it atomically
    Counter {
        #[command(subcommand)]
        command: CounterCommand,
    },
    /// Run CMD between entering and leaving the double barrier at PATH with N participants
    DoubleBarrier {
        path: String,
        /// Participants that must enter before anyone proceeds, 1 or more
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
        /// Give up entering (or leaving) after this long (exit status 3)
        #[arg(long, value_parser = args::duration)]
        timeout: Option<Duration>,
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Two-phase commit: coordinate a transaction, vote in one as a site, or clean a finished one
    #[command(name = "2pc")]
    TwoPhaseCommit {
        #[command(subcommand)]
        command: TxCommand,
    },
    /// Fencing tokens (a claim node's czxid): check one, or write a value guarded by one
    Fence {
        #[command(subcommand)]
        command: FenceCommand,
    },
    /// Barrier at PATH (kazoo-compatible): set it up, remove it, or wait until it is down
    Barrier {
        #[command(subcommand)]
        command: BarrierCommand,
    },
    /// Ask the holder of lock NODE to let go (sets `__REVOKE__`); with --grace, delete it after
    Revoke {
        /// The holder's node, e.g. as printed in WAZOO_LOCK_NODE
        node: String,
        /// Delete the node if the holder has not released within this time
        #[arg(long, value_parser = args::duration)]
        grace: Option<Duration>,
    },
    /// Run a local ZooKeeper (Debian's package) in the foreground until interrupted
    Server {
        /// Client port on 127.0.0.1
        #[arg(long, default_value_t = 2181)]
        port: u16,
        /// Data directory (default: a temporary one, removed on exit)
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// ZooKeeper tickTime in ms, 1–60000 (sessions may last 2–20 ticks)
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=60_000))]
        tick_ms: u32,
    },
    /// Recipe components in the plugins directory
    Recipes {
        #[command(subcommand)]
        command: RecipesCommand,
    },
    /// Run a custom recipe component (world wazoo:recipes/custom) with ARGS
    Run {
        /// A name in the plugins directory or a .wasm path
        component: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Start a recipe of your own: a buildable template in Rust, Python or JavaScript
    New {
        #[command(subcommand)]
        command: NewCommand,
    },
    /// Call any exported function of any recipe (FUNCTION like lock.acquire; see `recipes
    /// functions`) with ARGS, a JSON array or object; prints the result as JSON. Exit status 1
    /// if the result is {"err": …}. Without --server the instance ends with the call, deleting
    /// its ephemeral nodes
    Call {
        /// A name in the plugins directory or a .wasm path
        recipe: String,
        /// lock.acquire, wazoo:recipes/lock@0.1.0#acquire, or a bare name only one export has
        function: String,
        /// Arguments: a JSON array (positional) or object (by parameter name)
        #[arg(default_value = "[]")]
        args: String,
    },
    /// Run the long-lived host: recipes over gRPC (host/proto/wazoo.proto), the plugins directory
    /// watched and changed components swapped in, Prometheus metrics
    Serve {
        /// gRPC address
        #[arg(long, default_value = "127.0.0.1:7181")]
        listen: std::net::SocketAddr,
        /// Prometheus address (GET /metrics); `off` for none
        #[arg(long, default_value = "127.0.0.1:9181")]
        metrics: String,
        /// The plugins directory is watched (inotify); it is also looked at this often, in case
        /// a change event was missed
        #[arg(long, default_value = "5s", value_parser = args::watch_every)]
        watch_every: Duration,
        /// Serve these tenants (a JSON file: see README, "Tenants"), each with its own token,
        /// ZooKeeper session and identity, namespace, recipes and limits, instead of one host
        /// open to every client
        #[arg(long)]
        tenants: Option<PathBuf>,
    },
    /// Start a local ZooKeeper and show two contenders taking turns on a lock
    Demo {
        /// Lock rounds per contender, 1–1000
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
        rounds: u32,
    },
}

#[derive(Subcommand)]
enum QueueCommand {
    /// Append DATA (prints the item's node)
    Put {
        path: String,
        data: String,
        /// 0–99, lower first (priority queue)
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=99))]
        priority: Option<u8>,
        /// The item vanishes when this process's session ends (the seed's ephemeral items)
        #[arg(long)]
        ephemeral: bool,
    },
    /// Remove the head item and print its data (exit status 3 if none within --timeout)
    Take {
        path: String,
        #[arg(long, value_parser = args::duration)]
        timeout: Option<Duration>,
    },
    /// Print how many items are queued
    Len {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
}

impl QueueCommand {
    fn path(&self) -> &str {
        match self {
            QueueCommand::Put { path, .. }
            | QueueCommand::Take { path, .. }
            | QueueCommand::Len { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
enum GroupCommand {
    /// Be member NAME of the group at PATH while CMD runs (CMD is stopped if membership is
    /// lost); without CMD, until a signal
    Join {
        path: String,
        name: String,
        /// The member's data, shown to others
        #[arg(long, default_value = "")]
        data: String,
        #[command(flatten)]
        hold: HoldArgs,
        #[arg(last = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Print the members, one `NAME DATA` line each (exit status 1 if none)
    List {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Print the members again on every change (then `--`), until interrupted
    Watch {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
}

impl GroupCommand {
    fn path(&self) -> &str {
        match self {
            GroupCommand::Join { path, .. }
            | GroupCommand::List { path, .. }
            | GroupCommand::Watch { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the value (exit status 1 if there is none)
    Get {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Write VALUE and print the new version; with --version, only if still at that version
    Set {
        path: String,
        value: String,
        /// Only if the value is still at this version (0 or more)
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        version: Option<i32>,
    },
    /// Print the value and version on every change, until interrupted
    Watch {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
}

impl ConfigCommand {
    fn path(&self) -> &str {
        match self {
            ConfigCommand::Get { path, .. }
            | ConfigCommand::Set { path, .. }
            | ConfigCommand::Watch { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
enum CounterCommand {
    /// Print the counter
    Get {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Add DELTA atomically and print the new value
    Add {
        path: String,
        #[arg(allow_hyphen_values = true)]
        delta: i64,
    },
}

impl CounterCommand {
    fn path(&self) -> &str {
        match self {
            CounterCommand::Get { path, .. } | CounterCommand::Add { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
enum TxCommand {
    /// Start transaction TX over SITES and print its outcome (exit status 6 if aborted)
    Coordinate {
        tx: String,
        /// Comma-separated site names, each once
        #[arg(long, value_delimiter = ',', required = true, value_parser = args::node_name)]
        sites: Vec<String>,
        /// The transaction's payload, read by the sites
        #[arg(long, default_value = "")]
        payload: String,
        /// all-to-all (every site watches every vote) or coordinated (only the coordinator does)
        #[arg(long, default_value = "coordinated", value_parser = parse_tx_mode)]
        mode: wazoo_runtime::TxMode,
        /// Abort if not every site has voted within this time
        #[arg(long, default_value = "60s", value_parser = args::duration)]
        timeout: Duration,
    },
    /// Vote commit or abort in TX as SITE and print the outcome (exit status 6 if aborted); the
    /// site decides abort if no outcome comes within --timeout, or once the coordinator is gone
    Vote {
        tx: String,
        #[arg(long)]
        site: String,
        #[arg(value_parser = parse_ballot)]
        ballot: wazoo_runtime::Ballot,
        #[arg(long, default_value = "60s", value_parser = args::duration)]
        timeout: Duration,
    },
    /// Delete finished transaction TX and print `cleaned TX: OUTCOME`: one with a decision, or
    /// one whose coordinator is gone (decided aborted first). Exit status 1 while in progress
    Clean { tx: String },
}

impl TxCommand {
    fn tx(&self) -> &str {
        match self {
            TxCommand::Coordinate { tx, .. } | TxCommand::Vote { tx, .. } | TxCommand::Clean { tx } => tx,
        }
    }
}

#[derive(Subcommand)]
enum FenceCommand {
    /// Exit status 0 if claim node NODE still exists with fencing token TOKEN; else 1, saying why
    Check {
        /// The holder's node, e.g. as printed in WAZOO_LOCK_NODE
        node: String,
        /// Its fencing token, e.g. WAZOO_FENCING_TOKEN
        #[arg(id = "fencing-token", value_name = "TOKEN", value_parser = parse_token, allow_hyphen_values = true)]
        token: i64,
    },
    /// Write VALUE to PATH for the holder of NODE with TOKEN, in one multi: only while NODE
    /// exists with TOKEN, and only if PATH was not written with a higher token (exit status 1)
    Write {
        /// The holder's node
        node: String,
        /// Its fencing token
        #[arg(id = "fencing-token", value_name = "TOKEN", value_parser = parse_token, allow_hyphen_values = true)]
        token: i64,
        /// The protected node; its data becomes `TOKEN`, a newline, then VALUE
        path: String,
        /// The value to write
        value: String,
    },
}

impl FenceCommand {
    /// The paths it names, each with what it is for messages.
    fn paths(&self) -> Vec<(&'static str, &str)> {
        match self {
            FenceCommand::Check { node, .. } => vec![("node", node)],
            FenceCommand::Write { node, path, .. } => vec![("node", node), ("fenced", path)],
        }
    }
}

#[derive(Subcommand)]
enum BarrierCommand {
    /// Put the barrier up (creating missing parents)
    Set { path: String },
    /// Take the barrier down, releasing every waiter
    Remove { path: String },
    /// Block until the barrier is down (exit status 3 if still up after --timeout)
    Wait {
        path: String,
        #[arg(long, value_parser = args::duration)]
        timeout: Option<Duration>,
    },
}

impl BarrierCommand {
    fn path(&self) -> &str {
        match self {
            BarrierCommand::Set { path }
            | BarrierCommand::Remove { path }
            | BarrierCommand::Wait { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
enum NewCommand {
    /// Write a recipe template (world wazoo:recipes/custom: waits for a znode and prints its
    /// data) into DIR, with its build script and a copy of the WIT
    Recipe {
        /// The recipe's name: the plugin is NAME.wasm
        name: String,
        #[arg(long, value_enum, default_value = "rust")]
        lang: scaffold::Lang,
        /// Where to write it [default: ./NAME]
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum RecipesCommand {
    /// List components with the world each implements
    List {
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// The functions RECIPE exports, with their WIT types, as `wazoo call` names them
    Functions {
        /// A name in the plugins directory or a .wasm path
        recipe: String,
    },
}

fn main() -> ExitCode {
    if let Some(code) = supervise::guard_mode() {
        return code;
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("WAZOO_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("wazoo: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("wazoo: {e:#}");
            ExitCode::from(exit::code_of(&e))
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    // Scaffolding asks neither ZooKeeper nor a daemon.
    if let Command::New { command: NewCommand::Recipe { name, lang, dir } } = &cli.command {
        let dir = dir.clone().unwrap_or_else(|| PathBuf::from(name));
        let written = scaffold::new_recipe(name, *lang, &dir)?;
        out!("wrote {} files into {}; see {}", written.len(), dir.display(), dir.join("README.md").display());
        return Ok(0);
    }
    if let Some(server) = &cli.server {
        return remote::run(server, cli.token.clone(), cli.session_timeout, cli.connect_timeout, cli.command)
            .await;
    }
    let config = HostConfig {
        keeper: KeeperConfig {
            zookeeper: cli.zookeeper.clone(),
            session_timeout: cli.session_timeout,
            connect_timeout: cli.connect_timeout,
            digest: None,
        },
        plugins: cli.plugins.clone(),
        limits: SandboxLimits::default(),
        allowed: None,
        cache: match &cli.cache {
            Some(dir) if dir.as_os_str() == "none" => None,
            Some(dir) => Some(dir.clone()),
            None => wazoo_runtime::registry::default_cache_dir(),
        },
    };
    let local = local::Local::new(config.clone());
    if let Some((asked, run)) = asked(&cli.command) {
        return claims::claim(&local, asked, run).await;
    }
    match cli.command {
        Command::Lock { .. } | Command::Rwlock { .. } | Command::Semaphore { .. } | Command::Elect { .. } => {
            unreachable!("claim commands: see asked")
        }
        Command::Holders { path, kind, leases, json } => holders(config, &path, kind, leases, json).await,
        Command::Leader { path, watch, recipe, json } => leader(config, &path, watch, &recipe, json).await,
        Command::Barrier { command } => barrier(config, command).await,
        Command::TwoPhaseCommit { command } => two_phase_commit(config, command).await,
        Command::Fence { command } => fence(config, command).await,
        Command::DoubleBarrier { path, count, timeout, command } => {
            double_barrier(config, &path, count, timeout, &command).await
        }
        Command::Queue { command } => commands::queue(&local, command).await,
        Command::Group { command } => commands::group(&local, command).await,
        Command::Config { command } => commands::config(&local, command).await,
        Command::Counter { command } => commands::counter(&local, command).await,
        Command::Revoke { node, grace } => revoke(config, &node, grace).await,
        Command::Server { port, data_dir, tick_ms } => server(port, data_dir, tick_ms).await,
        Command::Recipes { command: RecipesCommand::List { json } } => recipes_list(&config, json),
        Command::Recipes { command: RecipesCommand::Functions { recipe } } => {
            recipe_functions(&config, &recipe)
        }
        Command::Call { recipe, function, args } => call(config, &recipe, &function, &args).await,
        Command::New { .. } => unreachable!("handled before a session is opened"),
        Command::Run { component, args } => run_custom(config, &component, &args).await,
        Command::Demo { rounds } => demo(&cli.plugins, rounds).await,
        Command::Serve { listen, metrics, watch_every, tenants } => {
            serve(config, listen, &metrics, watch_every, tenants.as_deref()).await
        }
    }
}

/// The claim a claim command asks for, and how it runs CMD under it ([`claims::claim`]); none
/// for the other commands.
fn asked(command: &Command) -> Option<(claims::Asked<'_>, claims::Run<'_>)> {
    use wazoo_runtime::Want;
    let (want, path, recipe, wait, hold, command) = match command {
        Command::Lock { path, wait, hold, recipe, command } => {
            (Want::Lock, path, recipe.as_str(), Some(wait), hold, command)
        }
        Command::Rwlock { mode, path, wait, hold, recipe, command } => {
            (Want::ReadWrite(*mode), path, recipe.as_str(), Some(wait), hold, command)
        }
        Command::Semaphore { path, leases, wait, hold, recipe, command } => {
            (Want::Lease { max_leases: *leases }, path, recipe.as_str(), Some(wait), hold, command)
        }
        Command::Elect { path, id, wait, hold, recipe, command } => {
            let id = id.clone().unwrap_or_else(default_id);
            (Want::Leadership { id }, path, recipe.as_str(), Some(wait), hold, command)
        }
        Command::Group { command: GroupCommand::Join { path, name, data, hold, command } } => {
            let want = Want::Membership { name: name.clone(), data: data.clone().into_bytes() };
            (want, path, World::Group.default_recipe(), None, hold, command)
        }
        _ => return None,
    };
    Some((claims::Asked { want, path, recipe }, claims::Run { wait, hold, command }))
}

/// `wazoo serve`: prints `serving gRPC on ADDR` (and the metrics address) once clients can
/// connect; stops on SIGINT or SIGTERM, closing every client's handles.
async fn serve(
    config: HostConfig,
    listen: std::net::SocketAddr,
    metrics: &str,
    watch_every: Duration,
    tenants: Option<&std::path::Path>,
) -> anyhow::Result<u8> {
    let metrics = match metrics {
        "off" | "none" => None,
        addr => Some(addr.parse().with_context(|| format!("--metrics: not an address: {addr:?}"))?),
    };
    let tenants_file = tenants;
    let specs = tenants.map(wazoo_daemon::tenants::load).transpose()?;
    let settings = wazoo_daemon::serve::ServeConfig { listen, metrics, watch_every };
    let ready = |grpc: std::net::SocketAddr, metrics: Option<std::net::SocketAddr>| match metrics {
        Some(m) => out!("serving gRPC on {grpc}, metrics on http://{m}/metrics"),
        None => out!("serving gRPC on {grpc}"),
    };
    let shutdown = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    };
    match specs {
        Some(specs) => {
            let mut tenants = Vec::new();
            for spec in &specs {
                tenants.push(wazoo_daemon::tenants::start(spec, &config).await?);
            }
            let file = tenants_file.expect("specs come from the file").to_path_buf();
            let (changes, applied) = tokio::sync::mpsc::channel(16);
            tokio::spawn(reload_tenants_on_sighup(file, specs, config, changes));
            wazoo_daemon::serve::run_tenants(tenants, settings, applied, ready, shutdown).await?
        }
        None => {
            // A client names recipes of the plugins directory, never a file of the host's.
            let config = HostConfig { allowed: Some(vec!["*".to_string()]), ..config };
            wazoo_daemon::serve::run(Host::start(config).await?, settings, ready, shutdown).await?
        }
    }
    Ok(0)
}

/// On every SIGHUP, reads the tenants file again and sends the daemon what changed: new and
/// changed tenants (started first, so a bad one changes nothing) and removed ones. A file that
/// does not parse, or a tenant that cannot start, is logged and the tenants stay as they were.
async fn reload_tenants_on_sighup(
    file: PathBuf,
    mut current: Vec<wazoo_daemon::tenants::TenantSpec>,
    base: HostConfig,
    changes: tokio::sync::mpsc::Sender<wazoo_daemon::serve::TenantChange>,
) {
    use wazoo_daemon::serve::TenantChange;
    let Ok(mut hup) = signal(SignalKind::hangup()) else { return };
    while hup.recv().await.is_some() {
        let specs = match wazoo_daemon::tenants::load(&file) {
            Ok(specs) => specs,
            Err(e) => {
                tracing::warn!("tenants not reloaded: {e:#}");
                continue;
            }
        };
        let mut started = Vec::new();
        let mut failed = false;
        for spec in specs.iter().filter(|s| !current.contains(s)) {
            match wazoo_daemon::tenants::start(spec, &base).await {
                Ok(t) => started.push(t),
                Err(e) => {
                    tracing::warn!("tenants not reloaded: {e:#}");
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            continue;
        }
        let removed: Vec<String> = current
            .iter()
            .filter(|c| !specs.iter().any(|s| s.name == c.name))
            .map(|c| c.name.clone())
            .collect();
        for name in removed {
            let _ = changes.send(TenantChange::Remove(name)).await;
        }
        for tenant in started {
            let _ = changes.send(TenantChange::Put(tenant)).await;
        }
        tracing::info!("tenants reloaded from {}", file.display());
        current = specs;
    }
}

async fn revoke(config: HostConfig, node: &str, grace: Option<Duration>) -> anyhow::Result<u8> {
    check_path("node", node)?;
    let host = Host::start(config).await?;
    let mut handle = host.lock(World::Lock.default_recipe()).await?;
    let released =
        handle.revoke(node, grace).await.map_err(|e| exit::recipe(format!("revoking {node}"), e))?;
    out!("{}", if released { "released" } else { "forced" });
    handle.close().await;
    Ok(0)
}

async fn leader(config: HostConfig, path: &str, watch: bool, recipe: &str, json: bool) -> anyhow::Result<u8> {
    /// How long one `observe` call blocks before the watch goes on with another (each call's
    /// guest CPU is limited).
    const OBSERVE_CALL: Duration = Duration::from_secs(60);
    check_election(path)?;
    let host = Host::start(config).await?;
    let mut handle = host.election(recipe).await?;
    let mut current =
        handle.leader(path).await.map_err(|e| exit::recipe(format!("reading the leader of {path}"), e))?;
    loop {
        let shown = current.as_ref().map(|l| show::Leader {
            id: &l.id,
            token: l.token,
            node: &l.node,
            acknowledged: l.acknowledged.as_deref(),
        });
        show::leader(json, shown);
        if !watch {
            return Ok(if current.is_some() { 0 } else { no_leader(path) });
        }
        let known = current.as_ref().map(wazoo_runtime::ElectionHandle::seen);
        current = loop {
            match handle.observe(path, known.as_deref(), Some(OBSERVE_CALL)).await {
                Err(RecipeError::Zk(ZkError::Timeout)) => continue,
                other => {
                    break other.map_err(|e| exit::recipe(format!("watching the leader of {path}"), e))?
                }
            }
        };
    }
}

/// `leader` found nobody leading: exit status 1.
fn no_leader(path: &str) -> u8 {
    eprintln!("wazoo: nobody leads {path}");
    exit::NOTHING
}

/// `wazoo leader` reads any election path, even one of a single component.
fn check_election(path: &str) -> anyhow::Result<()> {
    wazoo_runtime::paths::check(path).map_err(|why| exit::usage(format!("invalid election path: {why}")))
}

/// `wazoo holders`: on a ZooKeeper session of this process's own, no recipe.
async fn holders(
    config: HostConfig,
    path: &str,
    kind: Option<wazoo_runtime::holders::Kind>,
    leases: Option<u32>,
    json: bool,
) -> anyhow::Result<u8> {
    check_path("claim", path)?;
    let keeper = wazoo_runtime::keeper::Keeper::connect(config.keeper).await?;
    let live = keeper.live().await?;
    let found = wazoo_runtime::holders::read(&live.client, path, kind, leases)
        .await
        .map_err(|e| exit::recipe(format!("holders of {path}"), RecipeError::Zk(e)))?;
    let rows = found.contenders.iter().map(|c| show::Contender {
        holds: c.state == wazoo_runtime::holders::State::Holds,
        node: &c.node,
        mode: c.mode.map(mode_name),
        token: c.token,
        session: c.session,
        data: &c.data,
    });
    show::contenders(json, found.kind.name(), rows);
    Ok(if found.contenders.is_empty() { no_holders(path) } else { 0 })
}

/// `holders` found nobody holding or waiting: exit status 1.
fn no_holders(path: &str) -> u8 {
    eprintln!("wazoo: nobody holds or waits at {path}");
    exit::NOTHING
}

/// `group list` found no members: exit status 1.
fn no_members(path: &str) -> u8 {
    eprintln!("wazoo: group {path} has no members");
    exit::NOTHING
}

/// `config get` found nothing: exit status 1.
fn no_value(path: &str) -> u8 {
    eprintln!("wazoo: no value at {path}");
    exit::NOTHING
}

/// `config set --version N` found another version: exit status 1.
fn stale_version(path: &str, version: Option<i32>) -> u8 {
    eprintln!("wazoo: {path} is no longer at version {}", version.unwrap_or(-1));
    exit::NOTHING
}

/// A taken queue item's data, as it is, and a newline.
fn print_item(data: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout();
    out.write_all(data)?;
    out.write_all(b"\n")?;
    Ok(())
}

async fn double_barrier(
    config: HostConfig,
    path: &str,
    count: u32,
    timeout: Option<Duration>,
    command: &[String],
) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;
    check_path("barrier", path)?;
    let what = format!("double barrier {path}");
    let host = match signals.interrupt(Host::start(config)).await {
        Ok(host) => host?,
        Err(caught) => return Ok(interrupted(caught, &what)),
    };
    let mut handle = host.barrier(World::Barrier.default_recipe()).await?;
    match signals.interrupt(handle.enter(path, count, timeout)).await {
        Err(caught) => {
            handle.close().await;
            eprintln!("wazoo: {} while entering the {what}; left it", caught.name());
            return Ok(caught.status());
        }
        Ok(Ok(())) => {}
        Ok(Err(RecipeError::Zk(ZkError::Timeout))) => return Ok(few_entered(path, count, timeout)),
        Ok(Err(e)) => return Err(exit::recipe(format!("entering the {what}"), e)),
    }
    let status = match run_between(path, command, &mut signals).await {
        Ok(status) => status,
        Err(e) => {
            handle.close().await;
            return Err(e);
        }
    };
    match signals.interrupt(handle.leave_double(timeout)).await {
        Err(caught) => {
            handle.close().await;
            eprintln!("wazoo: {} while leaving the {what}; left it", caught.name());
            return Ok(caught.status());
        }
        Ok(Ok(())) => {}
        Ok(Err(RecipeError::Zk(ZkError::Timeout))) => return Ok(few_left(path, timeout)),
        Ok(Err(e)) => return Err(exit::recipe(format!("leaving the {what}"), e)),
    }
    handle.close().await;
    Ok(status)
}

/// Runs a double barrier's command once inside, supervised as a claim's command is (its own
/// process group or cgroup, gone with wazoo, signals forwarded to all of it); what it leaves
/// running is stopped before the participant leaves. Its exit status.
async fn run_between(path: &str, command: &[String], signals: &mut Signals) -> anyhow::Result<u8> {
    let mut cmd = Supervised::spawn(command, &[("WAZOO_BARRIER_PATH", path.to_string())])?;
    let status = loop {
        tokio::select! {
            status = cmd.wait() => break status,
            caught = signals.recv() => cmd.forward(caught),
        }
    };
    if cmd.remains() {
        eprintln!("wazoo: the command left processes running; stopping them before leaving {path}");
        cmd.stop(BETWEEN_GRACE).await;
    }
    cmd.finish().await;
    let status = status.map_err(|e| anyhow::anyhow!("waiting for the command: {e}"))?;
    Ok(exit_status(status))
}

/// How long what a double barrier's command left running has after SIGTERM.
const BETWEEN_GRACE: Duration = Duration::from_secs(2);

/// A process's exit status as a shell reports it: its code, or 128 + the signal that ended it.
fn exit_status(status: std::process::ExitStatus) -> u8 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)).clamp(0, 255) as u8
}

/// Entering a double barrier timed out: exit status 3.
fn few_entered(path: &str, count: u32, timeout: Option<Duration>) -> u8 {
    eprintln!("wazoo: fewer than {count} entered {path} within {}", args::human(timeout.unwrap_or_default()));
    exit::CONFLICT
}

/// Leaving a double barrier timed out: exit status 3.
fn few_left(path: &str, timeout: Option<Duration>) -> u8 {
    eprintln!("wazoo: not everyone left {path} within {}", args::human(timeout.unwrap_or_default()));
    exit::CONFLICT
}

async fn two_phase_commit(config: HostConfig, command: TxCommand) -> anyhow::Result<u8> {
    let tx = command.tx().to_string();
    check_tx(&command)?;
    let host = Host::start(config).await?;
    if let TxCommand::Clean { .. } = command {
        let mut handle = host.dynamic(World::Transaction.default_recipe()).await?;
        let result = handle.call(TX_CLEAN, &serde_json::json!([tx])).await;
        handle.close().await;
        return tx_cleaned(&tx, &result.map_err(|e| exit::recipe(format!("transaction {tx}"), e))?);
    }
    let mut handle = host.transaction(World::Transaction.default_recipe()).await?;
    let outcome = match command {
        TxCommand::Coordinate { sites, payload, mode, timeout, .. } => {
            handle.coordinate(&tx, &sites, payload.as_bytes(), mode, Some(timeout)).await
        }
        TxCommand::Vote { site, ballot, timeout, .. } => handle.vote(&tx, &site, ballot, Some(timeout)).await,
        TxCommand::Clean { .. } => unreachable!("cleaned above"),
    }
    .map_err(|e| exit::recipe(format!("transaction {tx}"), e))?;
    handle.close().await;
    Ok(tx_outcome(matches!(outcome, wazoo_runtime::Outcome::Committed)))
}

/// A transaction's path and sites, checked before anything is asked: each site named once.
fn check_tx(command: &TxCommand) -> anyhow::Result<()> {
    check_path("transaction", command.tx())?;
    if let TxCommand::Coordinate { sites, .. } = command {
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = sites.iter().find(|site| !seen.insert(site.as_str())) {
            return Err(exit::usage(format!("--sites: {twice:?} is named twice")));
        }
    }
    Ok(())
}

/// The transaction recipe's export that `2pc clean` calls (by name, as `wazoo call` does).
const TX_CLEAN: &str = "two-phase-commit.clean";

/// What `2pc clean` says for the recipe's JSON answer: `cleaned TX: OUTCOME` (exit status 0),
/// or why nothing was cleaned (exit status 1).
fn tx_cleaned(tx: &str, result: &serde_json::Value) -> anyhow::Result<u8> {
    use serde_json::Value;
    if let Some(outcome) = result.get("ok").and_then(Value::as_str) {
        out!("cleaned {tx}: {outcome}");
        return Ok(0);
    }
    let Some(error) = result.get("err") else { bail!("transaction {tx}: unexpected answer {result}") };
    match error {
        Value::String(name) if name == "no-node" => eprintln!("wazoo: no transaction at {tx}"),
        Value::Object(error) => match error.iter().next() {
            Some((name, Value::String(why))) if name == "invalid-argument" => {
                eprintln!("wazoo: cannot clean {tx}: {why}")
            }
            Some((name, Value::String(why))) => eprintln!("wazoo: cannot clean {tx}: {name}: {why}"),
            _ => eprintln!("wazoo: cannot clean {tx}: {error:?}"),
        },
        other => eprintln!("wazoo: cannot clean {tx}: {}", other.as_str().unwrap_or("unknown error")),
    }
    Ok(1)
}

/// Prints a transaction's outcome: exit status 0 if committed, 6 if aborted.
fn tx_outcome(committed: bool) -> u8 {
    if committed {
        out!("committed");
        0
    } else {
        out!("aborted");
        exit::ABORTED
    }
}

fn parse_tx_mode(text: &str) -> Result<wazoo_runtime::TxMode, String> {
    match text {
        "all-to-all" => Ok(wazoo_runtime::TxMode::AllToAll),
        "coordinated" => Ok(wazoo_runtime::TxMode::Coordinated),
        _ => Err(format!("expected all-to-all or coordinated, not {text:?}")),
    }
}

/// `fence check|write`, on a ZooKeeper session of this process's own.
async fn fence(config: HostConfig, command: FenceCommand) -> anyhow::Result<u8> {
    for (kind, path) in command.paths() {
        check_path(kind, path)?;
    }
    let keeper = wazoo_runtime::keeper::Keeper::connect(config.keeper).await?;
    let live = keeper.live().await?;
    let fence = wazoo_runtime::fence::Fence {
        client: &live.client,
        acls: zookeeper_client::Acls::anyone_all(),
        max_bytes: config.limits.max_data_bytes,
    };
    let code = match command {
        FenceCommand::Check { node, token } => {
            let holder = fence.check(&node, token).await.map_err(|e| fence_failed(&node, &e))?;
            fence_checked(&node, token, holder)
        }
        FenceCommand::Write { node, token, path, value } => {
            let written = fence
                .write(&node, token, &path, value.as_bytes())
                .await
                .map_err(|e| fence_failed(&path, &e))?;
            fence_written(&node, token, &path, written)
        }
    };
    Ok(code)
}

/// A fenced check or write that could not be made.
fn fence_failed(path: &str, e: &ZkError) -> anyhow::Error {
    exit::Exit {
        code: exit::zk_code(e),
        message: format!("fence {path}: {}", wazoo_runtime::error::describe(e)),
    }
    .into()
}

/// What `fence check` says: exit status 0 if `node` still has `token`, else 1 and why.
fn fence_checked(node: &str, token: i64, holder: wazoo_runtime::fence::Holder) -> u8 {
    use wazoo_runtime::fence::Holder;
    match holder {
        Holder::Holds => {
            out!("{node} holds token {token}");
            0
        }
        Holder::Gone => {
            eprintln!("wazoo: {node} is gone: token {token} no longer holds");
            1
        }
        Holder::OtherToken(other) => {
            eprintln!("wazoo: {node} has token {other}, not {token}");
            1
        }
    }
}

/// What `fence write` says: `written PATH version V token T` (exit status 0), or why the write
/// was refused (exit status 1).
fn fence_written(node: &str, token: i64, path: &str, written: wazoo_runtime::fence::Written) -> u8 {
    use wazoo_runtime::fence::Written;
    match written {
        Written::Accepted { version, previous } => {
            let was = previous.map(|p| format!(" (was token {p})")).unwrap_or_default();
            out!("written {path} version {version} token {token}{was}");
            return 0;
        }
        Written::Gone => eprintln!("wazoo: refused: {node} is gone: token {token} no longer holds"),
        Written::OtherToken(other) => eprintln!("wazoo: refused: {node} has token {other}, not {token}"),
        Written::Superseded { last } => {
            eprintln!("wazoo: refused: {path} was written with token {last}, above {token}")
        }
    }
    1
}

/// A fencing token: an integer, as `WAZOO_FENCING_TOKEN` holds it.
fn parse_token(text: &str) -> Result<i64, String> {
    text.trim().parse().map_err(|_| format!("not a fencing token (an integer): {text:?}"))
}

fn parse_ballot(text: &str) -> Result<wazoo_runtime::Ballot, String> {
    match text {
        "commit" => Ok(wazoo_runtime::Ballot::Commit),
        "abort" => Ok(wazoo_runtime::Ballot::Abort),
        _ => Err(format!("expected commit or abort, not {text:?}")),
    }
}

async fn barrier(config: HostConfig, command: BarrierCommand) -> anyhow::Result<u8> {
    let path = command.path().to_string();
    check_path("barrier", &path)?;
    let host = Host::start(config).await?;
    let mut handle = host.barrier(World::Barrier.default_recipe()).await?;
    let failed = |e: RecipeError| exit::recipe(format!("barrier {path}"), e);
    match command {
        BarrierCommand::Set { .. } => out!("{}", barrier_set(handle.set(&path).await.map_err(failed)?)),
        BarrierCommand::Remove { .. } => {
            out!("{}", barrier_removed(handle.remove(&path).await.map_err(failed)?))
        }
        BarrierCommand::Wait { timeout, .. } => match handle.wait(&path, timeout).await {
            Ok(()) => out!("down"),
            Err(RecipeError::Zk(ZkError::Timeout)) => {
                return Ok(timed_out(Waited::BarrierDown, &path, timeout))
            }
            Err(e) => return Err(failed(e)),
        },
    }
    Ok(0)
}

/// What `barrier set` says, by whether it put the barrier up.
fn barrier_set(created: bool) -> &'static str {
    if created {
        "set"
    } else {
        "already set"
    }
}

/// What `barrier remove` says, by whether it took the barrier down.
fn barrier_removed(removed: bool) -> &'static str {
    if removed {
        "removed"
    } else {
        "was not set"
    }
}

/// The path of a recipe's node, checked before anything is asked of ZooKeeper (`kind` names it
/// in the message).
fn check_path(kind: &str, path: &str) -> anyhow::Result<()> {
    wazoo_runtime::paths::check_node(path).map_err(|why| exit::usage(format!("invalid {kind} path: {why}")))
}

fn default_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{}-{}", host.trim(), std::process::id())
}

/// What a command waited for when its `--timeout` passed.
#[derive(Clone, Copy)]
enum Waited {
    Lock,
    Lease,
    Leadership,
    QueueItem,
    BarrierDown,
}

/// Says that `--timeout` passed while waiting at `path`: exit status 3.
fn timed_out(waited: Waited, path: &str, timeout: Option<Duration>) -> u8 {
    let after = args::human(timeout.unwrap_or_default());
    match waited {
        Waited::Lock => eprintln!("wazoo: timed out after {after} waiting for the lock at {path}"),
        Waited::Lease => eprintln!("wazoo: no lease of {path} free after {after}"),
        Waited::Leadership => eprintln!("wazoo: not leading {path} after {after}"),
        Waited::QueueItem => eprintln!("wazoo: queue {path} empty after {after}"),
        Waited::BarrierDown => eprintln!("wazoo: barrier {path} still up after {after}"),
    }
    exit::CONFLICT
}

/// A claim was not had: `--no-wait` found it taken, or `--timeout` passed. Exit status 3, or
/// `--conflict-exit-code`.
fn not_held(waited: Waited, path: &str, wait: &WaitArgs) -> u8 {
    if wait.no_wait {
        match waited {
            Waited::Lease => eprintln!("wazoo: no lease of {path} free (--no-wait)"),
            Waited::Leadership => eprintln!("wazoo: another leads {path} (--no-wait)"),
            _ => eprintln!("wazoo: the lock at {path} is held by another (--no-wait)"),
        }
    } else {
        timed_out(waited, path, wait.timeout);
    }
    wait.conflict_exit_code
}

async fn server(port: u16, data_dir: Option<PathBuf>, tick_ms: u32) -> anyhow::Result<u8> {
    // Another server on the port would answer for this one: refuse at once.
    if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
        bail!("cannot serve on 127.0.0.1:{port}: {e}");
    }
    let options = ServerOptions { port, data_dir, tick_ms, ..ServerOptions::default() };
    let server = tokio::task::spawn_blocking(move || ZkServer::start(options)).await??;
    out!(
        "ZooKeeper serving on {} (data {}, log {})",
        server.address(),
        server.data_dir().display(),
        server.log_path().display()
    );
    out!("press Ctrl-C to stop");
    tokio::signal::ctrl_c().await?;
    drop(server);
    Ok(0)
}

fn recipes_list(config: &HostConfig, json: bool) -> anyhow::Result<u8> {
    let registry = Registry::new(
        wazoo_runtime::sandbox::engine(&config.limits)?,
        config.plugins.clone(),
        config.cache.clone(),
    )?;
    let rows = registry
        .list()?
        .into_iter()
        .map(|r| {
            let (world, hash) = match (&r.serving, &r.refused) {
                (_, Some(refusal)) => (format!("refused: {}", refusal.reason), "-".to_string()),
                (Some(v), None) => (v.world.name().to_string(), v.short_hash().to_string()),
                (None, None) => ("unknown".to_string(), "-".to_string()),
            };
            RecipeRow {
                name: r.name,
                world,
                hash,
                bytes: r.bytes,
                path: r.path.display().to_string(),
                note: None,
            }
        })
        .collect::<Vec<_>>();
    let empty = format!("no components in {} (build them with `make recipes`)", config.plugins.display());
    print_recipes(&rows, &empty, json)
}

/// One line of `wazoo recipes list`.
struct RecipeRow {
    name: String,
    world: String,
    hash: String,
    bytes: u64,
    path: String,
    /// After the path, e.g. why a newer file was refused while an older version serves.
    note: Option<String>,
}

/// The `wazoo recipes list` table (or `empty` when there are no rows).
/// With `json`, one `{"name","world","sha256","bytes","path","note"}` per component, nothing
/// for none.
fn print_recipes(rows: &[RecipeRow], empty: &str, json: bool) -> anyhow::Result<u8> {
    use std::io::Write as _;
    if json {
        for r in rows {
            let row = serde_json::json!({
                "name": r.name, "world": r.world, "sha256": r.hash, "bytes": r.bytes, "path": r.path, "note": r.note,
            });
            show::emit(&row.to_string());
        }
        return Ok(0);
    }
    let mut out = std::io::stdout().lock();
    let printed = (|| -> std::io::Result<()> {
        if rows.is_empty() {
            writeln!(out, "{empty}")?;
            return Ok(());
        }
        writeln!(out, "{:<16} {:<34} {:<12} {:>9}  PATH", "NAME", "WORLD", "SHA-256", "BYTES")?;
        for r in rows {
            write!(out, "{:<16} {:<34} {:<12} {:>9}  {}", r.name, r.world, r.hash, r.bytes, r.path)?;
            if let Some(note) = &r.note {
                write!(out, "  ({note})")?;
            }
            writeln!(out)?;
        }
        Ok(())
    })();
    match printed {
        // A reader that stopped early (`| head`) is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}

async fn run_custom(config: HostConfig, component: &str, args: &[String]) -> anyhow::Result<u8> {
    let host = Host::start(config).await?;
    let mut handle = host.custom(component).await?;
    let outcome = handle.run(args).await;
    handle.close().await;
    Ok(custom_outcome(component, outcome.context("running the recipe")?))
}

/// `wazoo recipes functions`: one signature per line.
fn recipe_functions(config: &HostConfig, recipe: &str) -> anyhow::Result<u8> {
    let registry = Registry::new(
        wazoo_runtime::sandbox::engine(&config.limits)?,
        config.plugins.clone(),
        config.cache.clone(),
    )?;
    let path = registry.resolve(recipe);
    let version = registry.load(&path)?;
    for f in version.functions() {
        out!("{f}");
    }
    Ok(0)
}

/// `wazoo call`: one call on a fresh instance.
async fn call(config: HostConfig, recipe: &str, function: &str, args: &str) -> anyhow::Result<u8> {
    let args: serde_json::Value =
        serde_json::from_str(args).map_err(|e| exit::usage(format!("ARGS is not JSON: {e}")))?;
    let host = Host::start(config).await?;
    let mut handle = host.dynamic(recipe).await?;
    let outcome = handle.call(function, &args).await;
    handle.close().await;
    Ok(print_call_result(&outcome.context("calling the recipe")?))
}

/// Prints a call's JSON result; exit status 1 when it is `{"err": …}`.
pub(crate) fn print_call_result(result: &serde_json::Value) -> u8 {
    out!("{result}");
    match result.as_object() {
        Some(o) if o.len() == 1 && o.contains_key("err") => 1,
        _ => 0,
    }
}

/// A custom recipe's answer: its `ok` text to stdout (exit status 0), its `err` text to stderr
/// (exit status 1).
fn custom_outcome(component: &str, outcome: Result<String, String>) -> u8 {
    match outcome {
        Ok(out) => {
            if !out.is_empty() {
                out!("{out}");
            }
            0
        }
        Err(err) => {
            eprintln!("wazoo: {component}: {err}");
            1
        }
    }
}

async fn demo(plugins: &std::path::Path, rounds: u32) -> anyhow::Result<u8> {
    out!("== starting a local ZooKeeper (Debian's zookeeper package) ==");
    let server = tokio::task::spawn_blocking(|| ZkServer::start(ServerOptions::default())).await??;
    out!("ZooKeeper serving on {}", server.address());
    let exe = std::env::current_exe()?;
    let lock_path = "/wazoo-demo/lock";
    // Each holder appends to one log; afterwards it is checked, not just claimed.
    let log = std::env::temp_dir().join(format!("wazoo-demo-{}.log", std::process::id()));
    std::fs::write(&log, "")?;
    out!("== two contenders, {rounds} rounds each, on {lock_path} ==");
    let mut contenders = Vec::new();
    for name in ["A", "B"] {
        let (exe, address, plugins, log) =
            (exe.clone(), server.address(), plugins.to_path_buf(), log.clone());
        contenders.push(tokio::spawn(async move {
            for round in 1..=rounds {
                let script = format!(
                    "echo \"{name} enter $WAZOO_FENCING_TOKEN\" >> \"$DEMO_LOG\"; \
                     echo \"[{name}] round {round}: holding the lock, fencing token $WAZOO_FENCING_TOKEN\"; \
                     sleep 0.3; echo \"[{name}] round {round}: releasing\"; echo \"{name} exit\" >> \"$DEMO_LOG\""
                );
                let status = tokio::process::Command::new(&exe)
                    .arg("--zookeeper")
                    .arg(&address)
                    .arg("--plugins")
                    .arg(&plugins)
                    .args(["lock", lock_path, "--timeout", "30s", "--", "sh", "-c", &script])
                    .env("DEMO_LOG", &log)
                    .status()
                    .await?;
                if !status.success() {
                    bail!("contender {name} round {round} failed: {status}");
                }
            }
            Ok(())
        }));
    }
    for c in contenders {
        c.await??;
    }
    let history = std::fs::read_to_string(&log)?;
    let _ = std::fs::remove_file(&log);
    check_demo_history(&history, 2 * rounds as usize)?;
    out!(
        "== checked: {} turns, never two holders at once, every fencing token above the last ==",
        2 * rounds
    );
    drop(server);
    Ok(0)
}

/// Enter/exit lines must alternate per holder and tokens must rise.
fn check_demo_history(history: &str, turns: usize) -> anyhow::Result<()> {
    let lines: Vec<&str> = history.lines().collect();
    if lines.len() != 2 * turns {
        bail!("expected {} log lines, found {}:\n{history}", 2 * turns, lines.len());
    }
    let mut last_token = i64::MIN;
    for pair in lines.chunks(2) {
        let enter: Vec<&str> = pair[0].split_whitespace().collect();
        let exit: Vec<&str> = pair[1].split_whitespace().collect();
        if enter.len() != 3
            || enter[1] != "enter"
            || exit.len() != 2
            || exit[1] != "exit"
            || enter[0] != exit[0]
        {
            bail!("holders overlapped:\n{history}");
        }
        let token: i64 = enter[2].parse()?;
        if token <= last_token {
            bail!("fencing token {token} is not above {last_token}:\n{history}");
        }
        last_token = token;
    }
    Ok(())
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Read => "read",
        Mode::Write => "write",
    }
}

fn parse_mode(text: &str) -> Result<Mode, String> {
    match text {
        "read" => Ok(Mode::Read),
        "write" => Ok(Mode::Write),
        _ => Err(format!("expected read or write, not {text:?}")),
    }
}
