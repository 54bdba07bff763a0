//! One KeepAlive stream per connection, for every client session kept through it.
//!
//! A daemon with thousands of client sessions spends most of its idle time on their keepalives.
//! Each connection ([`crate::Client`]) keeps its sessions on one stream, opened with the first
//! session and ended with the last, and sends the keepalives that are due together: a batch
//! crosses HTTP/2 as one frame and is read by one task on each side. A session whose keepalive
//! falls due within a quarter of its interval of a batch goes with that batch, so sessions opened
//! at different moments soon share batches.
//!
//! A session is kept while its [`Keeping`] lives. Dropped, it sends the session's `end`, which
//! closes it on the daemon as the end of a stream of its own did; the stream itself ends with
//! its last session.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Status, Streaming};
use wazoo_proto as pb;
use wazoo_proto::sessions_client::SessionsClient;

use crate::Authed;

/// What the stream says of one session.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The daemon answered the keepalive sent at this instant: it heard from the client then.
    Heard(Instant),
    /// The daemon no longer keeps the session (TTL 0): it ended it.
    Ended,
    /// The stream broke or ended: why, and whether the daemon went silent (the connection
    /// failed) rather than said so.
    Broke { why: String, silent: bool },
}

/// A session kept on its connection's stream, while this lives.
pub(crate) struct Keeping {
    session: u64,
    answers: mpsc::UnboundedReceiver<Answer>,
    control: mpsc::UnboundedSender<Control>,
}

impl Keeping {
    /// The next word on the session: the stream ending without one is a break.
    pub(crate) async fn next(&mut self, addr: &str) -> Answer {
        self.answers.recv().await.unwrap_or_else(|| Answer::Broke {
            why: format!("the keepalive stream to the wazoo daemon at {addr} closed"),
            silent: false,
        })
    }
}

impl Drop for Keeping {
    fn drop(&mut self) {
        // The stream's task lets the session go on the daemon; if the task is over, so is the
        // stream, and the daemon let it go already.
        let _ = self.control.send(Control::Let(self.session));
    }
}

enum Control {
    Keep { session: u64, every: Duration, answers: mpsc::UnboundedSender<Answer> },
    Let(u64),
}

/// The connection's keepalive stream, opened on demand.
pub(crate) struct Keepalives {
    channel: Authed,
    addr: String,
    /// The running stream's task, told of sessions to keep and to let go. None until the first
    /// session, and again once the stream ends.
    open: Arc<tokio::sync::Mutex<Option<mpsc::UnboundedSender<Control>>>>,
}

impl Keepalives {
    pub(crate) fn new(channel: Authed, addr: String) -> Keepalives {
        Keepalives { channel, addr, open: Default::default() }
    }

    /// Keeps `session` alive from now on, a keepalive at least `every`, the first at once.
    pub(crate) async fn keep(&self, session: u64, every: Duration) -> Result<Keeping, Status> {
        let mut open = self.open.lock().await;
        let control = match open.as_ref().filter(|c| !c.is_closed()) {
            Some(control) => control.clone(),
            None => {
                // Unbounded: a batch is sent whole without waiting for the daemon to read it, so
                // the task goes on reading answers whatever the batch's size.
                let (requests, rx) = mpsc::unbounded_channel();
                let replies = SessionsClient::new(self.channel.clone())
                    .keep_alive(UnboundedReceiverStream::new(rx))
                    .await?;
                let (control, commands) = mpsc::unbounded_channel();
                let stream = Stream {
                    requests,
                    replies: replies.into_inner(),
                    commands,
                    addr: self.addr.clone(),
                    kept: HashMap::new(),
                    next: None,
                    open: self.open.clone(),
                };
                tokio::spawn(stream.run());
                *open = Some(control.clone());
                control
            }
        };
        let (tx, answers) = mpsc::unbounded_channel();
        // Sent under the lock: the task ends only under it, with nothing left to read.
        let _ = control.send(Control::Keep { session, every, answers: tx });
        Ok(Keeping { session, answers, control })
    }
}

/// One kept session.
struct Kept {
    every: Duration,
    due: Instant,
    /// When each keepalive not yet answered went out (answers come in order).
    sent: VecDeque<Instant>,
    answers: mpsc::UnboundedSender<Answer>,
}

/// The task of one stream.
struct Stream {
    requests: mpsc::UnboundedSender<pb::KeepAliveRequest>,
    replies: Streaming<pb::KeepAliveReply>,
    commands: mpsc::UnboundedReceiver<Control>,
    addr: String,
    kept: HashMap<u64, Kept>,
    /// When the first keepalive falls due (none while nothing is kept).
    next: Option<Instant>,
    open: Arc<tokio::sync::Mutex<Option<mpsc::UnboundedSender<Control>>>>,
}

impl Stream {
    async fn run(mut self) {
        let broke = loop {
            // The last session let go (or ended by the daemon): the stream ends with it.
            if self.kept.is_empty() && self.finish().await {
                return;
            }
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(Control::Keep { session, every, answers }) => {
                        let now = Instant::now();
                        let kept = Kept { every, due: now, sent: VecDeque::new(), answers };
                        self.kept.insert(session, kept);
                        if let Err(why) = self.send_due(now) {
                            break why;
                        }
                    }
                    Some(Control::Let(session)) => {
                        if self.kept.remove(&session).is_some() {
                            let end = pb::KeepAliveRequest { session, end: true };
                            if self.requests.send(end).is_err() {
                                break self.closed();
                            }
                        }
                    }
                    // Not while the task runs: the connection's `Keepalives` holds a sender until
                    // the task is over.
                    None => return,
                },
                () = sleep_until(self.next) => {
                    if let Err(why) = self.send_due(Instant::now()) {
                        break why;
                    }
                }
                reply = self.replies.message() => match reply {
                    Ok(Some(reply)) => self.answered(reply),
                    Ok(None) => {
                        let why = format!("the wazoo daemon at {} ended the keepalive stream", self.addr);
                        break (why, false);
                    }
                    Err(status) => {
                        let why = format!(
                            "lost the connection to the wazoo daemon at {}: {}",
                            self.addr,
                            status.message()
                        );
                        break (why, true);
                    }
                },
            }
        };
        // No more sessions on this stream: the next one opens another.
        let mut open = self.open.lock().await;
        *open = None;
        self.commands.close();
        let (why, silent) = broke;
        for (_, kept) in self.kept.drain() {
            let _ = kept.answers.send(Answer::Broke { why: why.clone(), silent });
        }
        // Those that asked to be kept meanwhile hear the same.
        while let Ok(command) = self.commands.try_recv() {
            if let Control::Keep { answers, .. } = command {
                let _ = answers.send(Answer::Broke { why: why.clone(), silent });
            }
        }
    }

    /// Sends the keepalives due by `now`, and those due within a quarter of their interval
    /// after it, together.
    fn send_due(&mut self, now: Instant) -> Result<(), (String, bool)> {
        let mut next: Option<Instant> = None;
        let mut closed = false;
        for (session, kept) in self.kept.iter_mut() {
            if kept.due <= now + kept.every / 4 {
                kept.due = now + kept.every;
                kept.sent.push_back(now);
                closed |= self.requests.send(pb::KeepAliveRequest { session: *session, end: false }).is_err();
            }
            next = Some(next.map_or(kept.due, |n| n.min(kept.due)));
        }
        self.next = next;
        match closed {
            true => Err(self.closed()),
            false => Ok(()),
        }
    }

    fn answered(&mut self, reply: pb::KeepAliveReply) {
        let Some(kept) = self.kept.get_mut(&reply.session) else { return };
        let at = kept.sent.pop_front();
        if reply.ttl_ms == 0 {
            if let Some(kept) = self.kept.remove(&reply.session) {
                let _ = kept.answers.send(Answer::Ended);
            }
        } else if let Some(at) = at {
            let _ = kept.answers.send(Answer::Heard(at));
        }
    }

    fn closed(&self) -> (String, bool) {
        (format!("the keepalive stream to the wazoo daemon at {} closed", self.addr), false)
    }

    /// Ends the stream if no session asked to be kept meanwhile: true if it did.
    async fn finish(&mut self) -> bool {
        let mut open = self.open.lock().await;
        if !self.commands.is_empty() {
            return false;
        }
        *open = None;
        self.commands.close();
        true
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
