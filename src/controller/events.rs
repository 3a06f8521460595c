//! Kubernetes Events for what happened to a namespace's worker: one per occurrence (they are
//! only published when something was written or a new problem appeared), on its NamespaceWorker,
//! and for problems and reaping on the Namespace as well. DriftRepaired is per repaired object,
//! Applied per NamespaceWorker, both aggregated (`aggregate.rs`): an object re-edited over and
//! over costs one Event write a minute.
//!
//! Written as core/v1 Events in `default`, where Events about cluster-scoped objects go (as kube's
//! `Recorder` puts them) and `kubectl describe` finds them. Not through the `Recorder`: its
//! dedup repeats a write per occurrence, where the aggregation here, with the count kept in place,
//! costs one write a minute for an object edited in a loop.
//!
//! Sent by a task of their own, one at a time: a reconcile never waits on its Events, and when
//! thousands of namespaces converge at once their Events trail behind the real work.

mod aggregate;

use crate::object::ObjectKey;
use aggregate::{Aggregator, Repair, Subject, Write};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
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
    Aggregated(Box<Repair>),
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
    AdmissionPolicyStale,
    Slept,
    Woke,
}

impl Reason {
    pub(super) fn as_str(self) -> &'static str {
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
            Reason::AdmissionPolicyStale => "AdmissionPolicyStale",
            Reason::Slept => "Slept",
            Reason::Woke => "Woke",
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            Reason::Applied
            | Reason::DriftRepaired
            | Reason::Reaped
            | Reason::RolloutProgressing
            | Reason::RolloutPaused
            | Reason::RolloutComplete
            | Reason::Slept
            | Reason::Woke => "Normal",
            Reason::RenderFailed
            | Reason::ApplyFailed
            | Reason::Conflict
            | Reason::RolloutFailed
            | Reason::RolledBack
            | Reason::ConfigRefused
            | Reason::ReapingHeld
            | Reason::AdmissionPolicyStale => "Warning",
        }
    }
}

impl Events {
    /// Starts the sender task.
    pub fn start(client: kube::Client) -> Events {
        let (backlog, pending) = mpsc::channel(BACKLOG);
        let api = Api::namespaced(client, EVENT_NAMESPACE);
        let instance = std::env::var("POD_NAME").ok();
        let repairs = Aggregator::new(instance.clone());
        tokio::spawn(send_all(api, pending, repairs));
        Events { backlog, instance }
    }

    /// Queues one Event on each of `regarding`. A failure is logged, never fatal: Events are a
    /// courtesy to admins, the status resource is the record.
    /// Applied Events are aggregated as DriftRepaired ones are: an object whose hash
    /// annotation is edited over and over is applied as often. So are Slept and Woke: a
    /// controller woken for a CronWorkflow every few minutes sleeps and wakes as often.
    pub fn publish(&self, reason: Reason, message: String, regarding: &[&ObjectReference]) {
        for reference in regarding {
            let aggregated = match reason {
                Reason::Applied => Some(Subject::Applied(message.clone())),
                Reason::Slept => Some(Subject::Slept(message.clone())),
                Reason::Woke => Some(Subject::Woke(message.clone())),
                _ => None,
            };
            if let Some(subject) = aggregated {
                let applied = Repair {
                    subject,
                    regarding: (*reference).clone(),
                    at: Instant::now(),
                    time: Timestamp::now(),
                };
                self.queue(Queued::Aggregated(Box::new(applied)), reason);
                continue;
            }
            let now = Timestamp::now();
            let event = event(reason, &message, reference, self.instance.clone(), now);
            self.queue(Queued::Event(Box::new(event)), reason);
        }
    }

    /// Queues the news that `object` was reverted to its template, told on `regarding`; the
    /// sender folds repeated repairs of one object into one Event.
    pub fn drift_repaired(&self, object: &ObjectKey, regarding: &ObjectReference) {
        let repair = Repair {
            subject: Subject::Repaired(object.clone()),
            regarding: regarding.clone(),
            at: Instant::now(),
            time: Timestamp::now(),
        };
        self.queue(Queued::Aggregated(Box::new(repair)), Reason::DriftRepaired);
    }

    /// Events that are not sent but kept for a test to read, as `(reason, message, regarding
    /// kind)`.
    #[cfg(test)]
    pub fn recorded() -> (Events, Recorded) {
        let (backlog, pending) = mpsc::channel(BACKLOG);
        let events = Events {
            backlog,
            instance: None,
        };
        (events, Recorded(pending))
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

/// The Events published through [`Events::recorded`].
#[cfg(test)]
pub struct Recorded(mpsc::Receiver<Queued>);

#[cfg(test)]
impl Recorded {
    /// Those published since last asked: reason and the kind of object it is about.
    pub fn take(&mut self) -> Vec<(String, String)> {
        let mut taken = Vec::new();
        while let Ok(queued) = self.0.try_recv() {
            taken.push(match queued {
                Queued::Event(event) => (
                    event.reason.unwrap_or_default(),
                    event.involved_object.kind.unwrap_or_default(),
                ),
                Queued::Aggregated(repair) => (
                    repair.subject.reason().as_str().to_string(),
                    repair.regarding.kind.unwrap_or_default(),
                ),
            });
        }
        taken
    }
}

/// The note of an `Applied` Event.
pub fn applied(created: usize, updated: usize, revision: &str) -> String {
    format!("created {created}, updated {updated} objects at revision {revision}")
}

/// Sends what is queued, one request at a time, and the aggregated repairs when they are due.
async fn send_all(api: Api<Event>, mut pending: mpsc::Receiver<Queued>, mut repairs: Aggregator) {
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
                Some(Queued::Aggregated(repair)) => repairs.repaired(*repair).into_iter().collect(),
                None => return,
            },
            () = wake => repairs.due(Instant::now()),
        };
        for write in writes {
            send(&api, write).await;
        }
    }
}

async fn send(api: &Api<Event>, write: Write) {
    let sent = match write {
        Write::Create(event) => create(api, &event).await.map(|_| event),
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
            match patched {
                Ok(_) => Ok(event),
                // Gone (Events expire after an hour) or never created (that request failed):
                // created now, with everything counted so far.
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    create(api, &event).await.map(|_| event)
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

async fn create(api: &Api<Event>, event: &Event) -> Result<(), (kube::Error, Event)> {
    api.create(&PostParams::default(), event)
        .await
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
    use http::{Request, Response};
    use kube::client::Body;
    use std::time::Duration;

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    /// Answers the next request with its own body; returns `METHOD path`.
    async fn answer(handle: &mut Handle) -> String {
        let (request, send) = handle.next_request().await.expect("a request");
        let line = format!("{} {}", request.method(), request.uri().path());
        let body = request.into_body().collect_bytes().await.unwrap();
        let response = Response::builder()
            .status(201)
            .body(Body::from(body.to_vec()));
        send.send_response(response.unwrap());
        line
    }

    /// Applied Events sent for `regarding` by an edit loop on one object's hash annotation
    /// (each edit makes it outdated, so applied again): the requests the API server sees.
    #[tokio::test(start_paused = true)]
    async fn applies_repeated_within_a_minute_cost_one_event_write_a_minute() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(service, "default");
        let events = Events::start(client);
        let worker = ObjectReference {
            kind: Some("NamespaceWorker".into()),
            name: Some("team-a".into()),
            uid: Some("u1".into()),
            ..ObjectReference::default()
        };
        for _ in 0..5 {
            events.publish(Reason::Applied, applied(0, 1, "abc"), &[&worker]);
        }
        assert_eq!(
            answer(&mut handle).await,
            "POST /api/v1/namespaces/default/events"
        );
        // Paused time runs ahead while nothing else can happen: half a minute without a request.
        let more = tokio::time::timeout(Duration::from_secs(30), handle.next_request()).await;
        assert!(more.is_err(), "a second write within the minute");
        // The four others are counted into one update a minute after (aggregate.rs's tests).
    }

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
