//! Trying a request again through connection loss: for reads and clean-ups, whose repeat is
//! harmless. A leaf: it knows zookeeper-client's errors and nothing of the host's.

/// How many times a read is tried again through connection loss before the guest sees it.
pub(crate) const READ_RETRIES: u32 = 20;

/// Runs `op` again, up to `attempts` more times with a growing pause (at most 0.5 s), while it
/// fails with a connection fault whose outcome is unknown. Only for requests whose repeat is
/// harmless: reads (a watch armed by a lost attempt only fires into nothing) and clean-ups.
pub(crate) async fn retry<T, F, Fut>(attempts: u32, mut op: F) -> Result<T, zookeeper_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, zookeeper_client::Error>>,
{
    use zookeeper_client::Error as E;
    let mut attempt = 0;
    loop {
        match op().await {
            Err(E::ConnectionLoss | E::Timeout | E::Custom(_)) if attempt < attempts => {
                attempt += 1;
                backoff(attempt).await;
            }
            other => return other,
        }
    }
}

/// The pause before try `attempt` (from 1) after a connection fault: 50 ms more each time, at
/// most 0.5 s.
pub(crate) async fn backoff(attempt: u32) {
    tokio::time::sleep(std::time::Duration::from_millis(50 * u64::from(attempt.min(10)))).await;
}
