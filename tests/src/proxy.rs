//! A TCP proxy between a client under test and ZooKeeper, for faults a real network produces:
//! `freeze` stops every byte both ways without closing anything (a partition, or a stalled
//! peer), `thaw` lets them flow again.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    port: u16,
    frozen: Arc<watch::Sender<bool>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `upstream`.
    pub async fn start(upstream: &str) -> Proxy {
        let upstream: SocketAddr = upstream.parse().expect("upstream host:port");
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(watch::channel(false).0);
        let gate = frozen.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else { continue };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(client_read, server_write, gate.subscribe()));
                tokio::spawn(pump(server_read, client_write, gate.subscribe()));
            }
        });
        Proxy { port, frozen, accept }
    }

    /// `host:port` for the client under test.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    pub fn thaw(&self) {
        self.frozen.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies one direction, holding still while frozen; an end of stream closes the other side.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if frozen.wait_for(|f| !*f).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if frozen.wait_for(|f| !*f).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
