//! What a kubelet works out from a pod before it starts its container, and the status it
//! reports back: pure.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// `$(VAR)` in a command or an argument, expanded from the container's environment as the
/// kubelet does: `$$` is a `$`, and a reference to an unknown variable stays as written.
pub fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after
            .strip_prefix('(')
            .and_then(|inner| inner.split_once(')'))
            .filter(|(name, _)| env.contains_key(*name))
        {
            out.push_str(&env[name]);
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The value of a `fieldRef` (the downward API) for a pod running on `node`.
pub fn field(pod: &Pod, path: &str, node: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let value = match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => Some(node.to_string()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.hostIP" | "status.podIP" => Some("127.0.0.1".to_string()),
        _ => {
            return Err(format!(
                "fieldRef {path} is not one the node stand-in fills in"
            ));
        }
    };
    Ok(value.unwrap_or_default())
}

/// The port and path whose answer makes the container Ready: its readiness probe's, and without
/// one its liveness probe's. A kubelet calls a container without a readiness probe ready once
/// started; here Ready means the process itself answers, which is what the tests rely on.
pub fn health_check(container: &Container) -> Result<Option<(u16, String)>, String> {
    let Some(probe) = container
        .readiness_probe
        .as_ref()
        .or(container.liveness_probe.as_ref())
    else {
        return Ok(None);
    };
    let Some(get) = &probe.http_get else {
        return Err("only httpGet probes are run by the node stand-in".to_string());
    };
    let port = match &get.port {
        IntOrString::Int(port) => *port,
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name))
            .map(|p| p.container_port)
            .ok_or_else(|| format!("the probe names port {name}, which the container lacks"))?,
    };
    let port = u16::try_from(port).map_err(|_| format!("probe port {port} is out of range"))?;
    Ok(Some((port, get.path.clone().unwrap_or_else(|| "/".into()))))
}

/// The one container as the node last saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Since when the current process runs (RFC 3339); none while it waits to start.
    pub running_since: Option<String>,
    pub ready: bool,
    pub restarts: u32,
    /// How the previous process ended: exit code, started, finished.
    pub last_exit: Option<(i32, String, String)>,
    /// Why it does not run: (reason, message), e.g. CrashLoopBackOff.
    pub waiting: Option<(String, String)>,
}

/// The pod's status as a kubelet reports it, for a merge patch of the status subresource.
pub fn status(pod: &Pod, observed: &Observed, now: &str) -> serde_json::Value {
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .cloned()
        .unwrap_or_default();
    let state = match (&observed.running_since, &observed.waiting) {
        (Some(since), _) => serde_json::json!({"running": {"startedAt": since}}),
        (None, Some((reason, message))) => {
            serde_json::json!({"waiting": {"reason": reason, "message": message}})
        }
        (None, None) => serde_json::json!({"waiting": {"reason": "ContainerCreating"}}),
    };
    let last_state = match &observed.last_exit {
        Some((code, started, finished)) => serde_json::json!({"terminated": {
            "exitCode": code, "reason": if *code == 0 { "Completed" } else { "Error" },
            "startedAt": started, "finishedAt": finished}}),
        None => serde_json::json!({}),
    };
    let condition = |kind: &str, up: bool| {
        let previous = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == kind));
        let status = if up { "True" } else { "False" };
        // The transition time moves only with the status, as the kubelet keeps it.
        let since = match previous {
            Some(p) if p.status == status => p
                .last_transition_time
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_else(|| now.to_string()),
            _ => now.to_string(),
        };
        serde_json::json!({"type": kind, "status": status, "lastTransitionTime": since})
    };
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| now.to_string());
    serde_json::json!({"status": {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "startTime": started,
        "conditions": [
            condition("PodScheduled", true),
            condition("Initialized", true),
            condition("ContainersReady", observed.ready),
            condition("Ready", observed.ready),
        ],
        "containerStatuses": [{
            "name": container.name,
            "image": container.image.clone().unwrap_or_default(),
            "imageID": "",
            "ready": observed.ready,
            "started": observed.running_since.is_some(),
            "restartCount": observed.restarts,
            "state": state,
            "lastState": last_state,
        }],
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, Probe};

    #[test]
    fn references_expand_as_the_kubelet_expands_them() {
        let env = BTreeMap::from([("NS".to_string(), "team-a".to_string())]);
        for (text, expanded) in [
            ("--managed-namespace=$(NS)", "--managed-namespace=team-a"),
            ("$$(NS) is escaped", "$(NS) is escaped"),
            ("$(OTHER) stays", "$(OTHER) stays"),
            ("$(NS unclosed", "$(NS unclosed"),
            ("a $ alone", "a $ alone"),
            ("$(NS)$(NS)", "team-ateam-a"),
        ] {
            assert_eq!(expand(text, &env), expanded, "{text}");
        }
    }

    fn container(readiness: Option<Probe>, liveness: Option<Probe>) -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("healthz".into()),
                container_port: 6060,
                ..Default::default()
            }]),
            readiness_probe: readiness,
            liveness_probe: liveness,
            ..Default::default()
        }
    }

    fn get(port: IntOrString, path: &str) -> Option<Probe> {
        Some(Probe {
            http_get: Some(HTTPGetAction {
                port,
                path: Some(path.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn readiness_is_the_readiness_probe_else_the_liveness_probe() {
        let both = container(
            get(IntOrString::Int(8080), "/ready"),
            get(IntOrString::Int(6060), "/healthz"),
        );
        assert_eq!(health_check(&both), Ok(Some((8080, "/ready".into()))));
        let liveness_only = container(None, get(IntOrString::String("healthz".into()), "/h"));
        assert_eq!(health_check(&liveness_only), Ok(Some((6060, "/h".into()))));
        assert_eq!(health_check(&container(None, None)), Ok(None));
        let unknown_port = container(None, get(IntOrString::String("web".into()), "/"));
        assert!(health_check(&unknown_port).is_err());
    }

    #[test]
    fn a_condition_keeps_its_transition_time_until_it_changes() {
        let mut pod = Pod::default();
        let running = Observed {
            running_since: Some("2026-01-01T00:00:00Z".into()),
            ready: true,
            ..Default::default()
        };
        let first = status(&pod, &running, "2026-01-01T00:00:00Z");
        pod.status = serde_json::from_value(first["status"].clone()).unwrap();
        let same = status(&pod, &running, "2026-01-01T00:01:00Z");
        let ready = |v: &serde_json::Value| v["status"]["conditions"][3].clone();
        assert_eq!(ready(&same)["lastTransitionTime"], "2026-01-01T00:00:00Z");
        let crashed = Observed {
            restarts: 1,
            waiting: Some(("CrashLoopBackOff".into(), "exit 1".into())),
            ..Default::default()
        };
        let after = status(&pod, &crashed, "2026-01-01T00:02:00Z");
        assert_eq!(ready(&after)["status"], "False");
        assert_eq!(ready(&after)["lastTransitionTime"], "2026-01-01T00:02:00Z");
        let container = &after["status"]["containerStatuses"][0];
        assert_eq!(container["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(container["restartCount"], 1);
    }
}
