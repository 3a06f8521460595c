//! The ValidatingAdmissionPolicy that bounds flotilla's token in the API server
//! (`flotilla rbac --admission-policy`, which `manifests/generate.sh` writes to
//! `manifests/generated/admission-policy.yaml`).
//!
//! RBAC limits flotilla's writes to the names its templates render, but a name holds in every
//! namespace and says nothing of content: with the token alone, a Deployment
//! `workflow-controller` in `kube-system` or a Role `argo-role` granting `*` on `*` would pass.
//! The policy refuses, for requests by flotilla's ServiceAccount only: any write in a namespace
//! neither opted in (the selector, on the namespace's labels) nor flotilla's own; any delete of
//! an object not labelled as this instance's; in flotilla's own namespace, any object the
//! templates do not place there; a Role whose rules, a RoleBinding whose roleRef and subjects,
//! and a Deployment whose ServiceAccount are not what the templates render; a pod that takes
//! anything of the node (the render policy's pod rules); a Service of a type the config does
//! not allow, or with external IPs.
//!
//! What it pins is read from the templates rendered for the sample namespaces, as `flotilla
//! rbac` reads the names ([`crate::rbac::sample_renders`]), so it cannot drift from what
//! `run` applies. A value equal to the sample namespace's name stands for the request's
//! namespace (a RoleBinding's subjects name it); any other value that differs between the two
//! samples cannot be pinned, and is refused here, naming the template.

mod cel;
mod document;

pub use document::{BINDING, POLICY, policy_yaml};

use crate::config::{Config, RESERVED_NAMESPACES, ServiceType};
use crate::kinds::Kind;
use crate::rbac::{NamesError, Sample, Set};
use crate::render::{Pinned, RenderError, RenderErrors, RenderProblem, Renderer};
use kube::core::Selector;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The annotation on the installed policy that holds the digests of [`Bounds::allowances`]: what
/// a running flotilla compares with the allowances of its config and templates as they are now.
pub const BOUNDS_ANNOTATION: &str = "flotilla.dev/bounds";
/// The annotation that holds the selector the policy was generated for, for messages.
pub const SELECTOR_ANNOTATION: &str = "flotilla.dev/selector";

/// A value as the templates render it for any namespace: the namespace's own name stands for
/// the namespace of the request.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    Namespace,
    Value(Value),
    List(Vec<Pattern>),
    Map(BTreeMap<String, Pattern>),
}

impl Pattern {
    fn of(value: &Value, namespace: &str) -> Pattern {
        match value {
            Value::String(s) if s == namespace => Pattern::Namespace,
            Value::Array(items) => {
                Pattern::List(items.iter().map(|v| Pattern::of(v, namespace)).collect())
            }
            Value::Object(map) => Pattern::Map(
                map.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), Pattern::of(v, namespace)))
                    .collect(),
            ),
            other => Pattern::Value(other.clone()),
        }
    }
}

/// What the policy pins, read from the sample renders and the config.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounds {
    pub instance: String,
    pub own_namespace: String,
    pub selector: Selector,
    pub selector_text: String,
    /// Reserved namespaces the config does not allow as targets, selector or not.
    pub reserved: Vec<String>,
    /// What the templates place in flotilla's own namespace.
    pub own_objects: BTreeSet<(Kind, String)>,
    /// Per Role name, each set of rules it is rendered with.
    pub roles: BTreeMap<String, Vec<Pattern>>,
    /// Per RoleBinding name, each `{roleRef, subjects}` it is rendered with.
    pub bindings: BTreeMap<String, Vec<Pattern>>,
    /// Per Deployment name, each ServiceAccount its pods run as.
    pub accounts: BTreeMap<String, BTreeSet<String>>,
    pub service_types: Vec<ServiceType>,
}

/// The policy's bounds for the config's templates, as rendered by `flotilla rbac` (and with
/// `sets`, both renders: an admin may turn that part on while flotilla runs).
pub fn bounds(renderer: &Renderer, config: &Config, sets: &[Set]) -> Result<Bounds, NamesError> {
    let renders = crate::rbac::sample_renders(renderer, config, sets)?;
    let pairs: Vec<&[Sample; 2]> = renders.iter().map(|(_, samples)| samples).collect();
    Bounds::from_samples(config, &pairs).map_err(|errors| NamesError::Render {
        with: Vec::new(),
        errors,
    })
}

impl Bounds {
    /// Pure: the bounds of these renders, each a pair of sample namespaces rendered alike.
    pub fn from_samples(config: &Config, renders: &[&[Sample; 2]]) -> Result<Bounds, RenderErrors> {
        let mut bounds = Bounds {
            instance: config.instance.clone(),
            own_namespace: config.namespace.clone(),
            selector: config.selector.clone(),
            selector_text: config.selector_text.clone(),
            reserved: RESERVED_NAMESPACES
                .iter()
                .filter(|ns| !config.policy.allow_namespaces.iter().any(|a| a == *ns))
                .map(|ns| ns.to_string())
                .collect(),
            own_objects: BTreeSet::new(),
            roles: BTreeMap::new(),
            bindings: BTreeMap::new(),
            accounts: BTreeMap::new(),
            service_types: config.policy.allow_service_types.clone(),
        };
        let mut errors = Vec::new();
        for [first, second] in renders.iter().copied() {
            for object in &first.objects {
                let twin = second
                    .objects
                    .iter()
                    .find(|o| o.template == object.template);
                bounds.add(object, first, twin.map(|t| (t, second)), &mut errors);
            }
        }
        if !errors.is_empty() {
            return Err(RenderErrors(errors));
        }
        Ok(bounds)
    }

    fn add(
        &mut self,
        object: &crate::object::Stamped,
        sample: &Sample,
        twin: Option<(&crate::object::Stamped, &Sample)>,
        errors: &mut Vec<RenderError>,
    ) {
        // The part of the object the policy pins, for either sample.
        let pinned = |body: &Value, namespace: &str| -> Pattern {
            match object.key.kind {
                Kind::Role => Pattern::of(&body["rules"], namespace),
                Kind::RoleBinding => Pattern::of(
                    &serde_json::json!({"roleRef": body["roleRef"], "subjects": body["subjects"]}),
                    namespace,
                ),
                Kind::Deployment => Pattern::of(
                    &body["spec"]["template"]["spec"]["serviceAccountName"],
                    namespace,
                ),
                _ => Pattern::Value(Value::Null),
            }
        };
        let pattern = pinned(&object.body, &sample.namespace);
        if let Some((twin, other)) = twin
            && pinned(&twin.body, &other.namespace) != pattern
        {
            errors.push(RenderError {
                origin: object.template.clone(),
                line: None,
                problem: RenderProblem::PinnedFromNamespace(Box::new(Pinned {
                    object: object.key.clone(),
                    field: pinned_field(object.key.kind),
                    namespaces: [sample.namespace.clone(), other.namespace.clone()],
                })),
            });
            return;
        }
        let name = object.key.name.clone();
        if object.key.namespace == self.own_namespace {
            self.own_objects.insert((object.key.kind, name.clone()));
        }
        let push = |variants: &mut Vec<Pattern>| {
            if !variants.contains(&pattern) {
                variants.push(pattern.clone());
            }
        };
        match (object.key.kind, &pattern) {
            (Kind::Role, _) => push(self.roles.entry(name).or_default()),
            (Kind::RoleBinding, _) => push(self.bindings.entry(name).or_default()),
            (Kind::Deployment, Pattern::Value(Value::String(account))) => {
                self.accounts
                    .entry(name)
                    .or_default()
                    .insert(account.clone());
            }
            _ => {}
        }
    }

    /// What the policy allows, one entry each, keyed by a digest of what it allows and what it
    /// is (for messages): its scope (service account aside), each Role's rules, each
    /// RoleBinding's, each Deployment's ServiceAccount, each object in flotilla's own
    /// namespace, each Service type. A config is in step with an installed policy when each of
    /// its allowances is among the policy's (a policy generated with argo-server on also
    /// serves a config that leaves it off).
    pub fn allowances(&self) -> BTreeMap<String, String> {
        let mut allowed = Vec::new();
        allowed.push((
            format!(
                "the selector {} (instance {}, namespace {}, reserved {})",
                self.selector_text,
                self.instance,
                self.own_namespace,
                self.reserved.join(",")
            ),
            String::new(),
        ));
        for (name, variants) in &self.roles {
            for rules in variants {
                allowed.push((
                    format!("Role {name}'s rules"),
                    cel::objects("object.rules", Some(rules), &document::RULE_FIELDS),
                ));
            }
        }
        for (name, variants) in &self.bindings {
            for binding in variants {
                allowed.push((
                    format!("RoleBinding {name}'s subjects"),
                    document::binding(binding),
                ));
            }
        }
        for (name, accounts) in &self.accounts {
            for account in accounts {
                allowed.push((
                    format!("Deployment {name} as ServiceAccount {account}"),
                    String::new(),
                ));
            }
        }
        for (kind, name) in &self.own_objects {
            allowed.push((
                format!("{kind} {name} in {}", self.own_namespace),
                String::new(),
            ));
        }
        for kind in &self.service_types {
            allowed.push((format!("Services of type {}", kind.name()), String::new()));
        }
        allowed
            .into_iter()
            .map(|(what, content)| {
                let digest = Sha256::digest(format!("{what}\n{content}").as_bytes());
                let digest = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                (digest, what)
            })
            .collect()
    }
}

/// The field of a kind the policy pins, for messages.
fn pinned_field(kind: Kind) -> &'static str {
    match kind {
        Kind::Role => "rules",
        Kind::RoleBinding => "roleRef and subjects",
        _ => "spec.template.spec.serviceAccountName",
    }
}

#[cfg(test)]
mod cel_fixture;
#[cfg(test)]
mod cel_scope_tests;
#[cfg(test)]
mod cel_tests;
#[cfg(test)]
mod tests;
