//! `2pc coordinate|vote|clean`: two-phase commit.

use serde_json::Value;
use wazoo_runtime::{Outcome, World};

use super::check_path;
use crate::backend::{Backend, Failure};
use crate::cli::TxCommand;
use crate::exit;

/// The transaction recipe's export that `2pc clean` calls (by name, as `wazoo call` does).
const TX_CLEAN: &str = "two-phase-commit.clean";

pub(crate) async fn two_phase_commit(backend: &impl Backend, command: TxCommand) -> anyhow::Result<u8> {
    check_tx(&command)?;
    let tx = command.tx().to_string();
    let failed = |f: Failure| f.into_error(format!("transaction {tx}"));
    let outcome = match command {
        TxCommand::Coordinate { sites, payload, mode, timeout, .. } => {
            backend.tx_coordinate(&tx, &sites, payload.as_bytes(), mode, timeout).await
        }
        TxCommand::Vote { site, ballot, timeout, .. } => backend.tx_vote(&tx, &site, ballot, timeout).await,
        TxCommand::Clean { .. } => {
            let args = Value::Array(vec![Value::String(tx.clone())]);
            let result = backend.call(World::Transaction.default_recipe(), TX_CLEAN, &args).await;
            return tx_cleaned(&tx, &result.map_err(failed)?);
        }
    };
    Ok(tx_outcome(outcome.map_err(failed)?))
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

/// What `2pc clean` says for the recipe's JSON answer: `cleaned TX: OUTCOME` (exit status 0),
/// or why nothing was cleaned (exit status 1).
fn tx_cleaned(tx: &str, result: &Value) -> anyhow::Result<u8> {
    if let Some(outcome) = result.get("ok").and_then(Value::as_str) {
        out!("cleaned {tx}: {outcome}");
        return Ok(0);
    }
    let Some(error) = result.get("err") else {
        anyhow::bail!("transaction {tx}: unexpected answer {result}")
    };
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
    Ok(exit::NOTHING)
}

/// Prints a transaction's outcome: exit status 0 if committed, 6 if aborted.
fn tx_outcome(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Committed => {
            out!("committed");
            0
        }
        Outcome::Aborted => {
            out!("aborted");
            exit::ABORTED
        }
    }
}
