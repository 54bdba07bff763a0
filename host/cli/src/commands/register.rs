//! `wazoo register PATH [--data DATA] [--ttl DUR] [CMD]`: a registration kept present while CMD runs
//! (Curator's `PersistentNode`, service discovery), through the `registration` recipe's exports
//! by name (`Backend::instance`), so it runs locally and through a daemon alike.

use std::time::Duration;

use serde_json::{json, Value};

use crate::args::{check_path, human, HoldArgs};
use crate::backend::{Backend, Failure, Instance};
use crate::exit;
use crate::supervise::{exited, run_under, Cmd, Ended, Signals};

/// How long one `tend` waits when there is no TTL to keep alive. Short: through a daemon, a
/// `tend` the command's end cancels still runs there until its wait ends, and the
/// registration's end waits for it.
const TEND: Duration = Duration::from_secs(2);
/// How long CMD's processes have after SIGTERM before SIGKILL, without `--grace`.
const GRACE: Duration = Duration::from_secs(2);
/// The wait before trying again after a failure (ZooKeeper out of reach, a new session).
const RETRY: Duration = Duration::from_secs(1);
/// The shortest `--ttl`: tended every third of it, so at most three requests a second, and
/// longer than any tick ZooKeeper's servers are run with (the TTL is theirs to honour).
const MIN_TTL: Duration = Duration::from_secs(1);
/// How long the registration's end may take beyond one `tend`'s wait (which a daemon lets run
/// out first): the node deleted, or left to its session's end or its TTL when ZooKeeper does not
/// answer in time.
const UNREGISTER: Duration = Duration::from_secs(5);

/// What `wazoo register` was asked.
pub(crate) struct Asked<'a> {
    pub(crate) path: &'a str,
    pub(crate) data: &'a str,
    pub(crate) ttl: Option<Duration>,
    pub(crate) recipe: &'a str,
    pub(crate) hold: &'a HoldArgs,
    pub(crate) command: &'a [String],
    /// Without a command: the `registered` line as JSON, `{"path","data"}`.
    pub(crate) json: bool,
}

/// The error kind of a `{"err": …}` result (`"node-exists"`, or the case of `{"case": text}`),
/// or `None` for an ok result.
fn error_kind(result: &Value) -> Option<String> {
    let err = result.get("err")?;
    Some(match err {
        Value::String(kind) => kind.clone(),
        Value::Object(o) => o.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    })
}

/// A registration held by one recipe instance.
struct Registered<I> {
    instance: I,
}

/// Why the path was not (or is no longer) registered.
enum NotRegistered {
    /// Another session's ephemeral node is there (`node-exists`): its registration, never
    /// taken over.
    Taken,
    /// What is there is no registration (`invalid-argument`: a persistent node where an
    /// ephemeral registration belongs), in the recipe's words: never taken over either.
    Refused(String),
    /// Anything else (ZooKeeper out of reach, a new session, the recipe failed), said as it is:
    /// worth another try once registered.
    Failed(String),
}

impl NotRegistered {
    /// The refusal in a `{"err"}` result of kind `kind`.
    fn of(kind: &str, result: &Value, path: &str) -> NotRegistered {
        match (kind, &result["err"]) {
            ("node-exists", _) => NotRegistered::Taken,
            ("invalid-argument", Value::Object(o)) => match o.get("invalid-argument") {
                Some(Value::String(text)) => NotRegistered::Refused(text.clone()),
                _ => NotRegistered::Refused(format!("{path}: {}", result["err"])),
            },
            ("unimplemented", _) => NotRegistered::Failed(format!(
                "{path}: the ZooKeeper servers do not enable TTL nodes (extendedTypesEnabled)"
            )),
            _ => NotRegistered::Failed(format!("{path}: {}", result["err"])),
        }
    }

    /// Whether it is final: the path is someone else's, or no registration at all.
    fn is_final(&self) -> bool {
        !matches!(self, NotRegistered::Failed(_))
    }

    /// What it says once registered, when it ends the registration.
    fn lost(&self, path: &str) -> String {
        match self {
            NotRegistered::Taken => format!("another session registered {path}"),
            NotRegistered::Refused(text) | NotRegistered::Failed(text) => text.clone(),
        }
    }
}

/// Registers `asked` on a fresh instance: the instance, or why not.
async fn register<B: Backend>(
    backend: &B,
    asked: &Asked<'_>,
) -> Result<Registered<B::Instance>, NotRegistered> {
    let label = format!("register {}", asked.path);
    let instance =
        backend.instance(asked.recipe, &label).await.map_err(|e| NotRegistered::Failed(format!("{e:#}")))?;
    register_on(instance, asked).await
}

/// Registers `asked` on `instance` (closed if that fails): the registration, or why not.
async fn register_on<I: Instance>(
    mut instance: I,
    asked: &Asked<'_>,
) -> Result<Registered<I>, NotRegistered> {
    let ttl_ms = asked.ttl.map(|t| t.as_millis() as u64);
    let args = json!([asked.path, asked.data, ttl_ms]);
    match instance.call("registration.register", &args).await {
        Ok(result) => match error_kind(&result) {
            None => Ok(Registered { instance }),
            Some(kind) => {
                instance.close().await;
                Err(NotRegistered::of(&kind, &result, asked.path))
            }
        },
        Err(failure) => {
            instance.close().await;
            Err(NotRegistered::Failed(format!("{:#}", failure.into_error("registering"))))
        }
    }
}

/// `wazoo register`: registers, runs CMD (or waits for a signal), keeps the registration present
/// meanwhile, registering again after a session's end, and unregisters at the end: CMD's status,
/// 0 after a signal without CMD. A path another session holds is exit status 3 at the start, the
/// lost status (CMD stopped) later; a persistent node there is a definite no (1) at the start,
/// the lost status later. A signal before the path is registered, or while it is registered
/// again without CMD, is 128 + the signal.
pub(crate) async fn register_command(backend: &impl Backend, asked: Asked<'_>) -> anyhow::Result<u8> {
    check_path("registration", asked.path)?;
    if let Some(ttl) = asked.ttl.filter(|t| *t < MIN_TTL) {
        return Err(exit::usage(format!("--ttl {}: a TTL is at least {}", human(ttl), human(MIN_TTL))));
    }
    let mut signals = Signals::new()?;
    let registered = match signals.interrupt(register(backend, &asked)).await {
        Ok(Ok(registered)) => registered,
        Ok(Err(NotRegistered::Taken)) => {
            eprintln!("wazoo: {} is another session's registration", asked.path);
            return Ok(exit::CONFLICT);
        }
        Ok(Err(NotRegistered::Refused(why))) => {
            return Err(exit::Exit { code: exit::NOTHING, message: why }.into())
        }
        Ok(Err(NotRegistered::Failed(why))) => {
            return Err(exit::Exit { code: exit::UNAVAILABLE, message: why }.into())
        }
        Err(caught) => {
            eprintln!("wazoo: {} before {} was registered", caught.name(), asked.path);
            return Ok(caught.status());
        }
    };
    tracing::info!(path = asked.path, "registered");
    let grace = asked.hold.grace.unwrap_or(GRACE);
    let env = vec![
        ("WAZOO_REGISTERED_PATH".to_string(), asked.path.to_string()),
        ("WAZOO_REGISTERED_DATA".to_string(), asked.data.to_string()),
    ];
    if asked.command.is_empty() {
        match asked.json {
            false => crate::show::emit(&format!("registered {}", asked.path)),
            true => crate::show::line(json!({"path": asked.path, "data": asked.data})),
        }
    }
    // Tend at least three times per TTL, so a TTL node is touched in time.
    let every = asked.ttl.map(|t| t / 3).unwrap_or(TEND);
    // The registration, while there is one: none while it is being made again.
    let mut kept = Some(registered);
    let tending = tend(backend, &asked, &mut kept, every);
    let cmd = Cmd { command: asked.command, env: &env, grace, leftovers: None };
    let ended = run_under(cmd, &mut signals, tending).await;
    let status = match ended {
        Err(e) => {
            unregister(backend, &asked, kept, Duration::ZERO).await;
            return Err(e);
        }
        Ok(Ended::Exited(status)) => exited(status),
        Ok(Ended::Signalled(caught)) if kept.is_none() => {
            eprintln!("wazoo: {} before {} was registered again", caught.name(), asked.path);
            caught.status()
        }
        Ok(Ended::Signalled(_)) => 0,
        // Lost for good (said, CMD stopped): what is left of it closed, no unregistering.
        Ok(Ended::By(left)) => {
            if let Some(instance) = left {
                bounded_close(instance, asked.path).await;
            }
            return Ok(asked.hold.lost_exit_code);
        }
    };
    if let Err(caught) = signals.interrupt(unregister(backend, &asked, kept, every)).await {
        eprintln!(
            "wazoo: {} while deleting {}: it stays until its session ends or its TTL passes",
            caught.name(),
            asked.path
        );
    }
    Ok(status)
}

/// Keeps the registration in `kept` present: tends it every `every`, and registers again after
/// a session's end (ZooKeeper out of reach, the recipe failed), `kept` empty meanwhile. Resolves
/// only when it is lost for good (the path another session's, or no registration at all), having
/// said why on stderr: with the instance still to close, if any. Dropped (CMD ended, a signal
/// without CMD), it leaves `kept` as it was: one tend, or one registering again, given up.
async fn tend<B: Backend>(
    backend: &B,
    asked: &Asked<'_>,
    kept: &mut Option<Registered<B::Instance>>,
    every: Duration,
) -> Option<B::Instance> {
    // What is said once it is lost, before CMD (if any) is stopped.
    let lost = |not: &NotRegistered| match asked.command.is_empty() {
        true => eprintln!("wazoo: {}", not.lost(asked.path)),
        false => eprintln!("wazoo: {}; stopping the command", not.lost(asked.path)),
    };
    loop {
        let registered = kept.as_mut().expect("registered while tended");
        let tend_args = json!([every.as_millis() as u64]);
        // One tend at a time, kept across signals forwarded to CMD: a tend given up would end
        // its instance, and the registration would blink.
        let outcome = registered.instance.call("registration.tend", &tend_args).await;
        let (kind, not) = match outcome {
            Ok(result) => match error_kind(&result) {
                Some(kind) => {
                    let not = NotRegistered::of(&kind, &result, asked.path);
                    (kind, not)
                }
                None => {
                    match result.get("ok").and_then(Value::as_str) {
                        Some("recreated") => eprintln!("wazoo: {} was gone: registered again", asked.path),
                        Some("corrected") => {
                            eprintln!("wazoo: the data of {} was changed: set back", asked.path)
                        }
                        _ => {}
                    }
                    continue;
                }
            },
            Err(Failure::Timeout) => continue,
            Err(failure) => {
                let why = format!("{:#}", failure.into_error("tend"));
                (why.clone(), NotRegistered::Failed(why))
            }
        };
        if not.is_final() {
            lost(&not);
            return kept.take().map(|registered| registered.instance);
        }
        // The session ended, ZooKeeper is out of reach, the recipe failed: register again on a
        // fresh instance (in the host's new session) while the command runs on.
        eprintln!("wazoo: tending {} failed ({kind}); registering again", asked.path);
        let old = kept.take().expect("registered while tended");
        match register_again(backend, asked, old).await {
            Again::Registered(again) => {
                *kept = Some(again);
                eprintln!("wazoo: {} registered again", asked.path);
            }
            Again::TakenUp(again) => {
                *kept = Some(again);
                eprintln!(
                    "wazoo: {} taken up, the same node, through another daemon of the group",
                    asked.path
                );
            }
            Again::Lost(not) => {
                lost(&not);
                return None;
            }
        }
    }
}

/// How registering again ended.
enum Again<I> {
    /// Registered, on a fresh instance.
    Registered(Registered<I>),
    /// The registration's node taken up by a fresh instance in the same session, after the
    /// old instance stayed behind on a daemon that went ([`Instance::renew`]).
    TakenUp(Registered<I>),
    /// The path is someone else's now, or no registration at all.
    Lost(NotRegistered),
}

/// Registers `asked` again after tending `old` failed. If `old` stayed behind on a daemon that
/// went, its session taken up by another member of the group, a fresh instance in that session
/// takes the node up (the same node: watchers see no blink). Otherwise `old` is closed, then a
/// fresh instance tried once every [`RETRY`] for as long as that fails (ZooKeeper out of reach,
/// a session being made). Another session's registration, or a persistent node, at the path
/// ends it: lost. (CMD's end, or a signal without CMD, ends it too, by dropping it.)
async fn register_again<B: Backend>(
    backend: &B,
    asked: &Asked<'_>,
    old: Registered<B::Instance>,
) -> Again<B::Instance> {
    let mut instance = old.instance;
    if instance.renew(&[asked.path]).await {
        match register_on(instance, asked).await {
            Ok(registered) => return Again::TakenUp(registered),
            Err(NotRegistered::Failed(why)) => eprintln!("wazoo: {why}; trying again"),
            Err(not) => return Again::Lost(not),
        }
    } else {
        bounded_close(instance, asked.path).await;
    }
    loop {
        match register(backend, asked).await {
            Ok(registered) => return Again::Registered(registered),
            Err(NotRegistered::Failed(why)) => {
                eprintln!("wazoo: {why}; trying again");
                tokio::time::sleep(RETRY).await;
            }
            Err(not) => return Again::Lost(not),
        }
    }
}

/// Closes `instance` (its ephemeral nodes deleted), giving up after [`UNREGISTER`] when
/// ZooKeeper does not answer: what is left goes with the session.
async fn bounded_close<I: Instance>(instance: I, path: &str) {
    if tokio::time::timeout(UNREGISTER, instance.close()).await.is_err() {
        tracing::warn!(path, "closing the registration's instance timed out");
    }
}

/// Ends the registration, if any: its node deleted. The instance's last `tend` was cancelled,
/// which ends it (its ephemeral node deleted); a TTL node is deleted by a fresh instance, also
/// when the registration was being made again. Best effort, bounded by `tend` (at most
/// [`TEND`]) and [`UNREGISTER`]: what ZooKeeper does not delete in time goes with the session, or
/// once its TTL passes.
async fn unregister<B: Backend>(
    backend: &B,
    asked: &Asked<'_>,
    registered: Option<Registered<B::Instance>>,
    tend: Duration,
) {
    let delete = async {
        if let Some(registered) = registered {
            registered.instance.close().await;
        }
        if asked.ttl.is_none() {
            return;
        }
        match register(backend, asked).await {
            Ok(mut again) => {
                if let Err(failure) = again.instance.call("registration.unregister", &json!([])).await {
                    eprintln!("wazoo: {:#}", failure.into_error(format!("deleting {}", asked.path)));
                }
                again.instance.close().await;
            }
            Err(NotRegistered::Taken) => {}
            Err(NotRegistered::Refused(why) | NotRegistered::Failed(why)) => {
                eprintln!("wazoo: deleting {}: {why}", asked.path)
            }
        }
    };
    // A tend still running in a daemon ends with the instance's session, so the wait for it is
    // short whatever the TTL.
    let limit = tend.min(TEND) + UNREGISTER;
    if tokio::time::timeout(limit, delete).await.is_err() {
        let left = if asked.ttl.is_some() { "until its TTL passes" } else { "until its session ends" };
        eprintln!("wazoo: deleting {}: no answer within {}; it stays {left}", asked.path, human(limit));
    }
}
