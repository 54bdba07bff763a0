//! What a recipe writes to its stdout and stderr (a `printf`, a `print()`, a panic's message):
//! sent to the host's log line by line, at `info` under the target `wazoo::guest`, tagged with
//! the recipe, the instance and the stream. A guest cannot flood the log: each instance may log
//! [`LINES_PER_SECOND`] lines a second (the rest are counted, and the count is logged with the
//! next line logged, or when the instance ends), and a line is cut at [`LONGEST_LINE`] bytes.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Lines one instance may log per second.
pub const LINES_PER_SECOND: u32 = 20;
/// The longest line logged, in bytes; the rest of a longer line is cut.
pub const LONGEST_LINE: usize = 1024;

/// Numbers the instances whose output is logged (the `instance` field), across the process.
static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// One instance's two output streams and their shared budget.
#[derive(Clone)]
pub(crate) struct GuestOutput(Arc<Tagged>);

/// Whose output it is, and its budget. The lines still left out when the instance ends are
/// counted in the log then.
struct Tagged {
    recipe: Box<str>,
    instance: u64,
    budget: Mutex<Budget>,
}

impl Drop for Tagged {
    fn drop(&mut self) {
        let dropped = self.budget.get_mut().map(|b| b.dropped).unwrap_or(0);
        if dropped > 0 {
            let (recipe, instance) = (&*self.recipe, self.instance);
            tracing::info!(target: "wazoo::guest", recipe, instance, "{dropped} lines of output left out (at most {LINES_PER_SECOND} a second)");
        }
    }
}

impl GuestOutput {
    /// The output of a new instance of `recipe`.
    pub(crate) fn new(recipe: &str) -> GuestOutput {
        GuestOutput(Arc::new(Tagged {
            recipe: recipe.into(),
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            budget: Mutex::new(Budget { second: Instant::now(), logged: 0, dropped: 0 }),
        }))
    }

    /// The stream named `stream` (`stdout`, `stderr`), for the instance's WASI context.
    pub(crate) fn stream(&self, stream: &'static str) -> Stream {
        Stream { output: self.clone(), stream }
    }

    /// Logs `line` if the budget allows, else counts it.
    fn log(&self, stream: &str, line: &[u8]) {
        let dropped = {
            let mut budget = self.0.budget.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let dropped = if now.duration_since(budget.second) >= Duration::from_secs(1) {
                budget.second = now;
                budget.logged = 0;
                std::mem::take(&mut budget.dropped)
            } else {
                0
            };
            if budget.logged >= LINES_PER_SECOND {
                budget.dropped += 1;
                return;
            }
            budget.logged += 1;
            dropped
        };
        let (recipe, instance) = (&*self.0.recipe, self.0.instance);
        if dropped > 0 {
            tracing::info!(target: "wazoo::guest", recipe, instance, "{dropped} lines of output left out (at most {LINES_PER_SECOND} a second)");
        }
        let cut = &line[..line.len().min(LONGEST_LINE)];
        let text = String::from_utf8_lossy(cut);
        let text = text.trim_end_matches('\r');
        tracing::info!(target: "wazoo::guest", recipe, instance, stream, "{text}");
    }
}

/// Lines logged in the current second, and lines left out.
struct Budget {
    second: Instant,
    logged: u32,
    dropped: u64,
}

/// One of an instance's output streams, as WASI hands it to the guest.
pub(crate) struct Stream {
    output: GuestOutput,
    stream: &'static str,
}

impl IsTerminal for Stream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Stream {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(Lines { output: self.output.clone(), stream: self.stream, partial: Vec::new() })
    }
}

/// Cuts what the guest writes into lines and logs each.
struct Lines {
    output: GuestOutput,
    stream: &'static str,
    /// The start of a line not ended yet.
    partial: Vec<u8>,
}

impl Lines {
    fn flush_partial(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.output.log(self.stream, &line);
        }
    }
}

impl AsyncWrite for Lines {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let me = self.get_mut();
        for &byte in buf {
            if byte == b'\n' {
                let line = std::mem::take(&mut me.partial);
                me.output.log(me.stream, &line);
            } else if me.partial.len() < LONGEST_LINE {
                me.partial.push(byte);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.get_mut().flush_partial();
        Poll::Ready(Ok(()))
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.flush_partial();
    }
}
