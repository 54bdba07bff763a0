//! The commands, written once against a [`Backend`]: this process's own host (`local`) or a
//! `wazoo serve` daemon (`remote`). [`run`] dispatches every subcommand that runs on a backend; the claim commands are [`crate::claims`], the rest are
//! here by family. Everything a user sees is decided here, whatever the backend: the checks
//! before anything is asked, the defaults, what is printed and the exit statuses.

mod barrier;
mod listing;
mod observe;
mod recipes;
mod register;
pub(crate) mod rollout;
mod top;
mod tx;
mod values;
pub(crate) mod zk;

use std::time::Duration;

use wazoo_runtime::family::Family;
use wazoo_runtime::{Want, World};

use crate::args;
use crate::backend::Backend;
use crate::claims::{self, Asked, Run};
use crate::cli::{Command, GroupCommand, RecipesCommand};
use crate::exit;

/// Runs `command` on `backend`: its exit status. `serve`, `server`, `demo`, `new` and `zk` run
/// on no backend (main runs them itself, before any): here they are refused, as through
/// `--server`. `completions` and `man` ask nothing of anyone and run the same anywhere.
pub(crate) async fn run(backend: &impl Backend, command: Command) -> anyhow::Result<u8> {
    // CMD is looked up before any claim is taken for it: a path meant as a lock, or a typo, is
    // said at once (exit status 127 or 126) rather than after the wait.
    if let Some(cmd) = command.cmd() {
        let checked = crate::supervise::check_command(cmd);
        if let (Err(e), Command::Register { data, .. }) = (&checked, &command) {
            // `register PATH DATA`, the form before CMD followed the path: say where DATA goes.
            let not_found = e.downcast_ref::<exit::Exit>().is_some_and(|x| x.code == exit::NOT_FOUND);
            if not_found && data.is_empty() && cmd.len() == 1 {
                return Err(exit::Exit {
                    code: exit::NOT_FOUND,
                    message: format!("{e} (a registration's data goes in --data {})", cmd[0]),
                }
                .into());
            }
        }
        checked?;
    }
    match command {
        Command::Lock { path, also, id, wait, hold, json, recipe, command } => {
            let run = Run { wait: Some(&wait), hold: &hold, command: &command, json };
            let paths: Vec<String> = std::iter::once(path).chain(also).collect();
            let id = id.unwrap_or_else(args::default_id);
            claims::claim_all(backend, &paths, &recipe, &id, run).await
        }
        Command::Claim { family, path, data, wait, hold, json, recipe, command } => {
            let family = described(&family, data.is_some())?;
            let want = Want::Claim { family, data: data.unwrap_or_default().into_bytes() };
            let recipe = recipe.unwrap_or_else(|| family.recipe.to_string());
            let asked = Asked { want, path: &path, recipe: &recipe, id: &args::default_id() };
            claims::claim(backend, asked, Run { wait: Some(&wait), hold: &hold, command: &command, json })
                .await
        }
        Command::Rwlock { mode, path, id, wait, hold, json, recipe, command } => {
            let id = id.unwrap_or_else(args::default_id);
            let asked = Asked { want: Want::ReadWrite(mode), path: &path, recipe: &recipe, id: &id };
            claims::claim(backend, asked, Run { wait: Some(&wait), hold: &hold, command: &command, json })
                .await
        }
        Command::Semaphore { path, leases, id, wait, hold, json, recipe, command } => {
            let id = id.unwrap_or_else(args::default_id);
            let asked =
                Asked { want: Want::Lease { max_leases: leases }, path: &path, recipe: &recipe, id: &id };
            claims::claim(backend, asked, Run { wait: Some(&wait), hold: &hold, command: &command, json })
                .await
        }
        Command::Elect {
            path,
            id,
            wait,
            hold,
            requeue,
            max_terms,
            backoff,
            format,
            recipe,
            json,
            command,
        } => {
            let id = id.unwrap_or_else(args::default_id);
            let want = Want::Leadership { id: id.clone() };
            let format = format.unwrap_or(crate::cli::ElectionFormat::Latch);
            let recipe = recipe.unwrap_or_else(|| format.recipe().to_string());
            let asked = Asked { want, path: &path, recipe: &recipe, id: &id };
            let run = Run { wait: Some(&wait), hold: &hold, command: &command, json };
            if requeue {
                let again = claims::Requeue { max_terms, backoff: backoff.unwrap_or(Duration::from_secs(1)) };
                claims::requeue(backend, asked, run, again).await
            } else {
                claims::claim(backend, asked, run).await
            }
        }
        Command::Partition { path, member, items, items_file, hold, command } => {
            let items = crate::partition::items(items.as_deref(), items_file.as_deref())?;
            let asked = crate::partition::Asked {
                path: &path,
                member: &member,
                items,
                hold: &hold,
                command: &command,
            };
            crate::partition::partition(backend, asked).await
        }
        Command::Register { path, data, ttl, recipe, json, hold, command } => {
            let data = String::from_utf8(args::value_or_stdin(data)?)
                .map_err(|_| exit::usage("register --data: the data is UTF-8 text"))?;
            let asked = register::Asked {
                path: &path,
                data: &data,
                ttl,
                recipe: &recipe,
                hold: &hold,
                command: &command,
                json,
            };
            register::register_command(backend, asked).await
        }
        Command::Services { path, json } => {
            values::group_list(backend, &path, json, values::Listed::Services).await
        }
        Command::Watch { path, recursive, initial, json, recipe } => {
            values::watch(backend, &path, recursive, initial, json, &recipe).await
        }
        Command::Group { command: GroupCommand::Join { path, name, data, hold, json, command } } => {
            // A malformed name is bad usage, refused before ZooKeeper or a daemon is asked.
            let name = args::node_name(&name).map_err(|why| exit::usage(format!("member name {why}")))?;
            let want = Want::Membership { name, data: args::value_or_stdin(data)? };
            let asked =
                Asked { want, path: &path, recipe: World::Group.default_recipe(), id: &args::default_id() };
            claims::claim(backend, asked, Run { wait: None, hold: &hold, command: &command, json }).await
        }
        Command::Group { command: GroupCommand::List { path, json } } => {
            values::group_list(backend, &path, json, values::Listed::Members).await
        }
        Command::Group { command: GroupCommand::Watch { path, json } } => {
            values::group_watch(backend, &path, json).await
        }
        Command::Queue { command } => values::queue(backend, command).await,
        Command::Config { command } => values::config(backend, command).await,
        Command::Counter { command } => values::counter(backend, command).await,
        Command::Barrier { command, recipe } => barrier::barrier(backend, command, &recipe).await,
        Command::DoubleBarrier { path, count, timeout, recipe, command } => {
            barrier::double_barrier(backend, &path, count, timeout, &recipe, &command).await
        }
        Command::Leader { path, watch, json, recipe } => {
            observe::leader(backend, &path, watch, &recipe, json).await
        }
        Command::Holders { path, kind, leases, json } => {
            let kind = match kind {
                Some(name) => {
                    Some(Family::holders_kind(&name).map_err(|e| exit::usage(format!("--kind: {e}")))?)
                }
                None => None,
            };
            observe::holders(backend, &path, kind, leases, json).await
        }
        Command::Claims { prefix, json } => listing::claims(backend, &prefix, json).await,
        Command::Sessions { json } => listing::sessions(backend, json).await,
        Command::Top { prefix, every } => top::top(backend, &prefix, every).await,
        Command::Revoke { node, grace, json } => observe::revoke(backend, &node, grace, json).await,
        Command::Fence { command } => observe::fence(backend, command).await,
        Command::TwoPhaseCommit { command } => tx::two_phase_commit(backend, command).await,
        Command::Recipes { command: RecipesCommand::List { json } } => recipes::list(backend, json).await,
        Command::Recipes { command: RecipesCommand::Functions { recipe, json: false } } => {
            recipes::functions(backend, &recipe).await
        }
        Command::Recipes { command: RecipesCommand::Functions { recipe, json: true } } => {
            functions_json(backend, &recipe).await
        }
        Command::Recipes {
            command:
                RecipesCommand::Publish {
                    name,
                    file,
                    sign,
                    canary,
                    canary_for,
                    canary_calls,
                    new_protocol,
                    then,
                    json,
                },
        } => {
            let canary = canary.map(|hosts| (hosts, canary_for, canary_calls));
            let then = rollout::Rollout { wait: then.limit(), json };
            rollout::publish(backend, &name, &file, &sign, canary, new_protocol, then).await
        }
        Command::Recipes { command: RecipesCommand::Status { name, then, json } } => {
            rollout::status(backend, &name, then.limit(), json).await
        }
        Command::Recipes { command: RecipesCommand::History { name, json } } => {
            rollout::history(backend, &name, json).await
        }
        Command::Recipes { command: RecipesCommand::Rollback { name, digest, new_protocol, then, json } } => {
            let then = rollout::Rollout { wait: then.limit(), json };
            rollout::rollback(backend, &name, digest.as_deref(), new_protocol, then).await
        }
        // Main runs it before any backend: it asks nothing of anyone.
        Command::Recipes { command: RecipesCommand::Keygen { id, out } } => rollout::keygen(&id, &out),
        Command::Call { recipe, function, args } => recipes::call(backend, &recipe, &function, &args).await,
        Command::Run { component, args } => recipes::run(backend, &component, &args).await,
        Command::Server { .. } => Ok(local_only("server")),
        Command::Serve { .. } => Ok(local_only("serve")),
        Command::Demo { .. } => Ok(local_only("demo")),
        Command::New { .. } => Ok(local_only("new")),
        Command::Componentize { .. } => Ok(local_only("componentize")),
        Command::Zk { .. } => Ok(local_only("zk")),
        // Main runs these before any backend; they ask nothing of anyone, here either.
        Command::Completions { shell } => crate::manual::completions(shell),
        Command::Man { dir } => crate::manual::man(dir.as_deref()),
    }
}

/// `wazoo recipes functions RECIPE --json`: one `{"name","signature"}` per exported function,
/// `name` as `wazoo call` takes it (`lock.acquire`), `signature` the line the text output prints.
async fn functions_json(backend: &impl Backend, recipe: &str) -> anyhow::Result<u8> {
    for signature in backend.functions(recipe).await.map_err(|f| f.into_error("listing recipes"))? {
        let name = signature.split('(').next().unwrap_or_default();
        crate::show::emit(&serde_json::json!({"name": name, "signature": signature}).to_string());
    }
    Ok(0)
}

/// A subcommand the daemon's API has no call for, asked for through `--server`: exit status 2,
/// before anything is asked of anyone.
fn local_only(name: &str) -> u8 {
    eprintln!("wazoo: {name} does not go through --server");
    exit::USAGE
}

/// An election participant's id when `--id` is not given: `HOSTNAME-PID`.

/// The described family `name` for `wazoo claim`, or a usage error saying where it is described.
fn described(name: &str, with_data: bool) -> anyhow::Result<&'static Family> {
    let family = match Family::named(name) {
        Some(family) if family.is_described() => family,
        Some(family) => {
            return Err(exit::usage(format!(
                "{name} is a standard family: use `wazoo {}` (`wazoo claim` takes a described family)",
                match family.name {
                    "election" => "elect",
                    "group" => "group join",
                    other => other,
                }
            )))
        }
        None => {
            let known: Vec<&str> =
                Family::all().into_iter().filter(|f| f.is_described()).map(|f| f.name).collect();
            let known = match known.is_empty() {
                true => "none is described".to_string(),
                false => format!("described: {}", known.join(", ")),
            };
            return Err(exit::usage(format!(
                "no family {name:?}: describe it in {name}{} in the plugins directory ({known})",
                wazoo_runtime::family::DESCRIPTION
            )));
        }
    };
    if with_data && family.data.is_none() {
        return Err(exit::usage(format!("the family {name} takes no --data (its description names none)")));
    }
    Ok(family)
}
