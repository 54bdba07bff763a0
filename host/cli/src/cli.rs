//! What `wazoo` accepts: the options and subcommands (clap), and the words its arguments are
//! read from (`read`/`write`, `commit`/`abort`, a transaction's mode, a fencing token). What the
//! commands do with them is `commands`'.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use wazoo_runtime::{Ballot, CounterFormat, Mode, TxMode, World};

use crate::args::{self, HoldArgs, WaitArgs};
use crate::scaffold;

/// The heading under which `--help` lists the options every subcommand takes, after the
/// command's own.
pub(crate) const GLOBAL: &str = "Global options";

#[derive(Parser)]
#[command(
    name = "wazoo",
    version,
    about = "ZooKeeper coordination recipes as sandboxed WebAssembly components"
)]
pub(crate) struct Cli {
    /// ZooKeeper to use: host:port[,host:port…][/chroot]
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_ZOOKEEPER", default_value = "127.0.0.1:2181", value_parser = args::zookeeper_address)]
    pub(crate) zookeeper: String,
    /// Directory holding the recipe components (<name>.wasm)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_PLUGINS", default_value = "plugins")]
    pub(crate) plugins: PathBuf,
    /// ZooKeeper session timeout (e.g. 500ms, 10s, 1m); with --server, the client session's TTL
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_SESSION_TIMEOUT", default_value = "10s", value_parser = args::session_timeout)]
    pub(crate) session_timeout: Duration,
    /// How long to try to reach ZooKeeper (with --server, the daemon) before giving up
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_CONNECT_TIMEOUT", default_value = "10s", value_parser = args::positive_duration)]
    pub(crate) connect_timeout: Duration,
    /// Go through the `wazoo serve` daemon at ADDR (host:port) instead of opening a ZooKeeper
    /// session; several members of a daemon group as ADDR,ADDR,… (the first that answers is
    /// used, the others take the session up if it stops answering); --zookeeper, --plugins and
    /// --cache are then the daemon's business, and refused if typed (their WAZOO_* variables
    /// are let be)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_SERVER", value_name = "ADDR", value_parser = args::daemon_addresses)]
    pub(crate) server: Option<String>,
    /// With --server: the tenant's API token, sent as `authorization: Bearer TOKEN` (a daemon
    /// serving --tenants refuses calls without a known one); visible ASCII, no spaces
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// With --server: the CA (PEM) the daemon's certificate is checked against; the connection
    /// is then TLS (`--server https://HOST:PORT`)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_TLS_CA", value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// Certificate chain (PEM): with `serve`, the daemon's (serves TLS); with --server, this
    /// client's, for a daemon that asks for one (--tls-client-ca)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_TLS_CERT", value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_TLS_KEY", value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// Show on stderr what wazoo does (its info log) and what recipes write to their stdout and
    /// stderr (tagged with the recipe and its instance, at most 20 lines a second each);
    /// WAZOO_LOG, when set, decides instead. Through --server, recipes' output is in the
    /// daemon's log
    #[arg(short = 'v', long, global = true, help_heading = GLOBAL)]
    pub(crate) verbose: bool,
    /// How log lines are written to stderr: `text`, or `json` (one object a line, with the
    /// span of the call it belongs to)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub(crate) log_format: String,
    /// A file whose first line is a ZooKeeper digest identity `USER:PASSWORD` for this host's
    /// own session; the nodes the host creates are then that identity's alone (CREATOR_ALL)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_ZOOKEEPER_DIGEST_FILE", value_name = "FILE")]
    pub(crate) zookeeper_digest_file: Option<PathBuf>,
    /// The CA (PEM) of the ZooKeeper servers' certificates: the host's session is then TLS, to
    /// the servers' `secureClientPort` (hostnames are checked against the certificates)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_ZOOKEEPER_TLS_CA", value_name = "FILE")]
    pub(crate) zookeeper_tls_ca: Option<PathBuf>,
    /// This host's certificate chain (PEM) for ZooKeeper servers that ask for one
    /// (`ssl.clientAuth`); needs --zookeeper-tls-ca and --zookeeper-tls-key
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_ZOOKEEPER_TLS_CERT", value_name = "FILE", requires_all = ["zookeeper_tls_key", "zookeeper_tls_ca"])]
    pub(crate) zookeeper_tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --zookeeper-tls-cert
    #[arg(
        long,
        global = true, help_heading = GLOBAL,
        env = "WAZOO_ZOOKEEPER_TLS_KEY",
        value_name = "FILE",
        requires = "zookeeper_tls_cert"
    )]
    pub(crate) zookeeper_tls_key: Option<PathBuf>,
    /// Private directory for compiled components [default: $XDG_CACHE_HOME/wazoo/components,
    /// else ~/.cache/wazoo/components]; `none` compiles on every start
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_CACHE")]
    pub(crate) cache: Option<PathBuf>,
    /// Serve the recipe registry's versions (`wazoo recipes publish`) of every recipe it holds,
    /// as `wazoo serve` always does, instead of the plugins directory's (WAZOO_REGISTRY: true or
    /// false)
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_REGISTRY")]
    pub(crate) registry: bool,
    /// Serve only registry components signed by one of these keys (a TOML file of `[[key]]`
    /// entries: see `wazoo recipes keygen`): for `serve`, and for commands run with --registry
    #[arg(long, global = true, help_heading = GLOBAL, env = "WAZOO_TRUSTED_KEYS", value_name = "FILE")]
    pub(crate) trusted_keys: Option<PathBuf>,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The node format of an election (`wazoo elect --format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ElectionFormat {
    /// Curator's LeaderLatch: `_c_<uuid>-latch-<seq>` (the `election` recipe)
    Latch,
    /// Curator's LeaderSelector: `_c_<uuid>-lock-<seq>` (the `election-selector` recipe)
    Selector,
}

impl ElectionFormat {
    /// The standard recipe serving the format.
    pub(crate) fn recipe(self) -> &'static str {
        match self {
            ElectionFormat::Latch => World::Election.default_recipe(),
            ElectionFormat::Selector => "election-selector",
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run CMD while holding the lock at PATH (Curator-compatible), as flock and etcdctl lock
    /// do: wazoo's own options come first, and CMD with its arguments is the rest (`--` before
    /// CMD is allowed, and needed for a CMD that starts with `-`). More locks with --also (taken in path order, all or none); CMD is stopped if a
    /// lock is lost. Without CMD: print `held NODE token TOKEN` and hold until SIGINT, SIGTERM
    /// or SIGHUP
    Lock {
        /// Lock path, e.g. /app/locks/deploy
        #[arg(value_name = "PATH")]
        path: String,
        /// Also hold the lock at PATH (repeat for more): every lock or none, taken in path order
        #[arg(long, short = 'p', value_name = "PATH")]
        also: Vec<String>,
        /// Who holds it, written into the claim's node and shown by `holders`, `claims`, kazoo's
        /// contenders() (default: HOSTNAME:PID; through a daemon with the client session's name
        /// and address; at most 128 bytes)
        #[arg(long, value_parser = args::holder_id)]
        id: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Without CMD: the `held` line as JSON, {"path","node","token"} (a line per lock)
        #[arg(long)]
        json: bool,
        /// Lock recipe component: a name in the plugins directory or a .wasm path
        #[arg(long, default_value = World::Lock.default_recipe())]
        recipe: String,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
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
        /// Who holds it, written into the claim's node and shown by `holders`, `claims`, kazoo's
        /// contenders() (default: HOSTNAME:PID; through a daemon with the client session's name
        /// and address; at most 128 bytes)
        #[arg(long, value_parser = args::holder_id)]
        id: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Without CMD: the `held` line as JSON, {"path","mode","node","token"}
        #[arg(long)]
        json: bool,
        /// Read/write lock recipe component
        #[arg(long, default_value = World::RwLock.default_recipe())]
        recipe: String,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
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
        /// Who holds it, written into the claim's node and shown by `holders`, `claims`, kazoo's
        /// contenders() (default: HOSTNAME:PID; through a daemon with the client session's name
        /// and address; at most 128 bytes)
        #[arg(long, value_parser = args::holder_id)]
        id: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Without CMD: the `held` line as JSON, {"path","node","token"}
        #[arg(long)]
        json: bool,
        /// Semaphore recipe component
        #[arg(long, default_value = World::Semaphore.default_recipe())]
        recipe: String,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD while this process leads the election at PATH (Curator LeaderLatch); stop it on
    /// loss. Without CMD, lead until a signal
    Elect {
        /// Election path, e.g. /app/election
        path: String,
        /// This participant's id, the node's data, shown to observers (default: HOSTNAME:PID)
        #[arg(long, value_parser = args::participant_id)]
        id: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// When CMD ends or leadership is lost, campaign again instead of exiting (Curator
        /// LeaderSelector's autoRequeue); CMD gets WAZOO_TERM
        #[arg(long)]
        requeue: bool,
        /// With --requeue: stop after N terms, with the last CMD's exit status
        #[arg(long, value_name = "N", requires = "requeue", value_parser = clap::value_parser!(u32).range(1..))]
        max_terms: Option<u32>,
        /// With --requeue: wait before campaigning again, doubled for each further failed term
        /// in a row (up to 1 minute) [default: 1s]
        #[arg(long, value_name = "DUR", requires = "requeue", value_parser = args::duration)]
        backoff: Option<Duration>,
        /// The election's node format: latch (Curator LeaderLatch, `-latch-` nodes, the default)
        /// or selector (Curator LeaderSelector, `-lock-` nodes); every participant of a path must
        /// use one. A --recipe names its own
        #[arg(long, value_enum, conflicts_with = "recipe")]
        format: Option<ElectionFormat>,
        /// Election recipe component [default: election, or election-selector with --format
        /// selector]
        #[arg(long)]
        recipe: Option<String>,
        /// Without CMD: the `held` line as JSON, {"path","node","token","id"}
        #[arg(long)]
        json: bool,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Run CMD while holding a claim of FAMILY at PATH: a family served from its description
    /// (FAMILY.family.toml beside its claim recipe in the plugins directory; through a daemon,
    /// in the daemon's too). Without CMD, hold it until a signal
    Claim {
        /// The family, as its description file names it
        family: String,
        /// Claim path, e.g. /app/batons/deploy
        path: String,
        /// The contender's node data, for a family whose description names it (shown by
        /// `holders`, and given to CMD)
        #[arg(long)]
        data: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        hold: HoldArgs,
        /// Without CMD: the `held` line as JSON, {"path","node","token"}
        #[arg(long)]
        json: bool,
        /// Claim recipe component [default: the family's own]
        #[arg(long)]
        recipe: Option<String>,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Share out the items among the members of PATH (kazoo SetPartitioner) and run CMD on this
    /// member's share (WAZOO_PARTITION: a file, one item a line); when the membership changes,
    /// stop CMD, share again and run it again
    Partition {
        /// The partition's path, e.g. /app/partition (members under PATH/members, an item's
        /// lock at PATH/items/ITEM)
        path: String,
        /// This member's name, unique among the members
        #[arg(long)]
        member: String,
        /// The items, comma-separated
        #[arg(long, value_name = "A,B,…")]
        items: Option<String>,
        /// A file of items, one a line
        #[arg(long, value_name = "FILE")]
        items_file: Option<PathBuf>,
        #[command(flatten)]
        hold: HoldArgs,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Keep the node PATH holding DATA present while CMD runs (Curator PersistentNode, service
    /// discovery): made again when it goes (also after a new session), its data set back when
    /// changed. Without CMD, until a signal
    Register {
        /// The registration's node, e.g. /services/api/host1:8080
        path: String,
        /// Its data, e.g. a JSON description of the instance (`-`: read from stdin)
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        data: String,
        /// A persistent node with this TTL (at least 1s) instead of an ephemeral one (tended at
        /// least three times per TTL; the servers must enable TTL nodes)
        #[arg(long, value_parser = args::duration)]
        ttl: Option<Duration>,
        /// Registration recipe component
        #[arg(long, default_value = World::Registration.default_recipe())]
        recipe: String,
        /// Without CMD: the `registered` line as JSON, {"path","data"}
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        hold: HoldArgs,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// List the instances registered under PATH, one `NAME DATA` line each (exit status 1 if
    /// none)
    Services {
        path: String,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Print a line for every change at PATH (with --recursive, anywhere below it too):
    /// `created|changed PATH VERSION DATA` or `deleted PATH`, until interrupted. Kept by a cache
    /// (Curator's CuratorCache, kazoo's TreeCache) on a persistent watch: nothing is missed across
    /// broken connections and new sessions
    Watch {
        path: String,
        /// The whole tree below PATH, not the node alone
        #[arg(long, short = 'r')]
        recursive: bool,
        /// First print a `created` line for every node there now
        #[arg(long)]
        initial: bool,
        /// One JSON object per line: {"event","path","version","data"}
        #[arg(long)]
        json: bool,
        /// Cache recipe component
        #[arg(long, default_value = World::Cache.default_recipe())]
        recipe: String,
    },
    /// List the holders and waiters of the lock, read/write lock, semaphore or election at PATH,
    /// in queue order, with their data, session and fencing token (exit status 1 if none)
    Holders {
        path: String,
        /// lock, rwlock, semaphore, election, or a described family [default: told by the
        /// node names]
        #[arg(long)]
        kind: Option<String>,
        /// A semaphore's lease count: the first N lease nodes hold [default: every lease node
        /// but a waiting one]
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        leases: Option<u32>,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// List every claim (lock, read/write lock, semaphore, election in Curator's formats, and
    /// kazoo's locks) at PREFIX or below it: a row per contender, holders first, then waiters in
    /// queue order, with identity, token and age (exit status 1 if none)
    Claims {
        /// Where to look: every claim at PREFIX or below it (at most 10000 nodes)
        #[arg(default_value = "/")]
        prefix: String,
        /// One JSON document: {"prefix","claims":[{"path","kind","contenders":[…]}]}
        #[arg(long)]
        json: bool,
    },
    /// List a daemon's client sessions (with --server; a tenant's own): name, peer address, when
    /// opened, and the claims each holds (exit status 1 if none)
    Sessions {
        /// One JSON document: {"sessions":[{"session","name","peer","opened_ms","claims":[…]}]}
        #[arg(long)]
        json: bool,
    },
    /// Show the claims under PREFIX (holders, then waiters in queue order, with identity,
    /// token and age) and, through --server, the daemon's client sessions, refreshed in place
    /// until q or Ctrl-C; when stdout is not a terminal, print it once and exit
    Top {
        /// Where to look: every claim at PREFIX or below it
        #[arg(default_value = "/")]
        prefix: String,
        /// How often to look again (e.g. 500ms, 2s; at least 100ms)
        #[arg(long, default_value = "1s", value_name = "DUR", value_parser = args::watch_every)]
        every: Duration,
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
    /// Shared counter (kazoo Counter, Curator SharedCount or DistributedAtomicLong format):
    /// print it, or add to it atomically
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
        /// Barrier recipe component (e.g. barrier-c, the one in C)
        #[arg(long, default_value = World::Barrier.default_recipe())]
        recipe: String,
        /// The command to run and its arguments: everything after the path (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, value_name = "CMD")]
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
        /// Barrier recipe component (e.g. barrier-c, the one in C)
        #[arg(long, global = true, default_value = World::Barrier.default_recipe())]
        recipe: String,
    },
    /// Ask the holder of lock NODE to let go (sets `__REVOKE__`); with --grace, delete it after
    Revoke {
        /// The holder's node, e.g. as printed in WAZOO_LOCK_NODE
        node: String,
        /// Delete the node if the holder has not released within this time
        #[arg(long, value_parser = args::duration)]
        grace: Option<Duration>,
        /// As JSON: {"node","outcome"}, the outcome `asked` (no --grace), `released` or `forced`
        #[arg(long)]
        json: bool,
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
        /// Once it serves, one JSON line {"address","data_dir","log"} instead of the text
        #[arg(long)]
        json: bool,
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
    /// Start a recipe of your own: a buildable template in Rust, Python, JavaScript or C, or
    /// the C bindings of a recipe world
    New {
        #[command(subcommand)]
        command: NewCommand,
    },
    /// Turn a WASI core module (from C, or any compiler that emits wasip1) into a recipe component
    /// for WORLD: embeds the world's WIT, adapts WASI preview 1 imports, and checks the result
    /// as a plugin is checked. Exit status 1 if the module is refused, with the reason
    Componentize {
        /// The core module (.wasm), a WASI reactor (clang -mexec-model=reactor)
        module: PathBuf,
        /// The world it implements: custom, barrier-recipe (or barrier), …, or the full name
        /// wazoo:recipes/barrier-recipe@0.1.2
        #[arg(long)]
        world: String,
        /// Where to write the component
        #[arg(short, long)]
        output: PathBuf,
        /// As JSON: {"output","world","bytes","adapted"}
        #[arg(long)]
        json: bool,
    },
    /// Call any exported function of any recipe (FUNCTION like lock.acquire; see `recipes
    /// functions`) with ARGS, a JSON array or object; prints the result as JSON. Exit status 1
    /// if the result is {"err": …}. Without --server the instance ends with the call, deleting
    /// its ephemeral nodes
    Call {
        /// A name in the plugins directory or a .wasm path
        recipe: String,
        /// lock.acquire, wazoo:recipes/lock@0.1.2#acquire, or a bare name only one export has
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
        /// Prometheus address (GET /metrics, and GET /healthz for probes); `off` for none
        #[arg(long, default_value = "127.0.0.1:9181")]
        metrics: String,
        /// The plugins directory is watched (inotify); it is also looked at this often, in case
        /// a change event was missed
        #[arg(long, default_value = "5s", value_parser = args::watch_every)]
        watch_every: Duration,
        /// Serve these tenants (a JSON or TOML file: see docs/src/reference/tenants.md), each with
        /// its own token, ZooKeeper session and identity, namespace, recipes and limits, instead
        /// of one host open to every client
        #[arg(long)]
        tenants: Option<PathBuf>,
        /// With --tls-cert: ask every client for a certificate signed by this CA (PEM), which
        /// then authenticates it (mutual TLS)
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_client_ca: Option<PathBuf>,
        /// A file holding the API token every client must present (`authorization: Bearer
        /// TOKEN`), for one host without --tenants: its first line, at least 16 visible ASCII
        /// characters, no spaces
        #[arg(long, value_name = "FILE", conflicts_with = "tenants")]
        token_file: Option<PathBuf>,
        /// Serve plain text on an address other than loopback: gRPC without --tls-cert (tokens
        /// and data then cross the network readable by anyone on the path), or the metrics
        /// address (metrics and /healthz are always plain HTTP)
        #[arg(long)]
        insecure: bool,
        /// Client sessions open at once, over all tenants
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions: u32,
        /// Client sessions open at once per tenant (or for the one host)
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
        max_sessions_per_tenant: u32,
        /// Recipe instances alive at once in the one host (without --tenants: a tenant's is
        /// `instances` in the tenants file); every claim being taken or waited for keeps one, a
        /// lock or lease held by Acquire none after a second (it is held as data)
        #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=100_000), conflicts_with = "tenants")]
        max_instances: u32,
        /// Handles (claims, kept instances, participants) per client session
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
        max_handles: u32,
        /// Streams (keepalives, Lost, watches) open at once per tenant (or for the one host)
        #[arg(long, default_value_t = 4_000, value_parser = clap::value_parser!(u32).range(1..))]
        max_streams: u32,
        /// The longest client-session TTL granted (a longer one asked for is cut to it; at most 1h)
        #[arg(long, default_value = "1m", value_parser = args::max_ttl)]
        max_ttl: Duration,
        /// Serve as a member of the daemon group NAME on this ensemble: client sessions and
        /// claims outlive this daemon (another member adopts them when it dies or stops), and
        /// SIGTERM hands them over instead of closing them (docs/src/daemon/groups.md)
        #[arg(long, value_name = "NAME", requires = "group_secret_file")]
        group: Option<String>,
        /// The group's secret (its first line, at least 16 visible ASCII characters): the
        /// ZooKeeper identity its state belongs to; every member has the same
        #[arg(long, value_name = "FILE", requires = "group")]
        group_secret_file: Option<PathBuf>,
        /// The address clients and the other members reach this daemon at (default: --listen);
        /// also its name in the recipe registry's reports (default: HOSTNAME:PORT)
        #[arg(long, value_name = "HOST:PORT")]
        advertise: Option<String>,
        /// Do not follow the recipe registry in ZooKeeper: serve the plugins directory's and
        /// the program's own recipes only
        #[arg(long)]
        no_registry: bool,
        /// Once it serves, one JSON line {"grpc","metrics"} (metrics null when off) instead of
        /// the `serving gRPC on …` line
        #[arg(long)]
        json: bool,
    },
    /// Start a local ZooKeeper and show two contenders taking turns on a lock
    Demo {
        /// Lock rounds per contender, 1–1000
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
        rounds: u32,
    },
    /// Browse ZooKeeper: list a node's children, print its data or stat, show the subtree below
    /// it, or delete a node (exit status 1 if PATH does not exist)
    Zk {
        #[command(subcommand)]
        command: ZkCommand,
    },
    /// Print the shell completion script for bash, zsh or fish (e.g. `wazoo completions bash >
    /// /etc/bash_completion.d/wazoo`)
    Completions {
        /// bash, zsh or fish
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print the manual page wazoo(1), or with --dir write it and one page per subcommand
    /// (wazoo-lock.1, …) into DIR
    Man {
        /// Write wazoo.1 and every subcommand's page into DIR (created if missing)
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

impl Command {
    /// The command a claim command (or `partition`, `register`, `double-barrier`) runs: CMD and
    /// its arguments, when given.
    /// The CMD of a command that runs one (empty when none was given), or `None` for a command
    /// that runs none.
    pub(crate) fn cmd(&self) -> Option<&[String]> {
        let command = match self {
            Command::Lock { command, .. }
            | Command::Rwlock { command, .. }
            | Command::Semaphore { command, .. }
            | Command::Elect { command, .. }
            | Command::Claim { command, .. }
            | Command::Partition { command, .. }
            | Command::Register { command, .. }
            | Command::DoubleBarrier { command, .. }
            | Command::Group { command: GroupCommand::Join { command, .. } } => command,
            _ => return None,
        };
        Some(command.as_slice())
    }
}

/// A shell `wazoo completions` writes a script for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

impl CompletionShell {
    /// clap_complete's name for it.
    pub(crate) fn generator(self) -> clap_complete::Shell {
        match self {
            CompletionShell::Bash => clap_complete::Shell::Bash,
            CompletionShell::Zsh => clap_complete::Shell::Zsh,
            CompletionShell::Fish => clap_complete::Shell::Fish,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum ZkCommand {
    /// The children's names, sorted, one a line
    Ls {
        path: String,
        /// One JSON object per child: {"name","path"}
        #[arg(long)]
        json: bool,
    },
    /// The node's data (as `config get` prints it)
    Get {
        path: String,
        /// As JSON: {"path","data","stat":{…}} (the stat as `zk stat --json` gives it)
        #[arg(long)]
        json: bool,
    },
    /// The node's stat, one `name value` a line: czxid, mzxid, pzxid, ctime and mtime (in ms
    /// and RFC 3339), version, cversion, aversion, ephemeralOwner (a session id in hex),
    /// dataLength, numChildren
    Stat {
        path: String,
        /// As JSON: {"path","czxid","mzxid","pzxid","ctime","mtime","version","cversion",
        /// "aversion","ephemeralOwner","dataLength","numChildren"} (times in ms)
        #[arg(long)]
        json: bool,
    },
    /// The subtree below PATH, a line per node `NAME [N bytes]`, indented two spaces per level,
    /// children sorted by name
    Tree {
        path: String,
        /// Only this many levels below PATH (0: PATH alone)
        #[arg(long, value_name = "N")]
        depth: Option<u32>,
        /// One JSON object per node, parents first: {"path","data","stat":{…}}
        #[arg(long)]
        json: bool,
    },
    /// Delete the node PATH (it must have no children). A claim's node, or any other ephemeral
    /// node, is someone's claim, registration or membership: refused unless it is the one this
    /// process runs under (WAZOO_LOCK_NODE, WAZOO_LEASE_NODE, WAZOO_LEADER_NODE) or --force is
    /// given (`wazoo revoke` asks a holder to let go instead)
    Rm {
        path: String,
        /// Only if the node is still at this version (0 or more)
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        version: Option<i32>,
        /// Delete another's ephemeral node too
        #[arg(long, short = 'f')]
        force: bool,
        /// As JSON: {"path","deleted"}
        #[arg(long)]
        json: bool,
    },
}

impl ZkCommand {
    pub(crate) fn path(&self) -> &str {
        match self {
            ZkCommand::Ls { path, .. }
            | ZkCommand::Get { path, .. }
            | ZkCommand::Stat { path, .. }
            | ZkCommand::Rm { path, .. }
            | ZkCommand::Tree { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum QueueCommand {
    /// Append DATA (prints the item's node)
    Put {
        path: String,
        /// The item's data (`-`: read from stdin)
        #[arg(allow_hyphen_values = true)]
        data: String,
        /// 0–99, lower first (priority queue)
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=99))]
        priority: Option<u8>,
        /// The item vanishes when this process's session ends (the seed's ephemeral items)
        #[arg(long)]
        ephemeral: bool,
        /// As JSON: {"node"}
        #[arg(long)]
        json: bool,
    },
    /// Remove the head item and print its data (exit status 3 if none within --timeout)
    Take {
        path: String,
        #[arg(long, value_parser = args::duration)]
        timeout: Option<Duration>,
        /// As JSON: {"data"} (as UTF-8, invalid bytes replaced)
        #[arg(long)]
        json: bool,
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
    pub(crate) fn path(&self) -> &str {
        match self {
            QueueCommand::Put { path, .. }
            | QueueCommand::Take { path, .. }
            | QueueCommand::Len { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum GroupCommand {
    /// Be member NAME of the group at PATH while CMD runs (CMD is stopped if membership is
    /// lost); without CMD, until a signal
    Join {
        path: String,
        name: String,
        /// The member's data, shown to others (`-`: read from stdin)
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        data: String,
        #[command(flatten)]
        hold: HoldArgs,
        /// Without CMD: the `held` line as JSON, {"path","node","token","member"} (token null)
        #[arg(long)]
        json: bool,
        /// The command to run and its arguments: everything after NAME (or after `--`)
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
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

#[derive(Subcommand)]
pub(crate) enum ConfigCommand {
    /// Print the value (exit status 1 if there is none); with --prefix, every value at PATH and
    /// below it, a `PATH VALUE` line each
    Get {
        path: String,
        /// Every value at PATH and below it (nodes with children and no data are left out)
        #[arg(long)]
        prefix: bool,
        /// One JSON object per line: {"value","version"} (with --prefix, also "path")
        #[arg(long)]
        json: bool,
    },
    /// Write VALUE and print the new version; with --version, only if still at that version
    Set {
        path: String,
        /// The value; `-` reads it from stdin (as it is, a final newline included). A value
        /// that starts with `-` is taken as it is (`config set /n -5`)
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// Only if the value is still at this version (0 or more)
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        version: Option<i32>,
        /// As JSON: {"version"}
        #[arg(long)]
        json: bool,
    },
    /// Delete the value (exit status 1 if there is none, or not at --version); someone's
    /// ephemeral node is refused (exit status 2)
    Delete {
        path: String,
        /// Only if the value is still at this version (0 or more)
        #[arg(long, value_parser = clap::value_parser!(i32).range(0..))]
        version: Option<i32>,
        /// As JSON: {"path","deleted"}
        #[arg(long)]
        json: bool,
    },
    /// Print the value now and on every change, until interrupted, as `wazoo watch` prints
    /// changes: `created|changed PATH VERSION VALUE` or `deleted PATH`
    Watch {
        path: String,
        /// One JSON object per line: {"event","path","version","data"}
        #[arg(long)]
        json: bool,
    },
}

impl ConfigCommand {
    pub(crate) fn path(&self) -> &str {
        match self {
            ConfigCommand::Get { path, .. }
            | ConfigCommand::Set { path, .. }
            | ConfigCommand::Delete { path, .. }
            | ConfigCommand::Watch { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum CounterCommand {
    /// Print the counter (0 when the node is absent)
    Get {
        path: String,
        /// How the value is stored: kazoo (decimal text), curator-shared (4-byte int) or
        /// curator-atomic (8-byte long)
        #[arg(long, default_value = "kazoo", value_parser = parse_counter_format)]
        format: CounterFormat,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Add DELTA atomically and print the new value
    Add {
        path: String,
        #[arg(allow_hyphen_values = true)]
        delta: i64,
        /// How the value is stored: kazoo (decimal text), curator-shared (4-byte int) or
        /// curator-atomic (8-byte long)
        #[arg(long, default_value = "kazoo", value_parser = parse_counter_format)]
        format: CounterFormat,
        /// As JSON: {"value"}
        #[arg(long)]
        json: bool,
    },
}

impl CounterCommand {
    pub(crate) fn path(&self) -> &str {
        match self {
            CounterCommand::Get { path, .. } | CounterCommand::Add { path, .. } => path,
        }
    }
}

/// `kazoo`, `curator-shared` or `curator-atomic`, exactly.
fn parse_counter_format(text: &str) -> Result<CounterFormat, String> {
    CounterFormat::ALL
        .into_iter()
        .find(|f| f.name() == text)
        .ok_or_else(|| format!("expected kazoo, curator-shared or curator-atomic, not {text:?}"))
}

#[derive(Subcommand)]
pub(crate) enum TxCommand {
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
        mode: TxMode,
        /// Abort if not every site has voted within this time
        #[arg(long, default_value = "60s", value_parser = args::duration)]
        timeout: Duration,
        /// As JSON: {"tx","outcome"}
        #[arg(long)]
        json: bool,
    },
    /// Vote commit or abort in TX as SITE and print the outcome (exit status 6 if aborted); the
    /// site decides abort if no outcome comes within --timeout, or once the coordinator is gone
    Vote {
        tx: String,
        #[arg(long)]
        site: String,
        #[arg(value_parser = parse_ballot)]
        ballot: Ballot,
        #[arg(long, default_value = "60s", value_parser = args::duration)]
        timeout: Duration,
        /// As JSON: {"tx","outcome"}
        #[arg(long)]
        json: bool,
    },
    /// Delete finished transaction TX and print `cleaned TX: OUTCOME`: one with a decision, or
    /// one whose coordinator is gone (decided aborted first). Exit status 1 while in progress
    Clean {
        tx: String,
        /// As JSON: {"tx","outcome"}, the outcome of the transaction cleaned
        #[arg(long)]
        json: bool,
    },
}

impl TxCommand {
    pub(crate) fn tx(&self) -> &str {
        match self {
            TxCommand::Coordinate { tx, .. } | TxCommand::Vote { tx, .. } | TxCommand::Clean { tx, .. } => tx,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum FenceCommand {
    /// Exit status 0 if claim node NODE still exists with fencing token TOKEN; else 1, saying why
    Check {
        /// The holder's node, e.g. as printed in WAZOO_LOCK_NODE
        node: String,
        /// Its fencing token, e.g. WAZOO_FENCING_TOKEN
        #[arg(id = "fencing-token", value_name = "TOKEN", value_parser = parse_token, allow_hyphen_values = true)]
        token: i64,
        /// As JSON, also when it no longer holds: {"node","token","holds","reason","found"}
        /// (reason null, `gone` or `other-token`; found: the token the node has instead)
        #[arg(long)]
        json: bool,
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
        /// The value to write (`-`: read from stdin)
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// As JSON, also when refused: {"path","node","token","written","version","previous",
        /// "reason","found"} (reason null, `gone`, `other-token` or `superseded`; found: the
        /// node's other token, or the higher token PATH was written with)
        #[arg(long)]
        json: bool,
    },
}

impl FenceCommand {
    /// The paths it names, each with what it is for messages.
    pub(crate) fn paths(&self) -> Vec<(&'static str, &str)> {
        match self {
            FenceCommand::Check { node, .. } => vec![("node", node)],
            FenceCommand::Write { node, path, .. } => vec![("node", node), ("fenced", path)],
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum BarrierCommand {
    /// Put the barrier up (creating missing parents)
    Set {
        path: String,
        /// As JSON: {"path","was_set"} (true: it was up already)
        #[arg(long)]
        json: bool,
    },
    /// Take the barrier down, releasing every waiter
    Remove {
        path: String,
        /// As JSON: {"path","was_set"} (false: it was not up)
        #[arg(long)]
        json: bool,
    },
    /// Block until the barrier is down (exit status 3 if still up after --timeout)
    Wait {
        path: String,
        #[arg(long, value_parser = args::duration)]
        timeout: Option<Duration>,
        /// As JSON: {"path","down"}
        #[arg(long)]
        json: bool,
    },
}

impl BarrierCommand {
    pub(crate) fn path(&self) -> &str {
        match self {
            BarrierCommand::Set { path, .. }
            | BarrierCommand::Remove { path, .. }
            | BarrierCommand::Wait { path, .. } => path,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum NewCommand {
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
        /// As JSON: {"dir","files"}
        #[arg(long)]
        json: bool,
    },
    /// Write the bindings of a recipe world for LANG into DIR (C: recipe.h, recipe.c and
    /// recipe_component_type.o, from wit-bindgen's C generator)
    Bindings {
        /// The world: custom, barrier-recipe (or barrier), …, or the full name
        #[arg(long)]
        world: String,
        #[arg(long, value_enum, default_value = "c")]
        lang: scaffold::BindingsLang,
        /// Where to write them [default: .]
        #[arg(long)]
        dir: Option<PathBuf>,
        /// As JSON: {"world","files"}
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub(crate) enum RecipesCommand {
    /// Check a component as a plugins file is checked and publish it to the recipe registry in
    /// ZooKeeper as NAME: every host that follows the registry (each `wazoo serve`, commands
    /// run with --registry) then serves it, with no failed call
    Publish {
        /// The recipe's name (1 to 128 of letters, digits, '.', '_', '-')
        name: String,
        /// The component (.wasm, at most 64 MiB)
        file: PathBuf,
        /// Sign it with this key file (from `wazoo recipes keygen`); may be given more than once
        #[arg(long, value_name = "KEYFILE")]
        sign: Vec<PathBuf>,
        /// Serve it first on N hosts; it becomes current everywhere once each has served it
        /// --canary-for and --canary-calls with no trap and no sandbox limit hit, and is
        /// withdrawn (the reason in its history) at the first trap or limit hit
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
        canary: Option<u32>,
        /// With --canary: how long each canary host serves it first
        #[arg(long, default_value = "30s", value_parser = args::positive_duration, requires = "canary")]
        canary_for: Duration,
        /// With --canary: how many calls each canary host answers with it first
        #[arg(long, default_value_t = 0, requires = "canary")]
        canary_calls: u64,
        /// Switch the recipe's wire protocol (the component declares another than the version in
        /// service): every host stops new claims of the recipe and drains the old version's
        /// before any serves the new one
        #[arg(long)]
        new_protocol: bool,
        #[command(flatten)]
        then: args::RolloutWait,
        /// One JSON object
        #[arg(long)]
        json: bool,
    },
    /// NAME's rollout: its current version and canary, and what each following host serves
    Status {
        name: String,
        #[command(flatten)]
        then: args::RolloutWait,
        /// One JSON object
        #[arg(long)]
        json: bool,
    },
    /// NAME's versions in the registry: each publish, rollback, canary, promotion and
    /// withdrawal, oldest first, with digest, protocol, who and when
    History {
        name: String,
        /// One JSON object per event
        #[arg(long)]
        json: bool,
    },
    /// Make an earlier version of NAME current again on every following host: DIGEST (at least
    /// 8 hex digits of its SHA-256, as `history` shows), else the one current before
    Rollback {
        name: String,
        digest: Option<String>,
        /// The version speaks another wire protocol than the current one: drain first
        #[arg(long)]
        new_protocol: bool,
        #[command(flatten)]
        then: args::RolloutWait,
        /// One JSON object
        #[arg(long)]
        json: bool,
    },
    /// Make an ed25519 signing key ID: the private key goes to --out (mode 0600, never
    /// overwritten); the `[[key]]` entry hosts trust it by (--trusted-keys) goes to stdout
    Keygen {
        /// The key's name, as signatures and trusted-keys files name it (letters, digits, `._@-`)
        id: String,
        /// Where to write the private key
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
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
        /// One JSON object per function: {"name","signature"}
        #[arg(long)]
        json: bool,
    },
}

/// A read/write lock's mode as the commands say it: `read` or `write`.
pub(crate) use wazoo_runtime::family::mode_name;

fn parse_mode(text: &str) -> Result<Mode, String> {
    match text {
        "read" => Ok(Mode::Read),
        "write" => Ok(Mode::Write),
        _ => Err(format!("expected read or write, not {text:?}")),
    }
}

fn parse_tx_mode(text: &str) -> Result<TxMode, String> {
    match text {
        "all-to-all" => Ok(TxMode::AllToAll),
        "coordinated" => Ok(TxMode::Coordinated),
        _ => Err(format!("expected all-to-all or coordinated, not {text:?}")),
    }
}

fn parse_ballot(text: &str) -> Result<Ballot, String> {
    match text {
        "commit" => Ok(Ballot::Commit),
        "abort" => Ok(Ballot::Abort),
        _ => Err(format!("expected commit or abort, not {text:?}")),
    }
}

/// A fencing token: an integer, as `WAZOO_FENCING_TOKEN` holds it.
fn parse_token(text: &str) -> Result<i64, String> {
    text.trim().parse().map_err(|_| format!("not a fencing token (an integer): {text:?}"))
}
