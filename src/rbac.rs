//! The names flotilla's templates render, and the ClusterRole rules that let flotilla write
//! exactly those objects and no others (`flotilla rbac`, which `manifests/generate.sh` writes
//! to `manifests/generated/clusterrole-stamp.yaml`).
//!
//! RBAC limits a verb to objects by name (`resourceNames`), not by label or name pattern, so
//! the names must be fixed. They are found by rendering for two different sample namespaces,
//! as `run` renders: a template whose name differs between the two composes it from the
//! namespace, and no list of names can hold it. `flotilla check` and `flotilla rbac` refuse such
//! a template, naming it; running it takes an open rule an admin adds by hand.
//!
//! A part the config leaves off (argo-server, `values.argoServer.enabled`) renders no names, yet
//! an admin may turn it on while flotilla runs, which follows its config without a new
//! ClusterRole. `flotilla rbac --set key=value` renders once more with those values and lists
//! the names of both renders.

use crate::config::Config;
use crate::kinds::Kind;
use crate::object::ObjectKey;
use crate::render::{NamespaceInput, RenderError, RenderErrors, RenderProblem, Renderer};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::str::FromStr;

/// The generated ClusterRole's name (bound by `manifests/clusterrolebinding.yaml`).
pub const CLUSTER_ROLE: &str = "flotilla-stamp";

/// What the templates render, by kind and name.
#[derive(Debug, Default, PartialEq)]
pub struct TemplatedNames {
    /// Per kind, each rendered name and the templates that render it.
    pub names: BTreeMap<Kind, BTreeMap<String, BTreeSet<String>>>,
    /// How many objects a namespace gets (as the config says, without any [`Set`]).
    pub objects: usize,
    /// The values the names were also rendered with, as `key=value`.
    pub with: Vec<String>,
}

impl TemplatedNames {
    /// The names of both: what flotilla may write whichever of the two renders is in force.
    pub fn union(mut self, other: TemplatedNames) -> TemplatedNames {
        for (kind, names) in other.names {
            let ours = self.names.entry(kind).or_default();
            for (name, templates) in names {
                ours.entry(name).or_default().extend(templates);
            }
        }
        self.with.extend(other.with);
        self
    }
}

/// A value set for the ClusterRole's render only: `key=value`, the key a dotted path into
/// `values` that exists there, the value read as YAML (`true`, `3`, `client`).
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    pub key: String,
    pub value: Value,
    text: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetError {
    #[error("{0:?} is not key=value")]
    NotKeyValue(String),
    #[error("{key}: {reason}")]
    NotYaml { key: String, reason: String },
    #[error("there is no values.{0} to set")]
    NoSuchValue(String),
}

impl FromStr for Set {
    type Err = SetError;

    fn from_str(text: &str) -> Result<Set, SetError> {
        let (key, raw) = text
            .split_once('=')
            .filter(|(key, _)| !key.is_empty())
            .ok_or_else(|| SetError::NotKeyValue(text.to_string()))?;
        let value = serde_saphyr::from_str(raw).map_err(|e| SetError::NotYaml {
            key: key.to_string(),
            reason: crate::yaml_error::YamlError::from(e).reason,
        })?;
        Ok(Set {
            key: key.to_string(),
            value,
            text: text.to_string(),
        })
    }
}

/// `values` with every one of `sets` in place; a key that names no value is refused, so that a
/// typo never leaves the ClusterRole short of names silently.
pub fn with_sets(
    values: &Map<String, Value>,
    sets: &[Set],
) -> Result<Map<String, Value>, SetError> {
    let mut values = values.clone();
    for set in sets {
        let mut path = set.key.split('.');
        let first = path.next().unwrap_or_default();
        let slot = path.try_fold(values.get_mut(first), |slot, key| {
            Some(slot?.as_object_mut()?.get_mut(key))
        });
        match slot.flatten() {
            Some(slot) => *slot = set.value.clone(),
            None => return Err(SetError::NoSuchValue(set.key.clone())),
        }
    }
    Ok(values)
}

/// Why the names could not be found: a [`Set`] refused, or the templates failing, as the config
/// says (`with` empty) or with the sets.
#[derive(Debug, thiserror::Error)]
pub enum NamesError {
    /// Not a `source`: the binary's edge prints sources after the message, which would repeat it.
    #[error("--set: {0}")]
    Set(SetError),
    #[error("{errors}")]
    Render {
        with: Vec<String>,
        errors: RenderErrors,
    },
}

/// [`templated_names`] as the config says, and, with `sets`, the union with those of a render
/// with the sets in place.
pub fn templated_names_with(
    renderer: &Renderer,
    config: &Config,
    sets: &[Set],
) -> Result<TemplatedNames, NamesError> {
    let mut names = TemplatedNames::default();
    for (index, (with, samples)) in sample_renders(renderer, config, sets)?
        .into_iter()
        .enumerate()
    {
        let mut more = names_of(&samples).map_err(|errors| NamesError::Render {
            with: with.clone(),
            errors,
        })?;
        if index == 0 {
            names = more;
        } else {
            more.with = with;
            names = names.union(more);
        }
    }
    Ok(names)
}

/// One sample namespace's render: every object the templates stamp for it.
pub struct Sample {
    pub namespace: String,
    pub objects: Vec<crate::object::Stamped>,
}

/// Both samples rendered alike, with the `key=value` texts they were rendered with.
pub type SampleRender = (Vec<String>, [Sample; 2]);

/// The renders `flotilla rbac` reads: both [`samples`] as the config says, then, with `sets`,
/// both again with the sets in place; each pair with the `key=value` texts it was rendered with.
pub fn sample_renders(
    renderer: &Renderer,
    config: &Config,
    sets: &[Set],
) -> Result<Vec<SampleRender>, NamesError> {
    let render = |with: Vec<String>| move |errors| NamesError::Render { with, errors };
    let mut renders = vec![(
        Vec::new(),
        render_samples(renderer, config).map_err(render(Vec::new()))?,
    )];
    if sets.is_empty() {
        return Ok(renders);
    }
    let with: Vec<String> = sets.iter().map(|s| s.text.clone()).collect();
    let mut varied = config.clone();
    varied.values = with_sets(&config.values, sets).map_err(NamesError::Set)?;
    let renderer =
        Renderer::new(renderer.sources().to_vec(), &varied).map_err(render(with.clone()))?;
    let samples = render_samples(&renderer, &varied).map_err(render(with.clone()))?;
    renders.push((with, samples));
    Ok(renders)
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

/// Renders the templates for both [`samples`], labelled to match the selector.
pub fn render_samples(renderer: &Renderer, config: &Config) -> Result<[Sample; 2], RenderErrors> {
    let labels = crate::selector::required_labels(&config.selector);
    let [first, second] = samples(&config.namespace).map(|name| NamespaceInput {
        name: name.to_string(),
        labels: labels.clone(),
        annotations: Default::default(),
        share: None,
    });
    Ok([
        Sample {
            objects: renderer.render(&first)?,
            namespace: first.name,
        },
        Sample {
            objects: renderer.render(&second)?,
            namespace: second.name,
        },
    ])
}

/// Renders the templates for both [`samples`] (labelled to match the selector) and returns the
/// names they render. Fails with the render errors of a sample, or with one error per template
/// whose object is named differently for the two.
pub fn templated_names(
    renderer: &Renderer,
    config: &Config,
) -> Result<TemplatedNames, RenderErrors> {
    names_of(&render_samples(renderer, config)?)
}

fn names_of([first, second]: &[Sample; 2]) -> Result<TemplatedNames, RenderErrors> {
    let by_template = |objects: &[crate::object::Stamped]| -> BTreeMap<String, ObjectKey> {
        objects
            .iter()
            .map(|o| (o.template.clone(), o.key.clone()))
            .collect()
    };
    let theirs = by_template(&second.objects);
    let mut errors = Vec::new();
    for (template, key) in by_template(&first.objects) {
        // A template that renders nothing for one of them says nothing about its name.
        let Some(other) = theirs.get(&template) else {
            continue;
        };
        if (key.kind, &key.name) != (other.kind, &other.name) {
            errors.push(RenderError {
                origin: template,
                line: None,
                problem: RenderProblem::NameFromNamespace(Box::new([
                    (first.namespace.clone(), key),
                    (second.namespace.clone(), other.clone()),
                ])),
            });
        }
    }
    if !errors.is_empty() {
        return Err(RenderErrors(errors));
    }
    let mut names = TemplatedNames {
        objects: first.objects.len(),
        ..TemplatedNames::default()
    };
    for object in first.objects.iter().chain(&second.objects) {
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
         # (clusterrole.yaml)."
    );
    if !names.with.is_empty() {
        let _ = writeln!(
            out,
            "# The names are those rendered as the config says and also with\n\
             #   {}\n\
             # so that turning that on while flotilla runs needs no other ClusterRole.",
            names.with.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "apiVersion: rbac.authorization.k8s.io/v1\n\
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
