//! Whether the admission policy installed in the cluster (`crate::admission`) allows what the
//! config and templates in force render. flotilla cannot keep the policy in step itself: a
//! token that could write the policy could lift it. So on every replica, at start, within
//! seconds of a config change, and every minute, it reads the policy and its binding and
//! compares the allowances the policy was generated with (its annotation) with those of the
//! config in force. When they fall short (a selector edited, a Role's rules changed) it says so
//! loudly: an error in the log naming what is missing and the command to run, the metric
//! `flotilla_admission_policy{state="stale"}`, and, from the leader, a Warning Event on the
//! Fleet. Until the admin applies the new policy, the API server refuses the writes it does
//! not allow (403, with the policy's message in the NamespaceWorker's status).

use super::Context;
use super::events::Reason;
use crate::admission::{BINDING, BOUNDS_ANNOTATION, POLICY, SELECTOR_ANNOTATION};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Resource;
use kube::api::Api;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the config in force is looked at for a change...
const POLL: Duration = Duration::from_secs(5);
/// ...and the installed policy read again even without one (an admin applying it).
const REREAD: Duration = Duration::from_secs(60);

/// The installed policy against the config in force.
#[derive(Debug, Clone, PartialEq)]
pub enum Standing {
    /// It allows everything the config renders.
    InStep,
    /// Not installed (Kubernetes before 1.30, or left out): RBAC alone bounds the token.
    Missing(&'static str),
    /// Installed for another config: what the config renders and it does not allow.
    Stale {
        generated_for: String,
        missing: Vec<String>,
    },
    /// It could not be read (the reason).
    Unreadable(String),
}

impl Standing {
    pub fn state(&self) -> &'static str {
        match self {
            Standing::InStep => "in_step",
            Standing::Missing(_) => "missing",
            Standing::Stale { .. } => "stale",
            Standing::Unreadable(_) => "unreadable",
        }
    }

    fn message(&self, selector: &str) -> String {
        let apply = "apply what `flotilla rbac --admission-policy` prints for this config (make manifests, then kubectl apply -k manifests/)";
        match self {
            Standing::InStep => {
                format!("the admission policy {POLICY} allows what the config renders")
            }
            Standing::Missing(what) => format!(
                "the admission policy {what} is not installed: flotilla's token is bounded by RBAC alone (docs/security.md); on Kubernetes 1.30 or later, {apply}"
            ),
            Standing::Stale {
                generated_for,
                missing,
            } => format!(
                "the admission policy {POLICY} was generated for selector {generated_for}, not for the config in force (selector {selector}); it does not allow {}, so the API server refuses those writes: {apply}",
                missing.join(", ")
            ),
            Standing::Unreadable(why) => {
                format!("cannot read the admission policy {POLICY}: {why}")
            }
        }
    }
}

/// Pure: the standing of the installed policy (its annotations; `None` when absent) and binding
/// against `ours`, the allowances of the config in force ([`crate::admission::Bounds::allowances`]).
pub fn standing(
    policy: Option<&BTreeMap<String, String>>,
    binding: bool,
    ours: &BTreeMap<String, String>,
) -> Standing {
    let Some(annotations) = policy else {
        return Standing::Missing(POLICY);
    };
    if !binding {
        return Standing::Missing(BINDING);
    }
    let installed: Vec<&str> = annotations
        .get(BOUNDS_ANNOTATION)
        .map(|d| d.split_whitespace().collect())
        .unwrap_or_default();
    let mut missing: Vec<String> = ours
        .iter()
        .filter(|(digest, _)| !installed.contains(&digest.as_str()))
        .map(|(_, what)| what.clone())
        .collect();
    missing.sort();
    if missing.is_empty() {
        return Standing::InStep;
    }
    Standing::Stale {
        generated_for: annotations
            .get(SELECTOR_ANNOTATION)
            .cloned()
            .unwrap_or_else(|| "(unknown)".into()),
        missing,
    }
}

/// Reads the policy's annotations and whether its binding exists.
async fn installed(
    client: &kube::Client,
) -> kube::Result<(Option<BTreeMap<String, String>>, bool)> {
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let policy = policies
        .get_opt(POLICY)
        .await?
        .map(|p| p.metadata.annotations.unwrap_or_default());
    let binding = bindings.get_opt(BINDING).await?.is_some();
    Ok((policy, binding))
}

/// Follows the installed policy against the config in force until the process ends.
pub async fn follow(ctx: Arc<Context>, leader: watch::Receiver<bool>) {
    let mut told: Option<(Standing, bool)> = None;
    let mut judged: Option<(String, String, Instant)> = None;
    loop {
        let in_force = ctx.in_force.get();
        let key = (
            in_force.config.selector_text.clone(),
            in_force.renderer.revision().to_string(),
        );
        let due = judged.as_ref().is_none_or(|(selector, revision, at)| {
            (selector, revision) != (&key.0, &key.1) || at.elapsed() >= REREAD
        });
        if due {
            judged = Some((key.0, key.1, Instant::now()));
            let now = match crate::admission::bounds(&in_force.renderer, &in_force.config, &[]) {
                Ok(bounds) => match installed(&ctx.client).await {
                    Ok((policy, binding)) => {
                        standing(policy.as_ref(), binding, &bounds.allowances())
                    }
                    Err(e) => Standing::Unreadable(e.to_string()),
                },
                // The config's own render fails: `flotilla check` and the reconciles say why.
                Err(e) => Standing::Unreadable(e.to_string()),
            };
            let leading = *leader.borrow();
            if told.as_ref() != Some(&(now.clone(), leading)) {
                tell(&ctx, &now, leading, told.as_ref().map(|(s, _)| s));
                told = Some((now, leading));
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

fn tell(ctx: &Context, now: &Standing, leading: bool, before: Option<&Standing>) {
    let selector = ctx.in_force.get().config.selector_text.clone();
    let message = now.message(&selector);
    if before != Some(now) {
        match now {
            Standing::InStep => tracing::info!(policy = POLICY, "{message}"),
            Standing::Missing(_) | Standing::Unreadable(_) => {
                tracing::warn!(policy = POLICY, "{message}")
            }
            Standing::Stale { .. } => tracing::error!(policy = POLICY, "{message}"),
        }
        ctx.metrics.admission_policy(now.state());
    }
    if leading
        && matches!(now, Standing::Stale { .. })
        && let Some(fleet) = ctx.stores.fleet()
    {
        let about = [&fleet.object_ref(&())];
        ctx.events
            .publish(Reason::AdmissionPolicyStale, message, &about);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowances(items: &[(&str, &str)]) -> BTreeMap<String, String> {
        items
            .iter()
            .map(|(d, w)| (d.to_string(), w.to_string()))
            .collect()
    }

    type Installed = Option<BTreeMap<String, String>>;

    fn annotations(digests: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (BOUNDS_ANNOTATION.to_string(), digests.to_string()),
            (SELECTOR_ANNOTATION.to_string(), "team=on".to_string()),
        ])
    }

    #[test]
    fn the_installed_policy_is_judged_by_what_the_config_needs() {
        let ours = allowances(&[("aa", "the selector a=b"), ("bb", "Role r's rules")]);
        let cases: [(Installed, bool, Standing); 6] = [
            (None, false, Standing::Missing(POLICY)),
            (
                Some(annotations("aa bb")),
                false,
                Standing::Missing(BINDING),
            ),
            (Some(annotations("aa bb")), true, Standing::InStep),
            // A policy that allows more (argo-server's Role too) serves a config that needs less.
            (Some(annotations("cc aa dd bb")), true, Standing::InStep),
            (
                Some(annotations("aa")),
                true,
                Standing::Stale {
                    generated_for: "team=on".into(),
                    missing: vec!["Role r's rules".into()],
                },
            ),
            (
                Some(BTreeMap::new()),
                true,
                Standing::Stale {
                    generated_for: "(unknown)".into(),
                    missing: vec!["Role r's rules".into(), "the selector a=b".into()],
                },
            ),
        ];
        for (policy, binding, want) in cases {
            assert_eq!(
                standing(policy.as_ref(), binding, &ours),
                want,
                "{policy:?}"
            );
        }
    }

    #[test]
    fn a_stale_policy_names_what_it_lacks_and_what_to_run() {
        let stale = Standing::Stale {
            generated_for: "flotilla.dev/enabled=true".into(),
            missing: vec!["the selector tier=gold (instance flotilla, namespace flotilla-system, reserved kube-system)".into()],
        };
        assert_eq!(
            stale.message("tier=gold"),
            "the admission policy flotilla-stamp was generated for selector flotilla.dev/enabled=true, not for the config in force (selector tier=gold); it does not allow the selector tier=gold (instance flotilla, namespace flotilla-system, reserved kube-system), so the API server refuses those writes: apply what `flotilla rbac --admission-policy` prints for this config (make manifests, then kubectl apply -k manifests/)"
        );
    }
}
