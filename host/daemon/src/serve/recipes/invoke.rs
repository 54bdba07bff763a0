//! Invoke: any export of any recipe called by name with JSON arguments, on a fresh instance, on
//! one kept in the client session (`keep`, then `handle`), or a custom recipe's `run`; the
//! route of every family without typed messages of its own (registration among them).

use tonic::{Request, Response, Status};

use super::Service;
use crate::wire::{self, no_handle, status};
use wazoo_runtime::Claim;

use wazoo_proto as pb;

pub(super) async fn invoke(
    service: &Service,
    request: Request<pb::InvokeRequest>,
) -> Result<Response<pb::InvokeReply>, Status> {
    let req = request.into_inner();
    let recipe = req.recipe.clone();
    service
        .measured("Invoke", &recipe, async {
            let args: serde_json::Value = if req.args_json.trim().is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::from_str(&req.args_json)
                    .map_err(|e| wire::invalid_argument(format!("args_json is not JSON: {e}")))?
            };
            if req.handle != 0 {
                // A call on a kept instance.
                let (session, entry) = service.entry(req.session, req.handle)?;
                let mut slot = entry.held.lock().await;
                let Some(h) = slot.as_mut().and_then(Claim::instance_mut) else {
                    return Err(wire::wrong_handle(format!("handle: {} was not kept by Invoke", req.handle)));
                };
                // The session ending cancels the call, so its close need not wait for it.
                let result = session.while_open(h.call(&req.function, &args)).await?.map_err(status)?;
                return Ok(pb::InvokeReply { result_json: result.to_string(), handle: req.handle });
            }
            if req.function.is_empty() {
                // A custom recipe's `run`, its arguments a list of strings.
                let args: Vec<String> = if args.is_null() {
                    Vec::new()
                } else {
                    serde_json::from_value(args).map_err(|e| {
                        wire::invalid_argument(format!("args_json must be a JSON array of strings: {e}"))
                    })?
                };
                let mut h = service.host.custom(&recipe).await.map_err(no_handle)?;
                let outcome = h.run(&args).await;
                h.close().await;
                let result = match outcome.map_err(status)? {
                    Ok(text) => serde_json::json!({ "ok": text }),
                    Err(text) => serde_json::json!({ "err": text }),
                };
                return Ok(pb::InvokeReply { result_json: result.to_string(), handle: 0 });
            }
            if !req.take_up.is_empty() && !req.keep {
                return Err(wire::invalid_argument("take_up: only a kept instance takes nodes up"));
            }
            for path in &req.take_up {
                wazoo_runtime::paths::check_node(path)
                    .map_err(|why| wire::invalid_argument(format!("take_up: {why}")))?;
            }
            let session = if req.keep { Some(service.session(req.session)?) } else { None };
            let _reserved = session.as_ref().map(|s| service.room_for_handle(s)).transpose()?;
            // A kept instance runs on its client session's ZooKeeper session (one taken up from
            // another member, for a client that moved here).
            let host = session.as_ref().map_or(&service.host, |s| &s.host);
            let mut h = host.dynamic(&recipe).await.map_err(no_handle)?;
            h.take_up(req.take_up);
            let called = match &session {
                Some(session) => session.while_open(h.call(&req.function, &args)).await,
                None => Ok(h.call(&req.function, &args).await),
            };
            let result = match called {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => {
                    h.close().await;
                    return Err(status(e));
                }
                Err(ended) => {
                    h.close().await;
                    return Err(ended);
                }
            };
            let handle = match session {
                Some(session) => service.keep(&session, Claim::instance(h)).await?,
                None => {
                    h.close().await;
                    0
                }
            };
            Ok(pb::InvokeReply { result_json: result.to_string(), handle })
        })
        .await
}
