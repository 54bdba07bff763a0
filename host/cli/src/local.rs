//! The claim commands' backend on this process's own host: a ZooKeeper session of its own and
//! the recipe components loaded in-process ([`crate::claims::Backend`]).

use std::time::Duration;

use tokio::sync::{Mutex, OnceCell};
use wazoo_runtime::{
    Claim, ConfigHandle, Entry, GroupHandle, Host, HostConfig, Membership, QueueHandle, RecipeError, Want,
    World,
};

use crate::backend::{Backend, Contender, Ending, Failure, Granted, Holding};

/// This process's host, started when first needed.
pub(crate) struct Local {
    config: HostConfig,
    host: OnceCell<Host>,
    /// What lives until [`Backend::end`]: an ephemeral queue item's handle.
    kept: Mutex<Vec<Claim>>,
}

impl Local {
    pub(crate) fn new(config: HostConfig) -> Local {
        Local { config, host: OnceCell::new(), kept: Mutex::new(Vec::new()) }
    }

    /// The host, started (connected to ZooKeeper) on the first call.
    pub(crate) async fn host(&self) -> anyhow::Result<&Host> {
        self.host.get_or_try_init(|| Host::start(self.config.clone())).await
    }
}

impl Backend for Local {
    type Contender = LocalContender;

    async fn contender(&self, want: &Want, recipe: &str, _label: &str) -> anyhow::Result<LocalContender> {
        let inner = self.host().await?.contender(want.clone(), recipe).await?;
        Ok(LocalContender { inner, granted: None })
    }

    async fn queue_put(
        &self,
        path: &str,
        data: Vec<u8>,
        priority: Option<u8>,
        ephemeral: bool,
    ) -> Result<String, Failure> {
        let mut h = self.queue().await?;
        match h.put(path, &data, priority, ephemeral).await {
            Ok(node) if ephemeral => {
                self.kept.lock().await.push(Claim::queue_item(h, node.clone()));
                Ok(node)
            }
            done => closed(h.close().await, done),
        }
    }

    async fn queue_take(&self, path: &str, timeout: Option<Duration>) -> Result<Vec<u8>, Failure> {
        let mut h = self.queue().await?;
        let taken = h.take(path, timeout).await.map(|item| item.data);
        closed(h.close().await, taken)
    }

    async fn queue_len(&self, path: &str) -> Result<u32, Failure> {
        let mut h = self.queue().await?;
        let len = h.len(path).await;
        closed(h.close().await, len)
    }

    async fn config_get(&self, path: &str) -> Result<Option<Entry>, Failure> {
        let mut h = self.config().await?;
        let got = h.get(path).await;
        closed(h.close().await, got)
    }

    async fn config_set(&self, path: &str, data: Vec<u8>, version: Option<i32>) -> Result<i32, Failure> {
        let mut h = self.config().await?;
        let set = h.set(path, &data, version).await;
        closed(h.close().await, set)
    }

    async fn config_watch(&self, path: &str, each: &mut dyn FnMut(Option<&Entry>)) -> Result<(), Failure> {
        let mut h = self.config().await?;
        let mut now = h.get(path).await?;
        loop {
            each(now.as_ref());
            now = h.watch(path, now.as_ref().map(|e| e.version), None).await?;
        }
    }

    async fn counter_get(&self, path: &str) -> Result<i64, Failure> {
        let mut h = self.config().await?;
        let value = h.counter(path).await;
        closed(h.close().await, value)
    }

    async fn counter_add(&self, path: &str, delta: i64) -> Result<i64, Failure> {
        let mut h = self.config().await?;
        let value = h.add(path, delta).await;
        closed(h.close().await, value)
    }

    async fn group_members(&self, path: &str) -> Result<Membership, Failure> {
        let mut h = self.group().await?;
        let members = h.members(path).await;
        closed(h.close().await, members)
    }

    async fn group_watch(&self, path: &str, each: &mut dyn FnMut(&Membership)) -> Result<(), Failure> {
        let mut h = self.group().await?;
        let mut now = h.members(path).await?;
        loop {
            each(&now);
            now = h.watch(path, now.version, None).await?;
        }
    }

    async fn end(&self) {
        for claim in self.kept.lock().await.drain(..) {
            claim.close().await;
        }
    }
}

impl Local {
    async fn queue(&self) -> anyhow::Result<QueueHandle> {
        self.host().await?.queue(World::Queue.default_recipe()).await
    }

    async fn config(&self) -> anyhow::Result<ConfigHandle> {
        self.host().await?.config(World::Config.default_recipe()).await
    }

    async fn group(&self) -> anyhow::Result<GroupHandle> {
        self.host().await?.group(World::Group.default_recipe()).await
    }
}

/// A call's outcome once its handle is closed (`()`, what closing returns).
fn closed<T>((): (), outcome: Result<T, RecipeError>) -> Result<T, Failure> {
    Ok(outcome?)
}

pub(crate) struct LocalContender {
    inner: wazoo_runtime::Contender,
    granted: Option<wazoo_runtime::Granted>,
}

impl Contender for LocalContender {
    type Held = Claim;

    async fn acquire(&mut self, path: &str, timeout: Option<Duration>) -> Result<Granted, Failure> {
        let granted = self.inner.acquire(path, timeout).await?;
        let seen = Granted { node: granted.node().to_string(), token: granted.token() };
        self.granted = Some(granted);
        Ok(seen)
    }

    async fn acknowledge(&mut self, note: &str) -> Result<(), String> {
        match self.inner.election() {
            Some(election) => election.acknowledge(note).await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    async fn hold(self) -> anyhow::Result<Claim> {
        match self.granted {
            Some(granted) => Ok(self.inner.claim(granted)),
            None => {
                self.inner.close().await;
                anyhow::bail!("nothing was acquired")
            }
        }
    }

    async fn close(self) {
        self.inner.close().await
    }

    fn session_timeout(&self) -> Duration {
        self.inner.live().client.session_timeout()
    }
}

impl Holding for Claim {
    fn lost(&self) -> impl std::future::Future<Output = Ending> + Send + 'static {
        let lost = Claim::lost(self);
        async move { Ending::from(lost.await) }
    }

    async fn release(self) -> Result<(), String> {
        Claim::release(self).await.map_err(|e| e.to_string())
    }

    async fn close(self) {
        Claim::close(self).await
    }
}
