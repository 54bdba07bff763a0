//! The config family: a value read, set, deleted and watched, and counters read and added to
//! (in kazoo's or Curator's formats); and a value as a `ConfigEntry`, a counter's format from
//! its request.

use tonic::{Request, Response, Status};

use super::{or, Service, STREAM_POLL};
use crate::serve::Events;
use crate::wire::{self, status};
use wazoo_runtime::error::RecipeError;
use wazoo_runtime::{CounterFormat, Entry, World, ZkError};

use wazoo_proto as pb;

pub(super) async fn config_get(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<pb::ConfigEntry>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "ConfigGet",
        or(&req.recipe, World::Config.default_recipe()),
        config,
        |h| h.get(&req.path),
        entry
    )
}

pub(super) async fn config_set(
    service: &Service,
    request: Request<pb::ConfigSetRequest>,
) -> Result<Response<pb::ConfigEntry>, Status> {
    let req = request.into_inner();
    once!(
        service,
        "ConfigSet",
        or(&req.recipe, World::Config.default_recipe()),
        config,
        |h| h.set(&req.path, &req.data, req.expected_version),
        |version| pb::ConfigEntry { exists: true, data: req.data.clone(), version }
    )
}

pub(super) async fn config_delete(
    service: &Service,
    request: Request<pb::ConfigDeleteRequest>,
) -> Result<Response<pb::Empty>, Status> {
    let req = request.into_inner();
    service
        .measured("ConfigDelete", "config", async {
            wazoo_runtime::paths::check_node(&req.path)
                .map_err(|why| status(RecipeError::Zk(ZkError::InvalidPath(why))))?;
            let live = service.live().await?;
            let zk = |e: ZkError| match e {
                ZkError::NoNode | ZkError::BadVersion | ZkError::NotEmpty => status(RecipeError::Zk(e)),
                e => wire::no_zookeeper(anyhow::anyhow!(
                    "deleting {}: {}",
                    req.path,
                    wazoo_runtime::error::describe(&e)
                )),
            };
            // The WIT config interface has no delete: done here, on this tenant's own session.
            let stat = live.zk().exists(&req.path).await.map_err(zk)?;
            if let Some(owner) = stat.map(|s| s.ephemeral_owner).filter(|o| *o != 0) {
                return Err(wire::invalid_argument(format!(
                    "invalid-argument: {} is an ephemeral node of session 0x{owner:x}: someone's claim, \
                 registration or membership, not a value",
                    req.path
                )));
            }
            live.zk().delete(&req.path, req.version).await.map_err(zk)?;
            Ok(pb::Empty {})
        })
        .await
}

pub(super) async fn config_watch(
    service: &Service,
    request: Request<pb::PathRequest>,
) -> Result<Response<Events<pb::ConfigEntry>>, Status> {
    let req = request.into_inner();
    follow!(
        service,
        h = service.host.config(or(&req.recipe, World::Config.default_recipe())),
        first: h.get(&req.path),
        key: |found: &Option<Entry>| found.as_ref().map(|e| e.version),
        event: entry,
        next: |known| h.watch(&req.path, known, Some(STREAM_POLL))
    )
}

pub(super) async fn counter_get(
    service: &Service,
    request: Request<pb::CounterGetRequest>,
) -> Result<Response<pb::CounterValue>, Status> {
    let req = request.into_inner();
    let format = counter_format(req.format)?;
    once!(
        service,
        "CounterGet",
        or(&req.recipe, World::Config.default_recipe()),
        config,
        |h| h.counter_in(&req.path, format),
        |value| { pb::CounterValue { value } }
    )
}

pub(super) async fn counter_add(
    service: &Service,
    request: Request<pb::CounterAddRequest>,
) -> Result<Response<pb::CounterValue>, Status> {
    let req = request.into_inner();
    let format = counter_format(req.format)?;
    once!(
        service,
        "CounterAdd",
        or(&req.recipe, World::Config.default_recipe()),
        config,
        |h| h.add_in(&req.path, req.delta, format),
        |value| pb::CounterValue { value }
    )
}

/// A value (none: no such node) as a `ConfigEntry`.
fn entry(found: Option<Entry>) -> pb::ConfigEntry {
    match found {
        Some(e) => pb::ConfigEntry { exists: true, data: e.data, version: e.version },
        None => pb::ConfigEntry::default(),
    }
}

/// A CounterGet or CounterAdd request's format.
fn counter_format(format: i32) -> Result<CounterFormat, Status> {
    match pb::CounterFormat::try_from(format) {
        Ok(pb::CounterFormat::Kazoo) => Ok(CounterFormat::Kazoo),
        Ok(pb::CounterFormat::CuratorShared) => Ok(CounterFormat::CuratorShared),
        Ok(pb::CounterFormat::CuratorAtomic) => Ok(CounterFormat::CuratorAtomic),
        Err(_) => Err(wire::invalid_argument(format!("unknown counter format {format}"))),
    }
}
