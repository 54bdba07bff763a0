//! `2pc coordinate|vote|clean`: two-phase commit.

use serde_json::Value;
use wazoo_runtime::{Outcome, World};

use crate::args::check_path;
use crate::backend::{Backend, Failure};
use crate::cli::TxCommand;
use crate::{exit, show};

/// The transaction recipe's export that `2pc clean` calls (by name, as `wazoo call` does).
const TX_CLEAN: &str = "two-phase-commit.clean";

pub(crate) async fn two_phase_commit(backend: &impl Backend, command: TxCommand) -> anyhow::Result<u8> {
    check_tx(&command)?;
    let tx = command.tx().to_string();
    let failed = |f: Failure| f.into_error(format!("transaction {tx}"));
    let (outcome, json) = match command {
        TxCommand::Coordinate { sites, payload, mode, timeout, json, .. } => {
            (backend.tx_coordinate(&tx, &sites, payload.as_bytes(), mode, timeout).await, json)
        }
        TxCommand::Vote { site, ballot, timeout, json, .. } => {
            (backend.tx_vote(&tx, &site, ballot, timeout).await, json)
        }
        TxCommand::Clean { json, .. } => {
            let args = Value::Array(vec![Value::String(tx.clone())]);
            let result = backend.call(World::Transaction.default_recipe(), TX_CLEAN, &args).await;
            return tx_cleaned(&tx, &result.map_err(failed)?, json);
        }
    };
    Ok(tx_outcome(&tx, outcome.map_err(failed)?, json))
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

/// What `2pc clean` says for the recipe's JSON answer: `cleaned TX: OUTCOME` (JSON
/// `{"tx","outcome"}`, exit status 0), or why nothing was cleaned (exit status 1).
fn tx_cleaned(tx: &str, result: &Value, json: bool) -> anyhow::Result<u8> {
    if let Some(outcome) = result.get("ok").and_then(Value::as_str) {
        match json {
            false => out!("cleaned {tx}: {outcome}"),
            true => show::line(serde_json::json!({"tx": tx, "outcome": outcome})),
        }
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

/// Prints a transaction's outcome (JSON `{"tx","outcome"}`): exit status 0 if committed, 6 if
/// aborted.
fn tx_outcome(tx: &str, outcome: Outcome, json: bool) -> u8 {
    let (word, status) = match outcome {
        Outcome::Committed => ("committed", 0),
        Outcome::Aborted => ("aborted", exit::ABORTED),
    };
    match json {
        false => out!("{word}"),
        true => show::line(serde_json::json!({"tx": tx, "outcome": word})),
    }
    status
}
