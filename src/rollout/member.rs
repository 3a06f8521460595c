//! A NamespaceWorker's status as the rollout reads it.

use super::plan::Member;
use crate::status::{Phase, WorkerStatus};
use k8s_openapi::jiff::Timestamp;

/// Namespace `name` (a canary or not), as its worker's status shows it.
pub fn member(name: &str, canary: bool, status: Option<&WorkerStatus>) -> Member {
    let Some(status) = status else {
        return Member {
            name: name.into(),
            canary,
            ..Member::default()
        };
    };
    let time = |text: &str| text.parse::<Timestamp>().ok();
    let applied_reason = |reason: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Applied" && c.reason == reason)
    };
    let unrendered =
        status.phase == Phase::RenderFailed && applied_reason(crate::status::REVISION_UNAVAILABLE);
    let condition = status.conditions.iter().find(|c| c.type_ == "Available");
    let since = |healthy: bool| {
        condition
            .filter(|c| (c.status == "True") == healthy)
            .and_then(|c| time(&c.last_transition_time))
    };
    Member {
        name: name.into(),
        canary,
        applied: Some(status.revision.clone()).filter(|r| !r.is_empty()),
        applied_since: time(&status.revision_since),
        healthy_since: since(true),
        unhealthy_since: since(false),
        // Not rendered only because its revision was not kept: nothing about the revision it
        // runs, which the turn queues again once it is kept.
        failing: matches!(
            status.phase,
            Phase::RenderFailed | Phase::ApplyFailed | Phase::Conflict
        ) && !unrendered,
        unrendered,
        failed_at: Some(status.failed_revision.clone()).filter(|r| !r.is_empty()),
        passing: status.phase == Phase::ApplyFailed && applied_reason(crate::status::SERVER_ERROR),
        asleep: status.phase == Phase::Sleeping,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::Condition;

    #[test]
    fn reads_revision_health_and_failure() {
        let status = WorkerStatus {
            phase: Phase::Ready,
            revision: "r2".into(),
            revision_since: "2026-12-01T10:00:00Z".into(),
            last_reconcile_time: "2026-12-01T10:00:05Z".into(),
            conditions: vec![Condition {
                type_: "Available".into(),
                status: "True".into(),
                last_transition_time: "2026-12-01T10:00:03Z".into(),
                ..Condition::default()
            }],
            ..WorkerStatus::default()
        };
        let m = member("team-a", true, Some(&status));
        assert_eq!(m.applied.as_deref(), Some("r2"));
        assert_eq!(m.applied_since.unwrap().to_string(), "2026-12-01T10:00:00Z");
        assert_eq!(m.healthy_since.unwrap().to_string(), "2026-12-01T10:00:03Z");
        assert!(m.canary && !m.failing && !m.asleep);
        let sleeping = WorkerStatus {
            phase: Phase::Sleeping,
            ..status.clone()
        };
        assert!(member("team-a", false, Some(&sleeping)).asleep);
        let failed = WorkerStatus {
            phase: Phase::RenderFailed,
            conditions: Vec::new(),
            ..status.clone()
        };
        let m = member("team-a", false, Some(&failed));
        assert!(m.failing && m.healthy_since.is_none() && m.unhealthy_since.is_none());
        // Its revision not kept: not a failure, to be reconciled again once it is.
        let mut unrendered = failed.clone();
        unrendered.conditions = vec![Condition {
            type_: "Applied".into(),
            reason: crate::status::REVISION_UNAVAILABLE.into(),
            ..Condition::default()
        }];
        let m = member("team-a", false, Some(&unrendered));
        assert!(!m.failing && m.unrendered);
        // A 5xx: failing, and it may pass.
        let mut server_error = unrendered.clone();
        server_error.phase = Phase::ApplyFailed;
        server_error.failed_revision = "r2".into();
        server_error.conditions[0].reason = crate::status::SERVER_ERROR.into();
        let m = member("team-a", false, Some(&server_error));
        assert!(m.failing && m.passing && !m.unrendered);
        assert_eq!(m.failed_at.as_deref(), Some("r2"));
        let mut unhealthy = status.clone();
        unhealthy.conditions[0].status = "False".into();
        let m = member("team-a", false, Some(&unhealthy));
        assert_eq!(
            (m.healthy_since, m.unhealthy_since.map(|t| t.to_string())),
            (None, Some("2026-12-01T10:00:03Z".into()))
        );
        let new = member("team-b", false, None);
        assert_eq!((new.applied, new.failing), (None, false));
    }
}
