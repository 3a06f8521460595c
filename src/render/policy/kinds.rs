//! What each kind may carry: ConfigMap data as the API server takes it, a RoleBinding that
//! binds a Role to ServiceAccounts of the target namespace only, pods that get nothing of the
//! node, Services without external IPs and of an allowed type.

use super::{ContainerName, ObjectProblem, Target};
use crate::config::ServiceType;
use serde_json::{Map, Value};

/// The API server's limit on a ConfigMap's data.
const CONFIG_MAP_MAX_BYTES: usize = 1024 * 1024;

/// ConfigMap data: string values under keys of `[-._a-zA-Z0-9]`, 1 MiB in all.
pub(super) fn check_config_map(object: &Map<String, Value>) -> Result<(), ObjectProblem> {
    let data = match object.get("data") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(data)) => data,
        Some(_) => return Err(ObjectProblem::DataNotAMapping),
    };
    let mut total = 0;
    for (key, value) in data {
        let valid_key = !key.is_empty()
            && key.len() <= 253
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid_key {
            return Err(ObjectProblem::DataKey(key.clone()));
        }
        let Value::String(text) = value else {
            return Err(ObjectProblem::DataNotAString(key.clone()));
        };
        total += key.len() + text.len();
    }
    if total > CONFIG_MAP_MAX_BYTES {
        return Err(ObjectProblem::DataTooBig {
            bytes: total,
            limit: CONFIG_MAP_MAX_BYTES,
        });
    }
    Ok(())
}

/// Subjects that stand for everyone (or every ServiceAccount): a binding to them grants the
/// Role to the whole cluster.
const EVERYONE: [&str; 4] = [
    "system:authenticated",
    "system:unauthenticated",
    "system:anonymous",
    "system:serviceaccounts",
];

/// A stamped RoleBinding binds a Role (flotilla may bind only the templated Roles, never a
/// ClusterRole), to subjects in its namespace: not to everyone, and not to another namespace's
/// ServiceAccounts.
pub(super) fn check_role_binding(
    object: &Map<String, Value>,
    target: &Target,
) -> Result<(), ObjectProblem> {
    let role_ref = &object.get("roleRef").cloned().unwrap_or_default();
    if role_ref["kind"] != "Role" || role_ref["apiGroup"] != "rbac.authorization.k8s.io" {
        return Err(ObjectProblem::RoleRef {
            kind: role_ref["kind"].clone(),
            api_group: role_ref["apiGroup"].clone(),
        });
    }
    let subjects = match object.get("subjects") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(subjects)) => subjects,
        Some(_) => return Err(ObjectProblem::SubjectsNotAList),
    };
    for subject in subjects {
        let name = subject["name"].as_str().unwrap_or_default();
        let everyone = EVERYONE.contains(&name) || name.starts_with("system:serviceaccounts:");
        if everyone {
            return Err(ObjectProblem::BindsEveryone(name.to_string()));
        }
        // Kubernetes' own identities (system:kube-controller-manager, system:masters, ...).
        if name.starts_with("system:") {
            return Err(ObjectProblem::BindsSystemName(name.to_string()));
        }
        // No User or Group: who they are is up to the authenticator, not to the namespace.
        if subject["kind"] != "ServiceAccount" {
            return Err(ObjectProblem::BindsNonServiceAccount {
                kind: subject["kind"].clone(),
                name: name.to_string(),
                target: target.namespace.to_string(),
            });
        }
        // Without a namespace, a subject means the binding's own, which is the target.
        let namespace = subject["namespace"].as_str().unwrap_or(target.namespace);
        if namespace != target.namespace {
            return Err(ObjectProblem::BindsForeignServiceAccount {
                namespace: namespace.to_string(),
                name: name.to_string(),
                target: target.namespace.to_string(),
            });
        }
    }
    Ok(())
}

/// Neither null nor `false`: a field that turns something on.
fn set(value: &Value) -> bool {
    !matches!(value, Value::Null | Value::Bool(false))
}

/// A Deployment's pod template gets nothing of the node it runs on: no host network, PIDs or
/// IPC, no hostPath volume, no sysctls, no `Unconfined` seccomp profile, and in every container
/// (init and ephemeral too) no privileged mode, no added capability, no host port, no
/// `Unconfined` seccomp profile and `allowPrivilegeEscalation: false` (unset means true).
pub(super) fn check_pod_spec(pod: &Value) -> Result<(), ObjectProblem> {
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if set(&pod[field]) {
            return Err(ObjectProblem::HostNamespace(field));
        }
    }
    for volume in pod["volumes"].as_array().into_iter().flatten() {
        if set(&volume["hostPath"]) {
            return Err(ObjectProblem::HostPath(text(&volume["name"])));
        }
    }
    let sysctls = &pod["securityContext"]["sysctls"];
    if set(sysctls) && sysctls.as_array().is_none_or(|a| !a.is_empty()) {
        return Err(ObjectProblem::Sysctls(sysctls.clone()));
    }
    if unconfined(&pod["securityContext"]) {
        return Err(ObjectProblem::SeccompUnconfined(None));
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in pod[list].as_array().into_iter().flatten() {
            let at = || ContainerName {
                list,
                name: text(&container["name"]),
            };
            let context = &container["securityContext"];
            if set(&context["privileged"]) {
                return Err(ObjectProblem::Privileged(at()));
            }
            let added = &context["capabilities"]["add"];
            if set(added) && added.as_array().is_none_or(|a| !a.is_empty()) {
                return Err(ObjectProblem::AddsCapabilities {
                    container: at(),
                    added: added.clone(),
                });
            }
            if context["allowPrivilegeEscalation"] != false {
                return Err(ObjectProblem::PrivilegeEscalation {
                    container: at(),
                    value: context["allowPrivilegeEscalation"].clone(),
                });
            }
            if unconfined(context) {
                return Err(ObjectProblem::SeccompUnconfined(Some(at())));
            }
            let ports = container["ports"].as_array().into_iter().flatten();
            if let Some(port) = ports.map(|p| &p["hostPort"]).find(|p| set(p) && **p != 0) {
                return Err(ObjectProblem::HostPort {
                    container: at(),
                    port: port.clone(),
                });
            }
        }
    }
    Ok(())
}

/// A security context whose seccomp profile is `Unconfined`: no system call filtered.
fn unconfined(context: &Value) -> bool {
    context["seccompProfile"]["type"] == "Unconfined"
}

/// A Service claims no external IPs (traffic to any address could be taken), and is of a type
/// the config allows: ClusterIP only by default, since NodePort and LoadBalancer open the
/// namespace's pods to outside the cluster.
pub(super) fn check_service(
    object: &Map<String, Value>,
    target: &Target,
) -> Result<(), ObjectProblem> {
    let spec = object.get("spec").cloned().unwrap_or_default();
    if set(&spec["externalIPs"]) && spec["externalIPs"].as_array().is_none_or(|a| !a.is_empty()) {
        return Err(ObjectProblem::ExternalIps);
    }
    let kind = match &spec["type"] {
        Value::Null => ServiceType::ClusterIP.name().to_string(),
        other => text(other),
    };
    if !target.service_types.iter().any(|t| t.name() == kind) {
        return Err(ObjectProblem::ServiceType {
            kind,
            allowed: target.service_types.iter().map(|t| t.name()).collect(),
        });
    }
    Ok(())
}

/// A string field as it is, or anything else as JSON (for messages).
pub(super) fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
