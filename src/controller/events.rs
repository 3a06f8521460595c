//! Kubernetes Events for what happened to a namespace's worker: one per occurrence (they are
//! only published when something was written or a new problem appeared), on its NamespaceWorker,
//! and for problems and reaping on the Namespace as well. DriftRepaired is per repaired object,
//! aggregated (`aggregate.rs`): an object re-edited over and over costs one Event write a minute.
//!
//! Written as core/v1 Events in `default`, the form every API server accepts for cluster-scoped
//! objects: 1.20's events.k8s.io/v1 validation only takes those in `kube-system`, which is why
//! kube's `Recorder` (events.k8s.io/v1 in `default`) is not used.
//!
//! Sent by a task of their own, one at a time: a reconcile never waits on its Events, and when
//! thousands of namespaces converge at once their Events trail behind the real work.

mod aggregate;

use crate::object::ObjectKey;
use crate::telemetry::Metrics;
use aggregate::{Aggregator, Repair, Write};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// Where the Events go (see above).
pub const EVENT_NAMESPACE: &str = "default";

/// Events waiting to be sent; beyond this many, new ones are dropped (and logged).
const BACKLOG: usize = 10_000;

pub struct Events {
    backlog: mpsc::Sender<Queued>,
    instance: Option<String>,
}

/// What waits for the sender task.
enum Queued {
    // Boxed: the queue's slots are as large as its largest item.
    Event(Box<Event>),
    Repaired(Box<Repair>),
}

#[derive(Clone, Copy, Debug)]
pub enum Reason {
    Applied,
    DriftRepaired,
    Reaped,
    RenderFailed,
    ApplyFailed,
    Conflict,
    RolloutProgressing,
    RolloutPaused,
    RolloutComplete,
    RolloutFailed,
    RolledBack,
    ConfigRefused,
    ReapingHeld,
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
            Reason::RolloutProgressing => "RolloutProgressing",
            Reason::RolloutPaused => "RolloutPaused",
            Reason::RolloutComplete => "RolloutComplete",
            Reason::RolloutFailed => "RolloutFailed",
            Reason::RolledBack => "RolledBack",
            Reason::ConfigRefused => "ConfigRefused",
            Reason::ReapingHeld => "ReapingHeld",
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            Reason::Applied
            | Reason::DriftRepaired
            | Reason::Reaped
            | Reason::RolloutProgressing
            | Reason::RolloutPaused
            | Reason::RolloutComplete => "Normal",
            Reason::RenderFailed
            | Reason::ApplyFailed
            | Reason::Conflict
            | Reason::RolloutFailed
            | Reason::RolledBack
            | Reason::ConfigRefused
            | Reason::ReapingHeld => "Warning",
        }
    }
}

impl Events {
    /// Starts the sender task.
    pub fn start(client: kube::Client, metrics: Arc<Metrics>) -> Events {
        let (backlog, pending) = mpsc::channel(BACKLOG);
        let api = Api::namespaced(client, EVENT_NAMESPACE);
        let instance = std::env::var("POD_NAME").ok();
        let repairs = Aggregator::new(instance.clone());
        tokio::spawn(send_all(api, pending, repairs, metrics));
        Events { backlog, instance }
    }

    /// Queues one Event on each of `regarding`. A failure is logged, never fatal: Events are a
    /// courtesy to admins, the status resource is the record.
    pub fn publish(&self, reason: Reason, message: String, regarding: &[&ObjectReference]) {
        for reference in regarding {
            let now = Timestamp::now();
            let event = event(reason, &message, reference, self.instance.clone(), now);
            self.queue(Queued::Event(Box::new(event)), reason);
        }
    }

    /// Queues the news that `object` was reverted to its template, told on `regarding`; the
    /// sender folds repeated repairs of one object into one Event.
    pub fn drift_repaired(&self, object: &ObjectKey, regarding: &ObjectReference) {
        let repair = Repair {
            object: object.clone(),
            regarding: regarding.clone(),
            at: Instant::now(),
            time: Timestamp::now(),
        };
        self.queue(Queued::Repaired(Box::new(repair)), Reason::DriftRepaired);
    }

    /// Never waits: a reconcile does not slow down for its Events.
    fn queue(&self, queued: Queued, reason: Reason) {
        if self.backlog.try_send(queued).is_err() {
            tracing::warn!(
                reason = reason.as_str(),
                "too many Events waiting to be sent; this one is dropped"
            );
        }
    }
}

/// The note of an `Applied` Event.
pub fn applied(created: usize, updated: usize, revision: &str) -> String {
    format!("created {created}, updated {updated} objects at revision {revision}")
}

/// Sends what is queued, one request at a time, and the aggregated repairs when they are due.
async fn send_all(
    api: Api<Event>,
    mut pending: mpsc::Receiver<Queued>,
    mut repairs: Aggregator,
    metrics: Arc<Metrics>,
) {
    loop {
        let due = repairs.next_due();
        let wake = async {
            match due {
                Some(due) => tokio::time::sleep_until(due.into()).await,
                None => std::future::pending().await,
            }
        };
        let writes = tokio::select! {
            queued = pending.recv() => match queued {
                Some(Queued::Event(event)) => vec![Write::Create(*event)],
                Some(Queued::Repaired(repair)) => repairs.repaired(*repair).into_iter().collect(),
                None => return,
            },
            () = wake => repairs.due(Instant::now()),
        };
        for write in writes {
            send(&api, write, &metrics).await;
        }
    }
}

async fn send(api: &Api<Event>, write: Write, metrics: &Metrics) {
    let sent = match write {
        Write::Create(event) => create(api, &event, metrics).await.map(|_| event),
        Write::Update(event) => {
            let name = event.metadata.name.clone().unwrap_or_default();
            let changes = serde_json::json!({
                "count": event.count,
                "lastTimestamp": event.last_timestamp,
                "message": event.message,
            });
            let patched = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(changes))
                .await;
            match metrics.count("patch", patched) {
                Ok(_) => Ok(event),
                // Gone (Events expire after an hour) or never created (that request failed):
                // created now, with everything counted so far.
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    create(api, &event, metrics).await.map(|_| event)
                }
                Err(e) => Err((e, event)),
            }
        }
    };
    if let Err((e, event)) = sent {
        let reason = event.reason.unwrap_or_default();
        tracing::warn!(reason, error = %e, "could not publish an Event");
    }
}

async fn create(
    api: &Api<Event>,
    event: &Event,
    metrics: &Metrics,
) -> Result<(), (kube::Error, Event)> {
    let created = api.create(&PostParams::default(), event).await;
    metrics
        .count("create", created)
        .map(|_| ())
        .map_err(|e| (e, event.clone()))
}

/// The Event for one occurrence of `reason` on `regarding`, at `now`.
pub fn event(
    reason: Reason,
    message: &str,
    regarding: &ObjectReference,
    instance: Option<String>,
    now: Timestamp,
) -> Event {
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
        let e = event(
            Reason::RenderFailed,
            &"x".repeat(2000),
            &regarding,
            None,
            Timestamp::now(),
        );
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
