//! Kubernetes Events for what happened to a namespace's worker: one per occurrence (they are
//! only published when something was written or a new problem appeared), on its NamespaceWorker,
//! and for problems and reaping on the Namespace as well.
//!
//! Written as core/v1 Events in `default`, the form every API server accepts for cluster-scoped
//! objects: 1.20's events.k8s.io/v1 validation only takes those in `kube-system`, which is why
//! kube's `Recorder` (events.k8s.io/v1 in `default`) is not used.
//!
//! Sent by a task of their own, one at a time: a reconcile never waits on its Events, and when
//! thousands of namespaces converge at once their Events trail behind the real work.

use crate::telemetry::Metrics;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Where the Events go (see above).
pub const EVENT_NAMESPACE: &str = "default";

/// Events waiting to be sent; beyond this many, new ones are dropped (and logged).
const BACKLOG: usize = 10_000;

pub struct Events {
    backlog: mpsc::Sender<Event>,
    instance: Option<String>,
}

#[derive(Clone, Copy, Debug)]
pub enum Reason {
    Applied,
    DriftRepaired,
    Reaped,
    RenderFailed,
    ApplyFailed,
    Conflict,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Applied => "Applied",
            Reason::DriftRepaired => "DriftRepaired",
            Reason::Reaped => "Reaped",
            Reason::RenderFailed => "RenderFailed",
            Reason::ApplyFailed => "ApplyFailed",
            Reason::Conflict => "Conflict",
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            Reason::Applied | Reason::DriftRepaired | Reason::Reaped => "Normal",
            Reason::RenderFailed | Reason::ApplyFailed | Reason::Conflict => "Warning",
        }
    }
}

impl Events {
    /// Starts the sender task.
    pub fn start(client: kube::Client, metrics: Arc<Metrics>) -> Events {
        let (backlog, pending) = mpsc::channel(BACKLOG);
        let api = Api::namespaced(client, EVENT_NAMESPACE);
        tokio::spawn(send_all(api, pending, metrics));
        Events {
            backlog,
            instance: std::env::var("POD_NAME").ok(),
        }
    }

    /// Queues one Event on each of `regarding`. A failure is logged, never fatal: Events are a
    /// courtesy to admins, the status resource is the record.
    pub fn publish(&self, reason: Reason, message: String, regarding: &[&ObjectReference]) {
        for reference in regarding {
            let event = event(reason, &message, reference, self.instance.clone());
            if self.backlog.try_send(event).is_err() {
                tracing::warn!(
                    reason = reason.as_str(),
                    "too many Events waiting to be sent; this one is dropped"
                );
            }
        }
    }
}

/// The note of an `Applied` Event.
pub fn applied(created: usize, updated: usize, revision: &str) -> String {
    format!("created {created}, updated {updated} objects at revision {revision}")
}

async fn send_all(api: Api<Event>, mut pending: mpsc::Receiver<Event>, metrics: Arc<Metrics>) {
    while let Some(event) = pending.recv().await {
        let sent = api.create(&PostParams::default(), &event).await;
        if let Err(e) = metrics.count("create", sent) {
            let reason = event.reason.unwrap_or_default();
            tracing::warn!(reason, error = %e, "could not publish an Event");
        }
    }
}

/// The Event for one occurrence of `reason` on `regarding`.
pub fn event(
    reason: Reason,
    message: &str,
    regarding: &ObjectReference,
    instance: Option<String>,
) -> Event {
    let now = Timestamp::now();
    let object = regarding.name.clone().unwrap_or_default();
    Event {
        metadata: ObjectMeta {
            // Unique per occurrence, as kubectl and client-go name theirs.
            name: Some(format!("{object}.{:x}", now.as_nanosecond())),
            namespace: Some(EVENT_NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        reason: Some(reason.as_str().into()),
        // The API caps messages at 1 kB.
        message: Some(message.chars().take(1000).collect()),
        type_: Some(reason.event_type().into()),
        source: Some(EventSource {
            component: Some("flotilla".into()),
            host: None,
        }),
        reporting_component: Some("flotilla".into()),
        reporting_instance: instance,
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Event::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_scoped_object_gets_a_legacy_event_in_default() {
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Namespace".into()),
            name: Some("team-a".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        let e = event(Reason::RenderFailed, &"x".repeat(2000), &regarding, None);
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert!(e.metadata.name.unwrap().starts_with("team-a."));
        assert_eq!(e.involved_object, regarding);
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.message.unwrap().len(), 1000);
        assert!(
            e.event_time.is_none(),
            "no eventTime: the legacy rules accept `default`"
        );
        assert_eq!(e.count, Some(1));
    }
}
