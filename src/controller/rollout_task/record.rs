//! Recording the config in force as the newest revision, and when not to: a replica whose
//! mounted files lag must not renumber an older revision's content.

use super::patch_spec;
use crate::controller::Context;
use crate::controller::in_force::Current;
use crate::rollout::fleet::Fleet;
use crate::sync::read;
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeSet;

/// Whether `current`, the config in force, is to be recorded as the newest revision: new
/// content; a change seen while leading (back to an earlier revision's content too, renumbered
/// as Kubernetes does); the newest's content (nothing renumbered); an older revision's content
/// read after the newest was recorded (an edit made while flotilla was down). Not an older
/// revision's content in files read before it: this replica's mounted ConfigMap was not updated
/// yet (each node updates it in its own time), and renumbering it would roll the fleet back,
/// then forward, and end an undo. It waits for its files.
pub(super) fn newest(ctx: &Context, current: &Current) -> bool {
    let hash = current.renderer.revision();
    let kept = ctx.history.kept();
    let number = kept.number(hash);
    let Some(newest) = kept.newest() else {
        return true;
    };
    let took_over = read(&ctx.rollout.recorded).is_none();
    let stale = took_over
        && number != 0
        && number < kept.number(&newest)
        && ctx
            .history
            .created(&newest)
            .is_some_and(|created| current.since < recorded_by(created));
    if stale {
        tracing::debug!(
            revision = hash,
            number,
            "the files hold an older revision's content, read before the newest was recorded: waiting for them"
        );
    }
    !stale
}

/// The latest instant a revision created at `created` may have been recorded: creation times
/// are whole seconds, so files read within that second may predate it. Taken as stale, they
/// wait for a reload; taken as newer, they would be renumbered and roll the fleet back.
fn recorded_by(created: Timestamp) -> Timestamp {
    created
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(1))
        .unwrap_or(created)
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
