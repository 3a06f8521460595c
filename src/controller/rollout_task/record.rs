//! Recording the config in force as the newest revision, and when not to: a replica whose
//! mounted files lag must not renumber an older revision's content.

use super::patch_spec;
use crate::controller::Context;
use crate::controller::in_force::{Current, PartsRead};
use crate::rollout::fleet::Fleet;
use crate::rollout::revision::Content;
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
/// as Kubernetes does); the newest's content (nothing renumbered); files read after the newest
/// was recorded (an edit made while flotilla was down). Not, at a takeover, files of which a
/// part (the templates, or the values) is not as the newest has it and was read before the
/// newest was recorded: this replica's mounted ConfigMap of that part was not updated yet (each
/// node updates each ConfigMap in its own time), and recording it would roll the fleet back to
/// the old part, or out to a mix no admin wrote, and end an undo. It waits for its files,
/// [`FILES_LAG`] at most.
pub(super) fn newest(ctx: &Context, current: &Current) -> bool {
    let hash = current.renderer.revision();
    let Some(newest) = ctx.history.kept().newest() else {
        return true;
    };
    let took_over = read(&ctx.rollout.recorded).is_none();
    let suspect = took_over
        && ctx.history.content(&newest).is_some_and(|newest_content| {
            let files = Content::of(&current.config, current.renderer.sources());
            stale(
                &files,
                &newest_content,
                current.since,
                ctx.history.recorded(&newest),
            )
        });
    let mut waiting = lock(&ctx.rollout.waiting_for_files);
    if !suspect {
        *waiting = None;
        return true;
    }
    let waited = waiting.get_or_insert_with(Instant::now).elapsed();
    if waited < FILES_LAG {
        tracing::debug!(
            revision = hash,
            "the files hold a part read before the newest revision was recorded, not as it has it: waiting for them"
        );
        return false;
    }
    tracing::warn!(
        revision = hash,
        waited_seconds = waited.as_secs(),
        "the files still hold a part older than the newest revision: taken as the admin's and recorded as the newest"
    );
    true
}

/// Whether `files` hold a part that is not as `newest` has it and was read (`since`) before
/// `newest` was recorded (`recorded`).
fn stale(files: &Content, newest: &Content, since: PartsRead, recorded: Option<Timestamp>) -> bool {
    let Some(recorded) = recorded else {
        return false;
    };
    let templates = files.templates != newest.templates && since.templates < recorded;
    let values = (files.values != newest.values || files.overrides != newest.overrides)
        && since.values < recorded;
    templates || values
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
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    fn content(template: &str, value: i64) -> Content {
        Content {
            templates: [("cm.yaml".to_string(), template.to_string())].into(),
            values: [("a".to_string(), value.into())].into_iter().collect(),
            overrides: Default::default(),
        }
    }

    #[test]
    fn files_are_stale_when_a_part_not_as_the_newest_has_it_was_read_before_it() {
        let recorded = Some(at("2026-12-06T04:00:00.500Z"));
        let newest = content("new", 2);
        let before = "2026-12-06T04:00:00.400Z";
        // Within the same second, after: a restart right after the recording.
        let after = "2026-12-06T04:00:00.600Z";
        let cases = [
            // (files, templates read, values read, recorded, stale)
            (
                "an older revision, read before",
                content("old", 1),
                before,
                before,
                recorded,
                true,
            ),
            (
                "an older revision, read after",
                content("old", 1),
                after,
                after,
                recorded,
                false,
            ),
            (
                "the newest, read before",
                content("new", 2),
                before,
                before,
                recorded,
                false,
            ),
            (
                "new values, old templates read before",
                content("old", 2),
                before,
                after,
                recorded,
                true,
            ),
            (
                "old values read before, new templates",
                content("new", 1),
                after,
                before,
                recorded,
                true,
            ),
            (
                "another value read after, templates as the newest",
                content("new", 3),
                before,
                after,
                recorded,
                false,
            ),
            (
                "an older revision, the newest's time unknown",
                content("old", 1),
                before,
                before,
                None,
                false,
            ),
        ];
        for (case, files, templates, values, recorded, want) in cases {
            let since = PartsRead {
                templates: at(templates),
                values: at(values),
            };
            assert_eq!(stale(&files, &newest, since, recorded), want, "{case}");
        }
    }
}
