//! Taking up the work of another member of the group (`wazoo serve --group`): its ZooKeeper
//! sessions, resumed here with their ids and passwords, and its client sessions, rebuilt on
//! them. A client then comes back with `Reattach` and takes its claims up again (`Resume`, or
//! an `Acquire` sent again with its claim id); a client that does not come back within its TTL
//! ends as any other, and what it held is deleted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tonic::Status;

use super::state::{Adopted, ClientSession, Counted, State};
use crate::group::{hex, unhex, Group, SessionRecord, LEASE};
use crate::wire;

/// How long a member that seems dead is given to answer before its work is adopted.
const PROBE: Duration = Duration::from_millis(300);

/// What a member's address says when probed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    /// It answers a health check: the member lives.
    Answers,
    /// Nothing listens there: the member's process is gone.
    Refused,
    /// It does not answer in time: the member may be frozen or cut off, and alive.
    Silent,
}

/// The group as the server sees it: the records, and this daemon's states by tenant.
pub(crate) struct Adopter {
    pub(crate) group: Arc<Group>,
    states: Mutex<HashMap<Option<String>, Weak<State>>>,
    /// ZooKeeper sessions adopted here, still serving some client.
    adopted: Mutex<Vec<Weak<Adopted>>>,
    /// One adoption at a time; the members whose work this daemon has taken up.
    adopting: tokio::sync::Mutex<std::collections::HashSet<String>>,
    /// Whether the members serve TLS (the probe then only sees whether the port answers).
    tls: bool,
}

impl Adopter {
    pub(crate) fn new(group: Arc<Group>, tls: bool) -> Adopter {
        Adopter {
            group,
            states: Mutex::default(),
            adopted: Mutex::default(),
            adopting: Default::default(),
            tls,
        }
    }

    /// Serves `state`'s tenant from now on (a tenant added or replaced).
    pub(crate) fn serve(&self, state: &Arc<State>) {
        self.states.lock().unwrap().insert(state.tenant.clone(), Arc::downgrade(state));
    }

    fn state(&self, tenant: &Option<String>) -> Option<Arc<State>> {
        self.states.lock().unwrap().get(tenant).and_then(Weak::upgrade)
    }

    /// The ZooKeeper sessions this daemon serves on: its own hosts' and those it adopted.
    pub(crate) async fn sessions(&self) -> Vec<SessionRecord> {
        let states: Vec<Arc<State>> =
            self.states.lock().unwrap().values().filter_map(Weak::upgrade).collect();
        let mut records = Vec::new();
        for state in states {
            if let Ok(live) = state.host.live().await {
                let (id, password) = live.session_parts();
                records.push(SessionRecord { tenant: state.tenant.clone(), id, password: hex(&password) });
            }
        }
        let adopted: Vec<Arc<Adopted>> = {
            let mut all = self.adopted.lock().unwrap();
            all.retain(|a| a.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        records.extend(
            adopted.iter().filter(|a| a.clients.load(Ordering::Acquire) > 0).map(|a| a.record.clone()),
        );
        records
    }

    /// Records the sessions now, and again whenever they change (a session rebuilt after it
    /// expired, a tenant added, an adoption), looking every `every`.
    pub(crate) async fn keep_recording(self: Arc<Self>, every: Duration) {
        let mut last = None;
        loop {
            let now = self.sessions().await;
            if last.as_ref() != Some(&now) {
                match self.group.record_sessions(&now).await {
                    Ok(()) => last = Some(now),
                    Err(e) => tracing::warn!("{e:#}"),
                }
            }
            tokio::time::sleep(every).await;
        }
    }

    /// `Sessions.Reattach` on `state`: the session, taken up here (adopting the work of the
    /// member that served it if that member is gone).
    pub(crate) async fn reattach(
        &self,
        state: &Arc<State>,
        session: u64,
        secret: &[u8],
    ) -> Result<Arc<ClientSession>, Status> {
        use sha2::Digest as _;
        use subtle::ConstantTimeEq as _;
        let presented: [u8; 32] = sha2::Sha256::digest(secret).into();
        let unknown = || {
            wire::unknown_session(format!(
                "session: {session} is not open in this group (expired, closed, or not this secret)"
            ))
        };
        let matches = |known: &[u8]| known.len() == 32 && bool::from(known.ct_eq(&presented));
        if let Ok(s) = state.session(session) {
            return match s.secret.as_ref().is_some_and(|k| matches(k)) {
                true => Ok(s),
                false => Err(unknown()),
            };
        }
        let record =
            self.group.client_record(session).await.map_err(wire::no_zookeeper)?.ok_or_else(unknown)?;
        if !matches(&unhex(&record.secret)) || record.tenant != state.tenant || record.member == self.group.me
        {
            return Err(unknown());
        }
        // A member that left (its node is gone) is not waited for: it fences itself.
        let mut probe = Probe::Refused;
        if let Some(address) = self.group.member_address(&record.member).await.map_err(wire::no_zookeeper)? {
            probe = self.probe(&address).await;
            if probe == Probe::Answers {
                return Err(wire::elsewhere(format!(
                    "member: the daemon at {address} serves session {session} and still answers: reattach there"
                )));
            }
            tracing::warn!(member = %record.member, %address, ?probe, "a member of the group does not answer: adopting its sessions");
        }
        self.adopt(&record.member, probe == Probe::Silent).await?;
        state.session(session).map_err(|_| unknown())
    }

    /// Whether the member at `address` answers a health check within [`PROBE`], or refuses
    /// the connection.
    async fn probe(&self, address: &str) -> Probe {
        let addr = address.trim_start_matches("http://").trim_start_matches("https://").to_string();
        match tokio::time::timeout(PROBE, tokio::net::TcpStream::connect(&addr)).await {
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Probe::Refused,
            Ok(Ok(_)) if self.tls => return Probe::Answers,
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return Probe::Silent,
        }
        let probe = async {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .ok()?
                .connect()
                .await
                .ok()?;
            let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
            health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.ok()
        };
        match tokio::time::timeout(PROBE, probe).await {
            Ok(Some(_)) => Probe::Answers,
            _ => Probe::Silent,
        }
    }

    /// Takes up `member`'s ZooKeeper sessions and client sessions. A member that may be alive
    /// (`uncertain`) is given [`LEASE`] to find the adoption first (see `group`'s doc on fencing).
    async fn adopt(&self, member: &str, uncertain: bool) -> Result<(), Status> {
        let mut done = self.adopting.lock().await;
        // The clients of one member reattach together: the first adopts, the others find it done.
        if done.contains(member) {
            return Ok(());
        }
        match self.group.claim_adoption(member).await.map_err(wire::no_zookeeper)? {
            None => {}
            Some(adopter) if adopter == self.group.me => {}
            Some(adopter) => {
                let at = self.group.member_address(&adopter).await.ok().flatten().unwrap_or_default();
                return Err(wire::elsewhere(format!(
                    "member: the daemon at {at} is taking these sessions up: reattach there"
                )));
            }
        }
        let started = Instant::now();
        if uncertain {
            tokio::time::sleep(LEASE).await;
        }
        // By ZooKeeper session: a member serves a tenant on its own session and on those it
        // adopted.
        let mut adopted: HashMap<i64, Arc<Adopted>> = HashMap::new();
        for record in self.group.sessions_of(member).await.map_err(wire::no_zookeeper)? {
            let Some(state) = self.state(&record.tenant) else {
                tracing::warn!(tenant = ?record.tenant, "adopting: this daemon does not serve that tenant");
                continue;
            };
            match state.host.adopt(record.id, unhex(&record.password)).await {
                Ok(host) => {
                    let a = Arc::new(Adopted { host, record: record.clone(), clients: AtomicUsize::new(0) });
                    adopted.insert(record.id, a);
                }
                Err(e) => tracing::warn!(tenant = ?record.tenant, "adopting a ZooKeeper session: {e:#}"),
            }
        }
        let mut clients = 0;
        for (id, mut record) in self.group.clients_of(member).await.map_err(wire::no_zookeeper)? {
            let (Some(state), Some(a)) = (self.state(&record.tenant), adopted.get(&record.zookeeper_session))
            else {
                // Its ZooKeeper session is gone, and its claims with it.
                self.group.forget_client(id, member).await;
                continue;
            };
            let ttl = Duration::from_millis(record.ttl_ms);
            let secret: Option<[u8; 32]> = unhex(&record.secret).try_into().ok();
            let session = Arc::new(ClientSession {
                counted: Mutex::new(Counted::new(&state.open, u32::MAX)),
                pending: Arc::default(),
                keepers: Mutex::new(0),
                id,
                name: record.name.clone(),
                peer: Mutex::new(None),
                opened: std::time::SystemTime::now(),
                ttl,
                deadline: Mutex::new(Instant::now() + ttl),
                handles: Mutex::default(),
                waits: Mutex::default(),
                closed: watch::channel(false).0,
                host: a.host.clone(),
                secret,
                adopted: Some(a.clone()),
            });
            a.clients.fetch_add(1, Ordering::AcqRel);
            state.sessions.lock().unwrap().insert(id, session);
            record.member = self.group.me.clone();
            if let Err(e) = self.group.record_client(id, &record).await {
                tracing::warn!("{e:#}");
            }
            clients += 1;
        }
        // A session with no client left closes when `adopted` is dropped, below.
        self.adopted.lock().unwrap().extend(adopted.values().map(Arc::downgrade));
        if let Err(e) = self.group.record_sessions(&self.sessions().await).await {
            tracing::warn!("{e:#}");
        }
        self.group.adopted(member).await;
        done.insert(member.to_string());
        tracing::info!(
            member,
            sessions = adopted.len(),
            clients,
            took_ms = started.elapsed().as_millis() as u64,
            "adopted a member's sessions"
        );
        Ok(())
    }
}
