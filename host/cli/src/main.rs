//! The `wazoo` command line: run commands under a lock, run custom recipes, list recipes, and
//! start a local ZooKeeper for development.
//!
//! Every subcommand that runs recipes is written once ([`commands`], [`claims`]) against a
//! [`backend::Backend`]: this process's own host ([`local`]), or with `--server ADDR` a `wazoo
//! serve` daemon ([`remote`]). `serve`, `server`, `demo` and `new` run here, on neither.
//!
//! The modules have no circles: each uses only those below it (a module's own children count as
//! part of it). From the bottom:
//!
//! - `exit` (exit statuses, by error kind) and `show` (output, and `out!`) use no other;
//! - `args` (options, a path's check, what a wait's end says), `supervise` (CMD run under
//!   something, [`supervise::run_under`]), `componentize` and `backend` (the `Backend` trait) use
//!   only those;
//! - `scaffold` is above `componentize`; `local` and `remote` (with `remote/convert`) above
//!   `backend`; `cli` (the options) above `args` and `scaffold`;
//! - `manual` (`--help`'s tables, manual pages, completions) is above `cli`; `claims` above
//!   `args`, `backend`, `cli`, `show` and `supervise`;
//! - `partition` is above `claims`;
//! - `commands` is above all of those (inside it, `values` above `zk`, `top` above `listing`,
//!   the others use no sibling), and this root above `commands`: no module uses what is defined
//!   here.

// `out!`, defined in `show`, for every module declared after it.
#[macro_use]
mod show;

mod args;
mod backend;
mod claims;
mod cli;
mod commands;
mod componentize;
mod exit;
mod local;
mod manual;
mod partition;
mod remote;
mod scaffold;
mod supervise;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use tokio::signal::unix::{signal, SignalKind};

use cli::{Cli, Command, NewCommand, RecipesCommand};
use wazoo_runtime::{Host, HostConfig, KeeperConfig, SandboxLimits, ZkTls};
use wazoo_testkit::{ServerOptions, ZkServer};

fn main() -> ExitCode {
    if let Some(code) = supervise::guard_mode() {
        return code;
    }
    let matches = match manual::command().try_get_matches() {
        Ok(matches) => matches,
        Err(e) => {
            let hint = e.use_stderr().then(serve_or_server).flatten();
            let _ = e.print();
            if let Some(hint) = hint {
                eprintln!("\n{hint}");
            }
            std::process::exit(e.exit_code());
        }
    };
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.format(&mut manual::command()).exit(),
    };
    let typed = Typed::of(&matches);
    let hint =
        matches!(cli.command, Command::Serve { .. } | Command::Server { .. }).then(serve_or_server).flatten();
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("WAZOO_LOG").unwrap_or_else(|_| match cli.verbose {
            // wazoo's own crates, recipes' output (`wazoo::guest`) among them.
            true => "warn,wazoo=info,wazoo_runtime=info,wazoo_client=info".into(),
            false => "warn".into(),
        });
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_on_stderr());
    match cli.log_format.as_str() {
        "json" => logs.json().with_current_span(true).with_span_list(false).init(),
        _ => logs.init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("wazoo: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    match runtime.block_on(run(cli, typed)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("wazoo: {e:#}");
            let code = exit::code_of(&e);
            // `serve` that cannot reach ZooKeeper, or `server` that cannot start one: maybe the
            // other was meant. (Bad settings, a refused TLS file, are just that.)
            let mixed_up = code == exit::UNAVAILABLE
                || (code == exit::FAILED && hint.is_some_and(|h| h.starts_with("hint: `wazoo server`")));
            if let Some(hint) = hint.filter(|_| mixed_up) {
                eprintln!("{hint}");
            }
            ExitCode::from(code)
        }
    }
}

/// Whether log lines on stderr carry colour: only on a terminal, and not with `NO_COLOR` set
/// to anything but the empty string (no-color.org).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal as _;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// The hint for someone who typed `serve` (the daemon) meaning `server` (a throwaway
/// ZooKeeper), or the reverse, one letter apart: given when the command line names either and
/// the command is refused or fails.
fn serve_or_server() -> Option<&'static str> {
    // The subcommand: the first argument that is not an option or an option's value is near
    // enough; both words are subcommands only.
    let named = std::env::args().skip(1).find(|a| a == "serve" || a == "server")?;
    Some(match named.as_str() {
        "serve" => "hint: `wazoo serve` runs the wazoo daemon; a throwaway ZooKeeper for trying wazoo out is `wazoo server`",
        _ => "hint: `wazoo server` runs a throwaway ZooKeeper; the wazoo daemon is `wazoo serve`",
    })
}

/// What was typed on the command line, as against taken from the environment or a default:
/// what only a typed option is refused for.
struct Typed {
    /// This process's own host's options typed (`--zookeeper`, `--plugins`, `--cache`): with
    /// `--server` the daemon's are used, so they are refused. Their environment variables
    /// (`WAZOO_ZOOKEEPER`, `WAZOO_PLUGINS`, `WAZOO_CACHE`) are tolerated, since a shell's profile
    /// may well set them for local use beside `WAZOO_SERVER`.
    host_options: Vec<&'static str>,
    /// `--server` came from `WAZOO_SERVER`, not the command line.
    server_from_env: bool,
}

impl Typed {
    /// What `matches` say was typed.
    fn of(matches: &clap::ArgMatches) -> Typed {
        use clap::parser::ValueSource;
        // Global options typed after the subcommand are propagated up, with their source.
        let typed = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        Typed {
            host_options: [
                ("zookeeper", "--zookeeper"),
                ("plugins", "--plugins"),
                ("cache", "--cache"),
                ("registry", "--registry"),
                ("trusted_keys", "--trusted-keys"),
            ]
            .into_iter()
            .filter(|(id, _)| typed(id))
            .map(|(_, flag)| flag)
            .collect(),
            server_from_env: matches.value_source("server") == Some(ValueSource::EnvVariable),
        }
    }

    /// The refusal of this host's options typed beside `--server` (some were): exit status 2.
    fn host_options_refusal(&self) -> anyhow::Error {
        let named = match self.host_options.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last} are", rest.join(", ")),
            _ => format!("{} is", self.host_options.join("")),
        };
        let server = if self.server_from_env { "--server (set by WAZOO_SERVER)" } else { "--server" };
        exit::usage(format!(
            "{named} for this process's own host; with {server} the daemon's ZooKeeper, plugins and cache are used"
        ))
    }
}

async fn run(cli: Cli, typed: Typed) -> anyhow::Result<u8> {
    // A command that loads no recipe would ignore the registry's options: refused, not ignored.
    let loads_none = matches!(
        cli.command,
        Command::Completions { .. }
            | Command::Man { .. }
            | Command::Componentize { .. }
            | Command::New { .. }
            | Command::Zk { .. }
            | Command::Server { .. }
            | Command::Demo { .. }
            | Command::Recipes { command: RecipesCommand::Keygen { .. } }
    );
    // Typed only: the environment's WAZOO_REGISTRY and WAZOO_TRUSTED_KEYS are let be.
    let typed_registry = typed.host_options.iter().any(|o| *o == "--registry" || *o == "--trusted-keys");
    if loads_none && typed_registry {
        return Err(exit::usage("--registry and --trusted-keys are for commands that serve recipes"));
    }
    if let Command::Recipes { command: RecipesCommand::Keygen { id, out } } = &cli.command {
        return commands::rollout::keygen(id, out);
    }
    // Completions and manual pages ask nothing of anyone and read none of the other options.
    match &cli.command {
        Command::Completions { shell } => return manual::completions(*shell),
        Command::Man { dir } => return manual::man(dir.as_deref()),
        Command::Componentize { module, world, output, json } => {
            let made = componentize::componentize(module, world, output)?;
            if *json {
                out!(
                    "{}",
                    serde_json::json!({"output": output.display().to_string(), "world": made.world,
                        "bytes": made.bytes, "adapted": made.adapted})
                );
            } else {
                let adapter = if made.adapted { ", WASI preview 1 adapted" } else { "" };
                out!("wrote {} ({}, {} bytes{adapter})", output.display(), made.world, made.bytes);
            }
            return Ok(0);
        }
        Command::New { command: NewCommand::Bindings { world, lang: _, dir, json } } => {
            let dir = dir.clone().unwrap_or_else(|| PathBuf::from("."));
            let (world, written) = componentize::write_c_bindings(world, &dir)?;
            let files: Vec<String> = written.iter().map(|f| f.display().to_string()).collect();
            if *json {
                out!("{}", serde_json::json!({"world": world, "files": files}));
            } else {
                out!("wrote the C bindings of {world}: {}", files.join(", "));
            }
            return Ok(0);
        }
        _ => {}
    }
    let mut config = host_config(&cli)?;
    // The families described beside the recipes, for the commands that serve them: `claim`,
    // `holders` and the daemon. A description that cannot be read is refused here.
    let described = matches!(
        cli.command,
        Command::Claim { .. } | Command::Holders { .. } | Command::Claims { .. } | Command::Top { .. }
    );
    if described || matches!(cli.command, Command::Serve { .. }) {
        wazoo_runtime::family::load_dir(&cli.plugins)
            .map_err(|e| exit::usage(format!("family description {e}")))?;
    }
    match (cli.command, &cli.server) {
        // Scaffolding asks neither ZooKeeper nor a daemon, with or without --server.
        (Command::New { command: NewCommand::Recipe { name, lang, dir, json } }, _) => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let written = scaffold::new_recipe(&name, lang, &dir)?;
            if json {
                let files: Vec<String> = written.iter().map(|f| f.display().to_string()).collect();
                out!("{}", serde_json::json!({"dir": dir.display().to_string(), "files": files}));
            } else {
                out!(
                    "wrote {} files into {}; see {}",
                    written.len(),
                    dir.display(),
                    dir.join("README.md").display()
                );
            }
            Ok(0)
        }
        (Command::Server { port, data_dir, tick_ms, json }, None) => server(port, data_dir, tick_ms, json).await,
        (
            Command::Serve {
                listen,
                metrics,
                watch_every,
                tenants,
                tls_client_ca,
                token_file,
                insecure,
                max_sessions,
                max_sessions_per_tenant,
                max_instances,
                max_handles,
                max_streams,
                max_ttl,
                group,
                group_secret_file,
                advertise,
                no_registry,
                json,
            },
            None,
        ) => {
            let typed_keys = typed.host_options.contains(&"--trusted-keys");
            if typed.host_options.contains(&"--registry") && no_registry {
                return Err(exit::usage("--registry and --no-registry contradict each other"));
            }
            if typed_keys && no_registry {
                return Err(exit::usage(
                    "--trusted-keys checks the registry's components: it means nothing with --no-registry",
                ));
            }
            if typed_keys && tenants.is_some() {
                return Err(exit::usage(
                    "--trusted-keys is the one host's; with --tenants each tenant names its own (trusted_keys in the tenants file)",
                ));
            }
            // WAZOO_TRUSTED_KEYS is the one host's; with --tenants each tenant names its own.
            let trusted_keys = match (no_registry, tenants.is_some()) {
                (false, false) => cli.trusted_keys.as_deref().map(read_trusted_keys).transpose()?,
                _ => None,
            };
            if let Some(addr) = &advertise {
                if addr.parse::<std::net::SocketAddr>().is_err() && !addr.contains(':') {
                    return Err(exit::usage(format!("--advertise {addr:?}: expected HOST:PORT")));
                }
            }
            if cli.token.is_some() || cli.tls_ca.is_some() {
                return Err(exit::usage(
                    "--token and --tls-ca are a client's; a daemon takes --token-file (or --tenants) and --tls-client-ca",
                ));
            }
            if cli.zookeeper_digest_file.is_some() && tenants.is_some() {
                return Err(exit::usage(
                    "--zookeeper-digest-file is the one host's identity; each tenant has its own (zookeeper_secret)",
                ));
            }
            let tls = match (&cli.tls_cert, &cli.tls_key) {
                (Some(cert), Some(key)) => Some(server_tls(cert, key, tls_client_ca.as_deref())?),
                _ => None,
            };
            let token = token_file.as_deref().map(read_token).transpose()?;
            let metrics_beyond_loopback = match metrics.parse::<std::net::SocketAddr>() {
                Ok(addr) => !addr.ip().is_loopback(),
                Err(_) => false,
            };
            if metrics_beyond_loopback && !insecure {
                return Err(exit::usage(format!(
                    "--metrics {metrics}: refusing to serve metrics and /healthz in plain text beyond loopback \
                     (they name tenants and recipes); give --insecure to do it anyway"
                )));
            }
            if tls.is_none() && !insecure && !listen.ip().is_loopback() {
                return Err(exit::usage(format!(
                    "--listen {listen}: refusing to serve in plain text beyond loopback, where tokens and data \
                     cross the network readable by anyone on the path; give --tls-cert and --tls-key, or --insecure"
                )));
            }
            // The one host's pool; a tenant's is its own (`instances` in the tenants file).
            config.limits.max_instances = max_instances;
            let limits = wazoo_daemon::serve::Bounds {
                sessions: max_sessions,
                sessions_per_tenant: max_sessions_per_tenant,
                handles_per_session: max_handles,
                max_ttl,
                streams: max_streams,
            };
            let group = match (group, group_secret_file) {
                (Some(name), Some(file)) => {
                    let secret = read_secret("--group-secret-file", "group's secret", &file)?;
                    let (hosts, _) = wazoo_runtime::keeper::split_chroot(&config.keeper.zookeeper);
                    // Every ZooKeeper session of this member (each tenant's) asks the fence
                    // before it reconnects.
                    let fence = std::sync::Arc::new(wazoo_daemon::group::MemberFence::default());
                    config.keeper.reconnect_gate = Some(fence.gate());
                    Some(wazoo_daemon::group::GroupJoin {
                        fence,
                        name,
                        secret,
                        advertise: advertise.clone(),
                        hosts: hosts.to_string(),
                        tls: config.keeper.tls.clone(),
                        session_timeout: config.keeper.session_timeout,
                    })
                }
                _ => None,
            };
            let settings = wazoo_daemon::serve::ServeConfig {
                listen,
                metrics: None,
                watch_every,
                tls,
                token,
                bounds: limits,
                group,
                registry: !no_registry,
                trusted_keys,
                advertise,
            };
            serve(config, settings, &metrics, tenants.as_deref(), json).await
        }
        (Command::Demo { rounds }, None) => demo(&cli.plugins, rounds).await,
        // The rest, written once: on the daemon (which refuses the ones above), or here.
        (_, None) if cli.token.is_some() || cli.tls_ca.is_some() || cli.tls_cert.is_some() => {
            Err(exit::usage("--token, --tls-ca, --tls-cert and --tls-key are for --server (and --tls-cert, --tls-key for serve)"))
        }
        (_, Some(_)) if cli.zookeeper_digest_file.is_some() || cli.zookeeper_tls_ca.is_some() => {
            Err(exit::usage(
                "--zookeeper-digest-file and --zookeeper-tls-* set this host's own ZooKeeper session; with --server the daemon's session is used",
            ))
        }
        (_, Some(_)) if !typed.host_options.is_empty() => Err(typed.host_options_refusal()),
        (command, Some(server)) => {
            if cli.token.as_deref().is_some_and(|t| !wazoo_client::valid_token(t)) {
                // The token is a secret: the refusal does not repeat it.
                return Err(exit::usage(
                    "--token (or WAZOO_TOKEN): a token is 1 or more visible ASCII characters (0x21–0x7E), no spaces",
                ));
            }
            let tls = match &cli.tls_ca {
                Some(ca) => {
                    let identity = cli.tls_cert.as_deref().zip(cli.tls_key.as_deref());
                    Some(
                        wazoo_client::Tls::from_files(ca, identity)
                            .map_err(|e| exit::usage(format!("--tls-ca: {e}")))?,
                    )
                }
                None if cli.tls_cert.is_some() => {
                    return Err(exit::usage(
                        "--tls-cert with --server needs --tls-ca, the CA of the daemon's certificate",
                    ))
                }
                None => None,
            };
            let stop_in_jeopardy = stop_in_jeopardy(&command)?;
            let remote = remote::Remote::new(
                server,
                cli.token,
                tls,
                cli.connect_timeout,
                cli.session_timeout,
                stop_in_jeopardy,
            );
            commands::run(&remote, command).await
        }
        // Browsing ZooKeeper needs a session of this process's own (through --server, refused).
        (Command::Zk { command }, None) => commands::zk::zk(&local::Local::new(config), command).await,
        (command, None) if stop_in_jeopardy(&command)? => Err(exit::usage(
            "--stop-in-jeopardy is for a claim held through a daemon group (--server A,B): a local claim is lost, not in jeopardy, when ZooKeeper goes out of reach",
        )),
        (command, None) => {
            if typed.host_options.contains(&"--trusted-keys") && !cli.registry {
                return Err(exit::usage(
                    "--trusted-keys checks the registry's components: give --registry too (or use it with serve)",
                ));
            }
            let trusted = match cli.registry {
                true => cli.trusted_keys.as_deref().map(read_trusted_keys).transpose()?,
                false => None,
            };
            // The registry's own commands need no following host, only its trusted keys.
            let serves = !matches!(command, Command::Recipes { .. });
            let local = local::Local::new(config).following(cli.registry && serves, trusted);
            let ran = commands::run(&local, command).await;
            local.finish().await;
            ran
        }
    }
}

/// This process's host: its ZooKeeper session, plugins directory and cache, from the options.
fn host_config(cli: &Cli) -> anyhow::Result<HostConfig> {
    let digest = match &cli.zookeeper_digest_file {
        Some(path) => Some(read_digest(path)?),
        None => None,
    };
    let tls = match &cli.zookeeper_tls_ca {
        Some(ca) => {
            let text = |flag: &str, path: &std::path::Path| {
                String::from_utf8(read_file(flag, path)?)
                    .map_err(|_| exit::usage(format!("{flag} {}: not PEM text", path.display())))
            };
            let identity = match (&cli.zookeeper_tls_cert, &cli.zookeeper_tls_key) {
                (Some(cert), Some(key)) => {
                    Some((text("--zookeeper-tls-cert", cert)?, text("--zookeeper-tls-key", key)?))
                }
                _ => None,
            };
            let tls = ZkTls { ca: text("--zookeeper-tls-ca", ca)?, identity };
            // Refused now, with the file's fault, rather than as an unreachable ZooKeeper.
            tls.options().map_err(|e| exit::usage(format!("{e:#}")))?;
            Some(tls)
        }
        None => None,
    };
    Ok(HostConfig {
        keeper: KeeperConfig {
            zookeeper: cli.zookeeper.clone(),
            session_timeout: cli.session_timeout,
            connect_timeout: cli.connect_timeout,
            digest,
            tls,
            reconnect_gate: None,
        },
        plugins: cli.plugins.clone(),
        limits: SandboxLimits::default(),
        allowed: None,
        embedded: embedded(),
        cache: match &cli.cache {
            Some(dir) if dir.as_os_str() == "none" => None,
            Some(dir) => Some(dir.clone()),
            None => wazoo_runtime::registry::default_cache_dir(),
        },
    })
}

/// The standard recipes this binary carries (built by `build.rs`), written out for the
/// registry; a file of the same name in the plugins directory overrides each.
fn embedded() -> Option<std::path::PathBuf> {
    mod carried {
        include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
    }
    if carried::EMBEDDED.is_empty() {
        return None;
    }
    match wazoo_runtime::embedded::materialize(carried::EMBEDDED) {
        Ok(dir) => Some(dir),
        Err(e) => {
            tracing::warn!("the standard recipes this binary carries are not served: {e:#}");
            None
        }
    }
}

/// `--trusted-keys FILE`, read and checked strictly: a fault is a usage error naming the file.
fn read_trusted_keys(
    path: &std::path::Path,
) -> anyhow::Result<std::sync::Arc<wazoo_runtime::signing::TrustedKeys>> {
    wazoo_runtime::signing::TrustedKeys::load(path)
        .map(std::sync::Arc::new)
        .map_err(|e| exit::usage(format!("--trusted-keys: {e:#}")))
}

/// `--zookeeper-digest-file`: the `USER:PASSWORD` on the file's first line.
fn read_digest(path: &std::path::Path) -> anyhow::Result<String> {
    let text = String::from_utf8(read_file("--zookeeper-digest-file", path)?)
        .map_err(|_| exit::usage(format!("--zookeeper-digest-file {}: not UTF-8 text", path.display())))?;
    let line = text.lines().next().unwrap_or("").trim();
    match line.split_once(':') {
        Some((user, password)) if !user.is_empty() && !password.is_empty() => Ok(line.to_string()),
        _ => Err(exit::usage(format!(
            "--zookeeper-digest-file {}: its first line must be USER:PASSWORD",
            path.display()
        ))),
    }
}

/// `wazoo serve`: prints `serving gRPC on ADDR` (and the metrics address) once clients can
/// connect; stops on SIGINT or SIGTERM, closing every client's handles.
async fn serve(
    config: HostConfig,
    mut settings: wazoo_daemon::serve::ServeConfig,
    metrics: &str,
    tenants: Option<&std::path::Path>,
    json: bool,
) -> anyhow::Result<u8> {
    settings.metrics = match metrics {
        "off" | "none" => None,
        addr => Some(addr.parse().with_context(|| format!("--metrics: not an address: {addr:?}"))?),
    };
    let specs =
        tenants.map(|file| wazoo_daemon::tenants::load(file).map(|specs| (file, specs))).transpose()?;
    let ready = move |grpc: std::net::SocketAddr, metrics: Option<std::net::SocketAddr>| match metrics {
        _ if json => out!(
            "{}",
            serde_json::json!({"grpc": grpc.to_string(), "metrics": metrics.map(|m| m.to_string())})
        ),
        Some(m) => out!("serving gRPC on {grpc}, metrics on http://{m}/metrics, console on http://{m}/"),
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
        Some((file, specs)) => {
            let mut tenants = Vec::new();
            for spec in &specs {
                tenants.push(wazoo_daemon::tenants::start(spec, &config).await?);
            }
            let (changes, applied) = tokio::sync::mpsc::channel(16);
            tokio::spawn(reload_tenants_on_sighup(file.to_path_buf(), specs, config, changes));
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

/// A file named by option `option`, read whole: an unreadable one is a usage error naming both.
fn read_file(option: &str, path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| exit::usage(format!("{option} {}: {e}", path.display())))
}

/// `serve`'s TLS files, read and checked before anything is announced, each fault a usage error
/// (exit status 2) naming the option and the file: `--tls-cert` must hold a PEM certificate
/// chain, `--tls-key` a PEM private key rustls can sign with that is the key of that chain's
/// first certificate, and `--tls-client-ca` PEM certificates that can be trust anchors.
fn server_tls(
    cert: &std::path::Path,
    key: &std::path::Path,
    client_ca: Option<&std::path::Path>,
) -> anyhow::Result<wazoo_daemon::serve::ServerTls> {
    use rustls::pki_types::pem::{self, PemObject as _};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let refuse = |option: &str, path: &std::path::Path, why: String| {
        exit::usage(format!("{option} {}: {why}", path.display()))
    };
    // The certificates of a PEM file: at least one, every block well formed.
    let certificates = |option: &str, path: &std::path::Path, text: &[u8]| {
        let found = CertificateDer::pem_slice_iter(text)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| refuse(option, path, pem_fault(&e)))?;
        match found.is_empty() {
            true => Err(refuse(option, path, "no certificate in the file".into())),
            false => Ok(found),
        }
    };
    let (cert_pem, key_pem) = (read_file("--tls-cert", cert)?, read_file("--tls-key", key)?);
    let chain = certificates("--tls-cert", cert, &cert_pem)?;
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        pem::Error::NoItemsFound => refuse("--tls-key", key, "no private key in the file".into()),
        e => refuse("--tls-key", key, pem_fault(&e)),
    })?;
    // What the TLS server does with them, done now: the key is loaded, and compared with the
    // certificate's public key.
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(chain, private, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => refuse(
            "--tls-key",
            key,
            format!("not the key of the certificate in --tls-cert {}", cert.display()),
        ),
        rustls::Error::InvalidCertificate(why) => {
            refuse("--tls-cert", cert, format!("not a certificate that can be served: {why}"))
        }
        rustls::Error::General(why) => {
            refuse("--tls-key", key, format!("not a private key that can be used: {why}"))
        }
        e => refuse("--tls-key", key, format!("not a private key that can be used: {e}")),
    })?;
    let client_ca = match client_ca {
        Some(ca) => {
            let text = read_file("--tls-client-ca", ca)?;
            let mut roots = rustls::RootCertStore::empty();
            for anchor in certificates("--tls-client-ca", ca, &text)? {
                roots.add(anchor).map_err(|e| {
                    refuse("--tls-client-ca", ca, format!("not a CA certificate that can be used: {e}"))
                })?;
            }
            Some(text)
        }
        None => None,
    };
    Ok(wazoo_daemon::serve::ServerTls { cert: cert_pem, key: key_pem, client_ca })
}

/// What is wrong with a PEM file, in a few words (the parser's own words can hold a whole line
/// of the file, as bytes).
fn pem_fault(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::MissingSectionEnd { .. } => "not PEM: a block has no END line".into(),
        Error::IllegalSectionStart { .. } => "not PEM: a malformed BEGIN line".into(),
        Error::Base64Decode(_) => "not PEM: a block is not base64".into(),
        Error::SectionTooLarge => "not PEM: a block is too large".into(),
        e => format!("not PEM: {e}"),
    }
}

/// `serve --token-file`: the token on the file's first line, at least 16 characters.
fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    read_secret("--token-file", "token", path)
}

/// The secret (`what`) on the first line of the file named by `option`: at least 16 visible
/// ASCII characters, else a usage error.
fn read_secret(option: &str, what: &str, path: &std::path::Path) -> anyhow::Result<String> {
    let text = String::from_utf8(read_file(option, path)?)
        .map_err(|_| exit::usage(format!("{option} {}: not UTF-8 text", path.display())))?;
    let secret = text.lines().next().unwrap_or("").trim().to_string();
    if secret.len() < 16 || secret.chars().any(|c| !c.is_ascii_graphic()) {
        return Err(exit::usage(format!(
            "{option} {}: the {what} (its first line) must be at least 16 visible ASCII characters",
            path.display()
        )));
    }
    Ok(secret)
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

async fn server(port: u16, data_dir: Option<PathBuf>, tick_ms: u32, json: bool) -> anyhow::Result<u8> {
    // Another server on the port would answer for this one: refuse at once.
    if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
        bail!("cannot serve on 127.0.0.1:{port}: {e}");
    }
    let options = ServerOptions { port, data_dir, tick_ms, ..ServerOptions::default() };
    let server = tokio::task::spawn_blocking(move || ZkServer::start(options)).await??;
    if json {
        out!(
            "{}",
            serde_json::json!({
                "address": server.address(),
                "data_dir": server.data_dir().display().to_string(),
                "log": server.log_path().display().to_string(),
            })
        );
    } else {
        out!(
            "ZooKeeper serving on {} (data {}, log {})",
            server.address(),
            server.data_dir().display(),
            server.log_path().display()
        );
        out!("press Ctrl-C to stop");
    }
    tokio::signal::ctrl_c().await?;
    drop(server);
    Ok(0)
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

/// Whether `command` asks to stop CMD once its claim is in jeopardy (`--stop-in-jeopardy`);
/// refused where it would be ignored.
fn stop_in_jeopardy(command: &Command) -> anyhow::Result<bool> {
    use crate::cli::GroupCommand;
    match command {
        Command::Lock { hold, .. }
        | Command::Rwlock { hold, .. }
        | Command::Semaphore { hold, .. }
        | Command::Elect { hold, .. }
        | Command::Group { command: GroupCommand::Join { hold, .. } } => Ok(hold.stop_in_jeopardy),
        Command::Register { hold, .. } | Command::Partition { hold, .. } if hold.stop_in_jeopardy => {
            Err(exit::usage("--stop-in-jeopardy is for lock, rwlock, semaphore, elect and group join"))
        }
        _ => Ok(false),
    }
}
