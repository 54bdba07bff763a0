//! Takes a lock through a `wazoo serve` daemon, prints its node and fencing token, holds it
//! until Ctrl-C or its loss, and lets it go.
//!
//! ```text
//! cargo run -p wazoo-client --example lock -- 127.0.0.1:50051 /app/lock
//! WAZOO_TOKEN=… WAZOO_TLS_CA=ca.pem cargo run -p wazoo-client --example lock -- https://host:7181 /app/lock
//! ```
//!
//! `WAZOO_TOKEN` is sent with every call; with `WAZOO_TLS_CA` (and, for a daemon that asks for a
//! client certificate, `WAZOO_TLS_CERT` and `WAZOO_TLS_KEY`) the connection is TLS.

use std::path::PathBuf;
use std::time::Duration;

use wazoo_client::{Client, LockOptions, Options, Tls};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(path)) = (args.next(), args.next()) else {
        eprintln!("usage: lock ADDR PATH");
        std::process::exit(2);
    };
    let var = |name: &str| std::env::var_os(name).map(PathBuf::from);
    let tls = match var("WAZOO_TLS_CA") {
        Some(ca) => {
            let (cert, key) = (var("WAZOO_TLS_CERT"), var("WAZOO_TLS_KEY"));
            Some(Tls::from_files(&ca, cert.as_deref().zip(key.as_deref()))?)
        }
        None => None,
    };
    let token = std::env::var("WAZOO_TOKEN").ok();
    let client =
        Client::connect_with(&addr, &Options { token, timeout: Duration::from_secs(5), tls }).await?;
    let lock = client.lock(&path, LockOptions::default()).await?;
    println!("held {} token {}", lock.node(), lock.token());
    tokio::select! {
        lost = lock.lost() => {
            eprintln!("lost: {lost:?}");
            std::process::exit(4);
        }
        _ = tokio::signal::ctrl_c() => {}
    }
    lock.release().await?;
    println!("released");
    Ok(())
}
