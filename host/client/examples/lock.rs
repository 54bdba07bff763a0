//! Takes a lock through a `wazoo serve` daemon, prints its node and fencing token, holds it
//! until Ctrl-C or its loss, and lets it go.
//!
//! ```text
//! cargo run -p wazoo-client --example lock -- 127.0.0.1:50051 /app/lock
//! ```

use std::time::Duration;

use wazoo_client::{Client, LockOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(path)) = (args.next(), args.next()) else {
        eprintln!("usage: lock ADDR PATH");
        std::process::exit(2);
    };
    let client = Client::connect(&addr, None, Duration::from_secs(5)).await?;
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
