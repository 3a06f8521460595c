//! Kubernetes Events for what happened to a namespace's worker: one per occurrence (they are
//! only published when something was written or a new problem appeared), on both the Namespace
//! and its NamespaceWorker.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

pub struct Events {
    recorder: Recorder,
}

#[derive(Clone, Copy, Debug)]
pub enum Reason {
    Applied,
    DriftRepaired,
    Reaped,
    RenderFailed,
    Conflict,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::Applied => "Applied",
            Reason::DriftRepaired => "DriftRepaired",
            Reason::Reaped => "Reaped",
            Reason::RenderFailed => "RenderFailed",
            Reason::Conflict => "Conflict",
        }
    }

    fn event_type(self) -> EventType {
        match self {
            Reason::Applied | Reason::DriftRepaired | Reason::Reaped => EventType::Normal,
            Reason::RenderFailed | Reason::Conflict => EventType::Warning,
        }
    }
}

impl Events {
    pub fn new(client: kube::Client) -> Events {
        let reporter = Reporter {
            controller: "flotilla".into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Events {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publishes one Event on each of `regarding`. A failure is logged, never fatal: Events are
    /// a courtesy to admins, the status resource is the record.
    pub async fn publish(&self, reason: Reason, note: String, regarding: &[&ObjectReference]) {
        // The Events API caps notes at 1 kB.
        let note: String = note.chars().take(1000).collect();
        let event = Event {
            type_: reason.event_type(),
            reason: reason.as_str().into(),
            note: Some(note),
            action: reason.as_str().into(),
            secondary: None,
        };
        for reference in regarding {
            if let Err(e) = self.recorder.publish(&event, reference).await {
                tracing::warn!(reason = reason.as_str(), error = %e, "could not publish an Event");
            }
        }
    }
}
