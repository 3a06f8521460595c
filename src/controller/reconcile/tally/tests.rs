//! What the steps came to, and the status and outcome computed from it: tables of cases.

use super::*;
use crate::kinds::Kind;
use crate::membership::Membership;
use crate::plan::{NamespaceState, Removal, Verified};
use crate::render::{RenderError, RenderErrors, RenderProblem};
use crate::status::Phase;

fn key(name: &str) -> ObjectKey {
    ObjectKey {
        kind: Kind::ConfigMap,
        namespace: "team-a".into(),
        name: name.into(),
    }
}

fn verified(rv: &str) -> Verified {
    Verified {
        resource_version: rv.into(),
        health: None,
    }
}

/// An error the API server answered `code` to.
fn failed(code: u16) -> Error {
    let status = kube::core::Status {
        code,
        message: format!("answered {code}"),
        ..kube::core::Status::default()
    };
    Error::on("apply", key("x"))(kube::Error::Api(Box::new(status)))
}

#[test]
fn each_step_is_counted_once_and_what_was_in_sync_is_remembered() {
    let done = vec![
        Ok(Done::InSync(key("a"), verified("1"))),
        Ok(Done::Created(key("b"), verified("2"))),
        Ok(Done::Updated(key("c"), verified("3"))),
        Ok(Done::DriftRepaired(key("d"), verified("4"))),
        Ok(Done::Conflict(key("e"), "theirs".into())),
        Ok(Done::Deleted(key("f"), Removal::Pruned)),
        Ok(Done::Deleted(key("g"), Removal::Reaped)),
        Ok(Done::NotDeleted(key("h"))),
    ];
    let tally = Tally::of(done, None);
    let o = &tally.outcome;
    assert_eq!(
        (
            o.created,
            o.updated,
            o.drift_repaired,
            o.pruned,
            o.reaped,
            o.conflicts
        ),
        (1, 1, 1, 1, 1, 1)
    );
    assert_eq!(tally.repaired, [key("d")]);
    assert_eq!(tally.conflicts, [(key("e"), "theirs".to_string())]);
    for (name, rv) in [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")] {
        let kept = tally.verified.get(&key(name));
        assert!(kept.is_some_and(|v| v.resource_version.is(rv)), "{name}");
    }
    for name in ["e", "f", "g", "h"] {
        assert!(tally.verified.get(&key(name)).is_none(), "{name}");
    }
}

#[test]
fn a_refusal_or_a_server_error_is_news_and_any_other_failure_is_the_reconcile_s_error() {
    // (the first error's code) -> Some(whether a server error) or an error
    let cases = [
        (None, Ok(None)),
        (Some(422), Ok(Some(false))),
        (Some(403), Ok(Some(false))),
        (Some(429), Err(())),
        // A 5xx may pass, but one that lasts must show: news too, marked as such.
        (Some(503), Ok(Some(true))),
        (Some(500), Ok(Some(true))),
    ];
    for (code, want) in cases {
        let mut done = vec![Ok(Done::Created(key("a"), verified("1")))];
        if let Some(code) = code {
            // Only the first failure counts.
            done.extend([Err(failed(code)), Err(failed(500))]);
        }
        let mut tally = Tally::of(done, None);
        let got = tally
            .refusal()
            .map(|r| r.map(|r| r.server_error))
            .map_err(|_| ());
        assert_eq!(got, want, "{code:?}");
    }
}

#[test]
fn the_status_and_outcome_follow_what_was_rendered_and_done() {
    let namespace = NamespaceState {
        membership: Membership::Member,
        ..NamespaceState::default()
    };
    let snapshot = Snapshot {
        name: "team-a".into(),
        revision: "r1".into(),
        ..Snapshot::default()
    };
    let rendered = |ok: bool| -> Result<Vec<crate::object::Stamped>, RenderErrors> {
        if ok {
            return Ok(Vec::new());
        }
        Err(RenderErrors(vec![RenderError {
            origin: "cm.yaml".into(),
            line: Some(3),
            problem: RenderProblem::RevisionUnavailable,
        }]))
    };
    let conflict = Ok(Done::Conflict(key("a"), "theirs".into()));
    let now = status::now();
    // (rendered, steps done, refusal) -> (phase, render failed, refused, conflicts)
    let cases = [
        (true, vec![], None, (Phase::Pending, false, false, 0)),
        (false, vec![], None, (Phase::RenderFailed, true, false, 0)),
        (
            true,
            vec![conflict],
            None,
            (Phase::Conflict, false, false, 1),
        ),
        (
            true,
            vec![],
            Some(("422: invalid", false)),
            (Phase::ApplyFailed, false, true, 0),
        ),
        (
            true,
            vec![],
            Some(("500: webhook unreachable", true)),
            (Phase::ApplyFailed, false, true, 0),
        ),
    ];
    for (ok, done, refusal, want) in cases {
        let sync = Sync {
            namespace: &namespace,
            rendered: rendered(ok),
            instance_id: None,
            sleep: None,
        };
        let tally = Tally::of(done, None);
        let refused = refusal.map(|(message, server_error)| Refusal {
            message: message.into(),
            server_error,
        });
        let (status, outcome) = tally.conclude(&snapshot, &sync, refused.as_ref(), now);
        let got = (
            status.phase,
            outcome.render_failed,
            outcome.refused,
            outcome.conflicts,
        );
        assert_eq!(got, want, "rendered {ok}, refusal {refusal:?}");
        assert_eq!(status.last_reconcile_time, now.to_string());
        let revision = if ok { "r1" } else { "" };
        assert_eq!(status.revision, revision, "a failed render applies nothing");
        // Where it failed, even when nothing was applied: a rollout reads it. Not for the
        // revision not kept (the render failure here), no fault of its content.
        let failed = !matches!(status.phase, Phase::Pending | Phase::RenderFailed);
        assert_eq!(status.failed_revision, if failed { "r1" } else { "" });
        let unavailable = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Applied" && c.reason == crate::status::REVISION_UNAVAILABLE);
        assert_eq!(unavailable, !ok);
        let reason = status.conditions.iter().find(|c| c.type_ == "Applied");
        let server_error = refusal.is_some_and(|(_, server)| server);
        assert_eq!(
            reason.is_some_and(|c| c.reason == crate::status::SERVER_ERROR),
            server_error
        );
    }
}

#[test]
fn sleeping_or_waking_next_is_when_to_look_again() {
    use crate::sleep::{Cause, Policy, Verdict, Wake};
    let deployment = ObjectKey {
        kind: Kind::Deployment,
        namespace: "team-a".into(),
        name: "workflow-controller".into(),
    };
    let available = status::availability(&serde_json::json!({
        "metadata": {"generation": 1},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                   "availableReplicas": 1, "readyReplicas": 1},
    }));
    let namespace = NamespaceState {
        membership: Membership::Member,
        ..NamespaceState::default()
    };
    let now = status::now();
    let snapshot = Snapshot {
        name: "team-a".into(),
        revision: "r1".into(),
        sleep: Some(Policy::default()),
        soak: Duration::from_secs(60),
        now,
        ..Snapshot::default()
    };
    let later = |s: i64| now + jiff::SignedDuration::from_secs(s);
    let secs = |s: u64| Some(Duration::from_secs(s));
    // (verdict) -> when to look again
    let cases = [
        (None, None),
        (
            // Decided before this reconcile saw it available: proven a soak from now.
            Some(Verdict::Awake {
                cause: Cause::Proving,
                until: None,
            }),
            secs(60),
        ),
        (
            Some(Verdict::Awake {
                cause: Cause::Idle(now),
                until: Some(later(100)),
            }),
            secs(100),
        ),
        (
            Some(Verdict::Awake {
                cause: Cause::Workflows(1),
                until: None,
            }),
            None,
        ),
        (
            Some(Verdict::Asleep {
                since: now,
                wake: Wake {
                    at: later(300),
                    cause: Cause::Housekeeping,
                },
            }),
            secs(300),
        ),
    ];
    for (verdict, want) in cases {
        let stamped = crate::object::Stamped {
            key: deployment.clone(),
            body: serde_json::json!({}),
            hash: "h".into(),
            template: "d.yaml".into(),
        };
        let sync = Sync {
            namespace: &namespace,
            rendered: Ok(vec![stamped]),
            instance_id: None,
            sleep: verdict.clone(),
        };
        let done = vec![Ok(Done::InSync(
            deployment.clone(),
            Verified {
                resource_version: "1".into(),
                health: available.clone().map(Box::new),
            },
        ))];
        let tally = Tally::of(done, Some(&deployment));
        let (_, outcome) = tally.conclude(&snapshot, &sync, None, now);
        assert_eq!(outcome.recheck, want, "{verdict:?}");
    }
}
