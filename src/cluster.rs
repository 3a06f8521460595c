//! The API calls on stamped objects, shared by the operator and the CLI: get, server-side apply
//! (also as a dry run), delete, and listing what one instance stamped for a namespace.

use crate::kinds::Kind;
use crate::object::{ObjectKey, Stamped};
use crate::ownership;
use kube::api::{
    Api, DeleteParams, DynamicObject, GetParams, ListParams, Patch, PatchParams, Preconditions,
};
use kube::{Client, ResourceExt};

fn api(client: &Client, key: &ObjectKey) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), &key.namespace, &key.kind.api_resource())
}

/// How fresh a read must be.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// What is stored right now (a quorum read from etcd): for a user's question.
    Latest,
    /// From the API server's watch cache, at least as new as anything its watches delivered:
    /// for the operator, whose view comes from those watches anyway. Much cheaper for the server.
    WatchCache,
}

/// The live object, if any.
pub async fn get(
    client: &Client,
    key: &ObjectKey,
    read: Read,
) -> kube::Result<Option<serde_json::Value>> {
    let params = match read {
        Read::Latest => GetParams::default(),
        Read::WatchCache => GetParams::any(),
    };
    let live = match api(client, key).get_with(&key.name, &params).await {
        Ok(obj) => obj,
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    serde_json::to_value(live)
        .map(Some)
        .map_err(kube::Error::SerdeError)
}

/// How an apply is sent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Of an object the watches show nowhere. It carries a resourceVersion no stored object
    /// has, so if someone created the name in the meantime the API server refuses it (409)
    /// even when their object holds exactly what flotilla renders: a create never takes an
    /// object over. Not forced either.
    Create,
    /// Of flotilla's own object: forced, taking back fields another manager changed. That is
    /// how drift is reverted.
    Update,
    /// Computed by the API server against the live object, stored nowhere (`flotilla diff`).
    DryRun,
}

/// etcd's first write is revision 2, so no stored object has resourceVersion 1: as an apply's
/// precondition it holds only while the name is free.
const NEVER_STORED: &str = "1";

/// Server-side apply under flotilla's field manager; returns the object as applied.
pub async fn apply(
    client: &Client,
    field_manager: &str,
    object: &Stamped,
    mode: Mode,
) -> kube::Result<serde_json::Value> {
    let params = match mode {
        Mode::Create => PatchParams::apply(field_manager),
        Mode::Update => PatchParams::apply(field_manager).force(),
        Mode::DryRun => PatchParams::apply(field_manager).force().dry_run(),
    };
    let api = api(client, &object.key);
    let send = async |body: &serde_json::Value| {
        api.patch(&object.key.name, &params, &Patch::Apply(body))
            .await
    };
    let applied = if mode == Mode::Create {
        let mut create_only = object.body.clone();
        create_only["metadata"]["resourceVersion"] = NEVER_STORED.into();
        send(&create_only).await?
    } else {
        send(&object.body).await?
    };
    serde_json::to_value(applied).map_err(kube::Error::SerdeError)
}

/// Every object `instance` stamped for `namespace`, of every stampable kind, wherever it lives.
pub async fn stamped_for(
    client: &Client,
    instance: &str,
    namespace: &str,
) -> kube::Result<Vec<(ObjectKey, serde_json::Value)>> {
    let selector = format!(
        "{},{}={namespace}",
        ownership::watch_selector(instance),
        ownership::FOR_NAMESPACE
    );
    let mut found = Vec::new();
    for kind in Kind::ALL {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &kind.api_resource());
        for obj in api.list(&ListParams::default().labels(&selector)).await? {
            let key = ObjectKey {
                kind,
                namespace: obj.namespace().unwrap_or_default(),
                name: obj.name_any(),
            };
            let mut value = serde_json::to_value(obj).map_err(kube::Error::SerdeError)?;
            // List items come without their type.
            value["apiVersion"] = kind.api_version().into();
            value["kind"] = kind.name().into();
            found.push((key, value));
        }
    }
    Ok(found)
}

/// Deletes an object only if it is still the one the decision was made on: the same uid (not
/// replaced by someone else since) and, if given, the same resourceVersion (not changed since,
/// say its labels removed). Returns whether this call deleted it: already gone, replaced or
/// changed is not an error.
pub async fn delete(
    client: &Client,
    key: &ObjectKey,
    uid: Option<String>,
    resource_version: Option<String>,
) -> kube::Result<bool> {
    delete_if(&api(client, key), &key.name, uid, resource_version).await
}

/// [`delete`] for any kind of object.
pub async fn delete_if<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<String>,
    resource_version: Option<String>,
) -> kube::Result<bool>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        // 409: a precondition failed.
        Err(kube::Error::Api(status)) if status.is_not_found() || status.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
