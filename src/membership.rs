//! Who is in the fleet: the one rule every part of flotilla judges a namespace by. A namespace
//! is in the fleet while its labels match the selector and it is not being deleted. The
//! reconcile's triage (stamp or reap), the rollout (who moves, who counts) and the brake on mass
//! reaping (who opts out) all ask [`of`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{Selector, SelectorExt};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Membership {
    /// Its labels match the selector and it is not being deleted.
    Member,
    /// It exists, is not being deleted, and its labels no longer match: it opts out, and its
    /// reaping may wait for the brake.
    #[default]
    OptingOut,
    /// It is being deleted (it has a deletionTimestamp), whatever its labels: what it leaves is
    /// reaped at once.
    Terminating,
}

/// The membership of the Namespace whose metadata is `meta`, under `selector`.
pub fn of(meta: &ObjectMeta, selector: &Selector) -> Membership {
    if meta.deletion_timestamp.is_some() {
        return Membership::Terminating;
    }
    let labels = meta.labels.clone().unwrap_or_default();
    if selector.matches(&labels) {
        Membership::Member
    } else {
        Membership::OptingOut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn a_member_matches_the_selector_and_is_not_being_deleted() {
        let selector = crate::selector::parse("flotilla.dev/enabled=true").unwrap();
        let meta = |label: Option<&str>, deleted: bool| ObjectMeta {
            labels: label.map(|v| [("flotilla.dev/enabled".to_string(), v.to_string())].into()),
            deletion_timestamp: deleted.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        };
        // (label, being deleted) -> membership
        let cases = [
            ((Some("true"), false), Membership::Member),
            ((Some("false"), false), Membership::OptingOut),
            ((None, false), Membership::OptingOut),
            ((Some("true"), true), Membership::Terminating),
            ((None, true), Membership::Terminating),
        ];
        for ((label, deleted), want) in cases {
            assert_eq!(
                of(&meta(label, deleted), &selector),
                want,
                "label {label:?}, deleted {deleted}"
            );
        }
    }
}
