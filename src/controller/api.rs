//! The only API calls reconcile makes on stamped objects: get, server-side apply, delete.

use crate::object::{ObjectKey, Stamped};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use kube::{Client, ResourceExt};

fn api(client: &Client, key: &ObjectKey) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), &key.namespace, &key.kind.api_resource())
}

/// The live object, if any.
pub async fn get(client: &Client, key: &ObjectKey) -> kube::Result<Option<serde_json::Value>> {
    let live = api(client, key).get_opt(&key.name).await?;
    Ok(live.and_then(|obj| serde_json::to_value(obj).ok()))
}

/// Server-side apply under flotilla's field manager; returns the new resourceVersion. `force`
/// takes over fields another manager changed: that is how drift is reverted.
pub async fn apply(
    client: &Client,
    field_manager: &str,
    object: &Stamped,
) -> kube::Result<Option<String>> {
    let params = PatchParams::apply(field_manager).force();
    let applied = api(client, &object.key)
        .patch(&object.key.name, &params, &Patch::Apply(&object.body))
        .await?;
    Ok(applied.resource_version())
}

/// Deletes an object only if it is still the one the watch saw (same uid), so an object that
/// was replaced by someone else in between is never deleted. Gone already counts as done.
pub async fn delete(client: &Client, key: &ObjectKey, uid: Option<String>) -> kube::Result<()> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid,
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api(client, key).delete(&key.name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() || status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
