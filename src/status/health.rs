//! What a Deployment's status says of its availability: the one thing a NamespaceWorker's
//! status needs of the controller Deployment.

use serde_json::Value;

/// What a Deployment's status says of its availability: all a worker's status needs of it, kept
/// instead of the Deployment's fields in a fleet-wide cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    pub(super) available: bool,
    pub(super) ready: i64,
    pub(super) desired: i64,
    pub(super) reason: String,
    pub(super) detail: String,
}

impl Health {
    /// The new generation really runs (see [`availability`]).
    pub fn is_available(&self) -> bool {
        self.available
    }

    pub(super) fn summary(&self) -> String {
        let mut s = format!("{}/{} replicas ready", self.ready, self.desired);
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

/// A Deployment is available once the new generation really runs: its controller has seen the
/// generation applied, every replica is updated, no pod of an older ReplicaSet is left
/// (`status.replicas` counts them all), and enough are available. `None` until the deployment
/// controller has looked at it.
pub fn availability(deploy: &Value) -> Option<Health> {
    let status = &deploy["status"];
    let observed = status["observedGeneration"].as_i64()?;
    let generation = deploy["metadata"]["generation"].as_i64().unwrap_or(0);
    let desired = deploy["spec"]["replicas"].as_i64().unwrap_or(1);
    let count = |field: &str| status[field].as_i64().unwrap_or(0);
    let available = observed >= generation
        && count("updatedReplicas") == desired
        && count("replicas") == desired
        && count("availableReplicas") >= desired;
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let failing = conditions
        .iter()
        .find(|c| c["type"] == "Available" && c["status"] != "True")
        .or_else(|| {
            conditions
                .iter()
                .find(|c| c["type"] == "Progressing" && c["status"] != "True")
        });
    let text = |c: Option<&Value>, field: &str| {
        c.and_then(|c| c[field].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (reason, detail) = if available {
        ("MinimumReplicasAvailable".to_string(), String::new())
    } else if observed < generation {
        (
            "RollingOut".to_string(),
            "the new generation is not rolled out yet".to_string(),
        )
    } else {
        let reason = text(failing, "reason");
        (
            if reason.is_empty() {
                "Unavailable".to_string()
            } else {
                reason
            },
            text(failing, "message"),
        )
    };
    Some(Health {
        available,
        ready: count("readyReplicas"),
        desired,
        reason,
        detail,
    })
}
