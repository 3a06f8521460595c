//! The names flotilla's templates render, and the ClusterRole rules that let flotilla write
//! exactly those objects and no others (`flotilla rbac`, which `manifests/generate.sh` writes
//! to `manifests/generated/clusterrole-stamp.yaml`).
//!
//! RBAC limits a verb to objects by name (`resourceNames`), not by label or name pattern, so
//! the names must be fixed. They are found by rendering for two different sample namespaces,
//! as `run` renders: a template whose name differs between the two composes it from the
//! namespace, and no list of names can hold it. `flotilla check` and `flotilla rbac` refuse such
//! a template, naming it; running it takes an open rule an admin adds by hand.

use crate::config::Config;
use crate::kinds::Kind;
use crate::object::ObjectKey;
use crate::render::{NamespaceInput, RenderError, RenderErrors, RenderProblem, Renderer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// The generated ClusterRole's name (bound by `manifests/clusterrolebinding.yaml`).
pub const CLUSTER_ROLE: &str = "flotilla-stamp";

/// What the templates render, by kind and name.
#[derive(Debug, Default, PartialEq)]
pub struct TemplatedNames {
    /// Per kind, each rendered name and the templates that render it.
    pub names: BTreeMap<Kind, BTreeMap<String, BTreeSet<String>>>,
    /// How many objects a namespace gets.
    pub objects: usize,
}

/// Two sample namespaces that differ from their first character on and in length (so a name
/// built from a prefix or a hash of the namespace differs too), neither of them flotilla's own.
pub fn samples(own_namespace: &str) -> [&'static str; 2] {
    match own_namespace {
        "flotilla-check" => ["sample-b", "other-sample"],
        "sample-b" => ["flotilla-check", "other-sample"],
        _ => ["flotilla-check", "sample-b"],
    }
}

/// Renders the templates for both [`samples`] (labelled to match the selector) and returns the
/// names they render. Fails with the render errors of a sample, or with one error per template
/// whose object is named differently for the two.
pub fn templated_names(
    renderer: &Renderer,
    config: &Config,
) -> Result<TemplatedNames, RenderErrors> {
    let labels = crate::selector::required_labels(&config.selector);
    let [first, second] = samples(&config.namespace).map(|name| NamespaceInput {
        name: name.to_string(),
        labels: labels.clone(),
        annotations: Default::default(),
    });
    let objects = renderer.render(&first)?;
    let others = renderer.render(&second)?;
    let by_template = |objects: &[crate::object::Stamped]| -> BTreeMap<String, ObjectKey> {
        objects
            .iter()
            .map(|o| (o.template.clone(), o.key.clone()))
            .collect()
    };
    let theirs = by_template(&others);
    let mut errors = Vec::new();
    for (template, key) in by_template(&objects) {
        // A template that renders nothing for one of them says nothing about its name.
        let Some(other) = theirs.get(&template) else {
            continue;
        };
        if (key.kind, &key.name) != (other.kind, &other.name) {
            errors.push(RenderError {
                origin: template,
                line: None,
                problem: RenderProblem::NameFromNamespace(Box::new([
                    (first.name.clone(), key),
                    (second.name.clone(), other.clone()),
                ])),
            });
        }
    }
    if !errors.is_empty() {
        return Err(RenderErrors(errors));
    }
    let mut names = TemplatedNames {
        objects: objects.len(),
        ..TemplatedNames::default()
    };
    for object in objects.iter().chain(&others) {
        names
            .names
            .entry(object.key.kind)
            .or_default()
            .entry(object.key.name.clone())
            .or_default()
            .insert(object.template.clone());
    }
    Ok(names)
}

/// The ClusterRole [`CLUSTER_ROLE`] as YAML, every rule commented with why: create, patch and
/// delete of each stamped kind for the rendered names only, and escalate and bind for the
/// rendered Role names. Names are quoted, so that one such as `true` or `1e3` stays a string.
pub fn cluster_role(names: &TemplatedNames) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# What flotilla may write: the objects its templates render, by name, and nothing else.\n\
         # create and patch are server-side apply: the API server authorizes an apply as `patch` of\n\
         # the name in its URL and, when the apply creates the object, as `create` of that name too,\n\
         # so a create limited by name works for it (a POST, whose name is only in the body, is\n\
         # refused: flotilla never POSTs these). delete prunes and reaps, one object at a time with\n\
         # a uid precondition. The names hold in every namespace (RBAC cannot tie them to some),\n\
         # kube-system included. Reads are not limited: the watches need every name\n\
         # (clusterrole.yaml).\n\
         apiVersion: rbac.authorization.k8s.io/v1\n\
         kind: ClusterRole\n\
         metadata:\n  name: {CLUSTER_ROLE}\n  labels:\n    app.kubernetes.io/name: flotilla"
    );
    if names.names.is_empty() {
        out.push_str("rules: []\n");
        return out;
    }
    out.push_str("rules:\n");
    for (kind, rendered) in &names.names {
        let templates: BTreeSet<&str> = rendered.values().flatten().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "  # {}s the templates render ({}).",
            kind.name(),
            templates.into_iter().collect::<Vec<_>>().join(", ")
        );
        rule(
            &mut out,
            *kind,
            &["create", "patch", "delete"],
            rendered.keys(),
        );
    }
    if let Some(roles) = names.names.get(&Kind::Role) {
        out.push_str(
            "  # Kubernetes refuses to let anyone create a Role granting rights they do not hold, or bind\n\
             \x20 # a Role they could not grant. Rather than hold the controller's rights (pods/exec,\n\
             \x20 # secrets, ...) in every namespace, flotilla may escalate and bind exactly the Roles its\n\
             \x20 # templates render. The cost: whoever holds its token may write a Role of these names with\n\
             \x20 # any rules, in any namespace, and bind it (README, Security).\n",
        );
        rule(&mut out, Kind::Role, &["escalate", "bind"], roles.keys());
    }
    out
}

fn rule<'a>(out: &mut String, kind: Kind, verbs: &[&str], names: impl Iterator<Item = &'a String>) {
    let resource = kind.api_resource();
    let group = if resource.group.is_empty() {
        "\"\"".to_string()
    } else {
        resource.group
    };
    let quoted: Vec<String> = names
        .map(|n| serde_json::Value::from(n.as_str()).to_string())
        .collect();
    let _ = writeln!(
        out,
        "  - apiGroups: [{group}]\n    resources: [{}]\n    verbs: [{}]\n    resourceNames: [{}]",
        resource.plural,
        verbs.join(", "),
        quoted.join(", ")
    );
}

#[cfg(test)]
mod tests;
