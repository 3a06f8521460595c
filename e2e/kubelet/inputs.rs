//! What a pod's container is given before it starts, as a kubelet gives it: its volumes laid out
//! (the ServiceAccount's token from the TokenRequest API, bound to the pod; ConfigMaps, Secrets,
//! the downward API) and its environment.

use super::netns::API_PORT;
use super::place::Place;
use super::sandbox::write_volume;
use super::spec;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, ServiceAccount, Volume};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use std::collections::BTreeMap;
use std::path::Path;

/// Writes the files of `volume` into `host` as the kubelet lays them out (an emptyDir stays
/// empty). Returns whether the kubelet mounts it read-only whatever the volumeMount says.
pub async fn lay_out(
    place: &Place,
    pod: &Pod,
    volume: &Volume,
    host: &Path,
) -> Result<bool, String> {
    let namespace = pod.namespace().unwrap_or_default();
    let mut files = BTreeMap::new();
    if volume.empty_dir.is_some() {
        std::fs::create_dir_all(host).map_err(|e| e.to_string())?;
        let all = std::os::unix::fs::PermissionsExt::from_mode(0o777);
        std::fs::set_permissions(host, all).map_err(|e| e.to_string())?;
        return Ok(false);
    } else if let Some(projected) = &volume.projected {
        for source in projected.sources.iter().flatten() {
            if let Some(token) = &source.service_account_token {
                let account = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.service_account_name.clone());
                let account = account.unwrap_or_else(|| "default".into());
                let seconds = token.expiration_seconds.unwrap_or(3607);
                let audiences = token.audience.clone().into_iter().collect();
                let jwt = request_token(place, pod, &account, audiences, seconds).await?;
                files.insert(token.path.clone(), jwt.into_bytes());
            } else if let Some(map) = &source.config_map {
                let data = config_map(place, &namespace, &map.name).await?;
                files.extend(pick(data, map.items.as_deref()));
            } else if let Some(downward) = &source.downward_api {
                for item in downward.items.iter().flatten() {
                    let path = item.field_ref.as_ref().map(|f| f.field_path.as_str());
                    let path = path.ok_or("only fieldRef items of the downward API")?;
                    let value = spec::field(pod, path, &place.node)?;
                    files.insert(item.path.clone(), value.into_bytes());
                }
            } else {
                return Err(format!(
                    "volume {}: a projected source not supported",
                    volume.name
                ));
            }
        }
    } else if let Some(map) = &volume.config_map {
        let data = config_map(place, &namespace, &map.name).await?;
        files.extend(pick(data, map.items.as_deref()));
    } else if let Some(secret) = &volume.secret {
        let name = secret.secret_name.clone().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(place.client.clone(), &namespace);
        let found = api
            .get(&name)
            .await
            .map_err(|e| format!("secret {name}: {e}"))?;
        let data = found
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0));
        files.extend(pick(data.collect(), secret.items.as_deref()));
    } else {
        return Err(format!(
            "volume {}: its kind is not supported by the node stand-in",
            volume.name
        ));
    }
    write_volume(host, &files);
    Ok(true)
}

fn pick(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
) -> BTreeMap<String, Vec<u8>> {
    match items {
        None => data,
        Some(items) => items
            .iter()
            .filter_map(|i| Some((i.path.clone(), data.get(&i.key)?.clone())))
            .collect(),
    }
}

async fn config_map(
    place: &Place,
    namespace: &str,
    name: &str,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let api: Api<ConfigMap> = Api::namespaced(place.client.clone(), namespace);
    let found = api
        .get(name)
        .await
        .map_err(|e| format!("configmap {name}: {e}"))?;
    Ok(found
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.into_bytes()))
        .collect())
}

/// A token for the pod's ServiceAccount, bound to the pod: it stops working once the pod is gone.
async fn request_token(
    place: &Place,
    pod: &Pod,
    account: &str,
    audiences: Vec<String>,
    seconds: i64,
) -> Result<String, String> {
    let api: Api<ServiceAccount> =
        Api::namespaced(place.client.clone(), &pod.namespace().unwrap_or_default());
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(audiences).filter(|a: &Vec<String>| !a.is_empty()),
            expiration_seconds: Some(seconds),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let granted: TokenRequest = api
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .map_err(|e| format!("token for ServiceAccount {account}: {e}"))?;
    granted
        .status
        .and_then(|s| s.token)
        .ok_or_else(|| format!("no token granted for ServiceAccount {account}"))
}

/// The container's environment as the kubelet builds it: the pod's `env` in order (a value may
/// refer to an earlier one), and where the API server is.
pub async fn environment(
    place: &Place,
    pod: &Pod,
    container: &Container,
) -> Result<BTreeMap<String, String>, String> {
    let namespace = pod.namespace().unwrap_or_default();
    let mut env = BTreeMap::from([
        ("HOSTNAME".to_string(), pod.name_any()),
        (
            "KUBERNETES_SERVICE_HOST".to_string(),
            "127.0.0.1".to_string(),
        ),
        ("KUBERNETES_SERVICE_PORT".to_string(), API_PORT.to_string()),
    ]);
    if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err("envFrom is not supported by the node stand-in".into());
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => spec::expand(value, &env),
            (None, Some(from)) => {
                if let Some(field) = &from.field_ref {
                    spec::field(pod, &field.field_path, &place.node)?
                } else if let Some(key) = &from.config_map_key_ref {
                    let data = config_map(place, &namespace, &key.name).await?;
                    let value = data
                        .get(&key.key)
                        .ok_or_else(|| format!("env {}: no key {}", var.name, key.key))?;
                    String::from_utf8_lossy(value).into_owned()
                } else {
                    return Err(format!(
                        "env {}: only values, fieldRefs and configMapKeyRefs",
                        var.name
                    ));
                }
            }
            (None, None) => String::new(),
        };
        env.insert(var.name.clone(), value);
    }
    Ok(env)
}
