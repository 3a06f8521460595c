//! Recording the config in force as the newest revision, and when not to: a replica whose
//! mounted files lag must not renumber an older revision's content.

use super::patch_spec;
use crate::controller::Context;
use crate::controller::in_force::Current;
use crate::rollout::fleet::Fleet;
use crate::sync::{lock, read};
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long a replica waits for its files to catch up before it takes them as they are. The
/// kubelet updates a mounted ConfigMap within its sync period plus its cache's TTL, a minute each
/// by default: files older than that after a takeover are what the admin wrote.
const FILES_LAG: Duration = Duration::from_secs(180);

/// Whether `current`, the config in force, is to be recorded as the newest revision: new
/// content; a change seen while leading (back to an earlier revision's content too, renumbered
/// as Kubernetes does); the newest's content (nothing renumbered); an older revision's content
/// read after the newest was recorded (an edit made while flotilla was down). Not an older
/// revision's content in files read before it, at a takeover: this replica's mounted ConfigMap
/// was not updated yet (each node updates it in its own time), and renumbering it would roll the
/// fleet back, then forward, and end an undo. It waits for its files, [`FILES_LAG`] at most.
pub(super) fn newest(ctx: &Context, current: &Current) -> bool {
    let hash = current.renderer.revision();
    let kept = ctx.history.kept();
    let Some(newest) = kept.newest() else {
        return true;
    };
    let took_over = read(&ctx.rollout.recorded).is_none();
    let suspect = took_over
        && read_before(
            kept.number(hash),
            kept.number(&newest),
            current.since,
            ctx.history.recorded(&newest),
        );
    let mut waiting = lock(&ctx.rollout.waiting_for_files);
    if !suspect {
        *waiting = None;
        return true;
    }
    let waited = waiting.get_or_insert_with(Instant::now).elapsed();
    if waited < FILES_LAG {
        tracing::debug!(
            revision = hash,
            "the files hold an older revision's content, read before the newest was recorded: waiting for them"
        );
        return false;
    }
    tracing::warn!(
        revision = hash,
        waited_seconds = waited.as_secs(),
        "the files still hold an older revision's content: taken as the admin's and recorded as the newest"
    );
    true
}

/// Whether files holding revision number `number` (0: not kept), read at `since`, may predate
/// the newest revision, number `newest`, recorded at `recorded`.
fn read_before(number: i64, newest: i64, since: Timestamp, recorded: Option<Timestamp>) -> bool {
    number != 0 && number < newest && recorded.is_some_and(|recorded| since < recorded)
}

/// Records the config in force as the newest revision, keeping those the fleet still uses. A
/// newer revision supersedes an undo.
pub(super) async fn record(ctx: &Context, current: &Current, fleet: &Fleet) -> kube::Result<()> {
    let mut in_use: BTreeSet<String> = ctx
        .stores
        .workers()
        .iter()
        .filter_map(|w| w.member.applied.clone())
        .collect();
    if let Some(status) = &fleet.status {
        in_use.extend([status.stable_hash.clone(), status.target_hash.clone()]);
    }
    let made_newest = ctx.history.record(&ctx.client, current, &in_use).await?;
    if made_newest && fleet.spec.revision.is_some() {
        patch_spec(ctx, serde_json::json!({"revision": null})).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::read_before;
    use k8s_openapi::jiff::Timestamp;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn files_are_suspect_only_when_they_hold_an_older_kept_revision_read_before_the_newest() {
        let recorded = Some(at("2026-12-06T04:00:00.500Z"));
        let cases = [
            // (number, newest, since, recorded, suspect)
            (1, 2, "2026-12-06T04:00:00.400Z", recorded, true),
            // Read within the same second, after: a restart right after the recording.
            (1, 2, "2026-12-06T04:00:00.600Z", recorded, false),
            (2, 2, "2026-12-06T03:00:00Z", recorded, false),
            (0, 2, "2026-12-06T03:00:00Z", recorded, false),
            (1, 2, "2026-12-06T03:00:00Z", None, false),
        ];
        for (number, newest, since, recorded, suspect) in cases {
            assert_eq!(
                read_before(number, newest, at(since), recorded),
                suspect,
                "number {number} of {newest}, read at {since}"
            );
        }
    }
}
