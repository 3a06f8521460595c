//! Why a rendered document was refused. The messages name the object and the field, and quote
//! at most a little of a value: a namespace's annotation may be 256 KiB.

use super::OWN_NAMESPACE_KINDS;
use crate::kinds::Kind;
use crate::render::truncate;
use crate::selector::LabelError;
use serde_json::Value;
use std::fmt;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    #[error("must render a YAML mapping (one Kubernetes object)")]
    NotAMapping,
    #[error(
        "has no {0}: each template renders one Kubernetes object, with apiVersion, kind and metadata.name"
    )]
    MissingField(&'static str),
    #[error(
        "kind {kind} ({api_version}) is not allowed; flotilla stamps only namespaced kinds from its allowlist: {}",
        Kind::allowlist()
    )]
    KindNotAllowed { kind: String, api_version: String },
    #[error("{0} has no metadata mapping")]
    NoMetadata(Kind),
    #[error("{0} has no metadata.name")]
    NoName(Kind),
    #[error(
        "{kind} name {:?} is not a valid name (lowercase alphanumerics, '-' and '.', at most 253, at most 63 between dots); a name composed from the namespace name fits with | dns_label",
        truncate(.name, 100)
    )]
    InvalidName { kind: Kind, name: String },
    #[error(
        "Service name {0:?} must be a DNS label: at most 63 lowercase alphanumerics or '-', starting with a letter"
    )]
    InvalidServiceName(String),
    #[error("metadata.{0} must be a mapping")]
    MetadataNotAMapping(&'static str),
    #[error("metadata.{field}.{key} must be a string (quote it)")]
    MetadataValueNotAString { field: &'static str, key: String },
    /// `namespace` as the template wrote it (a string, or whatever else it rendered).
    #[error(
        "{object} is placed in namespace {namespace}; objects may only go to the target namespace ({target}) or flotilla's own ({own})"
    )]
    PlacedElsewhere {
        object: ObjectName,
        namespace: Value,
        target: String,
        own: String,
    },
    #[error(
        "{object} is placed in flotilla's own namespace {namespace}; only {} may go there (RBAC or a workload there could reach flotilla's own credentials)",
        OWN_NAMESPACE_KINDS.map(|k| k.name()).join(", ")
    )]
    PlacedInOwnNamespace {
        object: ObjectName,
        namespace: String,
    },
    #[error("{object} sets metadata.{field}, which flotilla manages itself or does not support")]
    ManagedMetadata {
        object: ObjectName,
        field: &'static str,
    },
    #[error("{object}: {problem}")]
    InObject {
        object: ObjectName,
        problem: ObjectProblem,
    },
}

/// What is wrong inside an object that has a kind and a name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ObjectProblem {
    #[error("metadata.labels: {0}")]
    LabelKey(LabelError),
    #[error("metadata.labels: {key}: {}", truncate(&.error.to_string(), 200))]
    LabelValue { key: String, error: LabelError },
    #[error("metadata.annotations: {0}")]
    AnnotationKey(LabelError),
    #[error("metadata.annotations are {bytes} bytes; Kubernetes allows at most {limit}")]
    AnnotationsTooBig { bytes: usize, limit: usize },
    #[error("data must be a mapping")]
    DataNotAMapping,
    #[error(
        "data key {:?} is not valid (at most 253 characters of [-._a-zA-Z0-9])",
        truncate(.0, 100)
    )]
    DataKey(String),
    #[error("data.{0} must be a string (quote it, or use | string)")]
    DataNotAString(String),
    #[error("data is {bytes} bytes; Kubernetes allows at most {limit}")]
    DataTooBig { bytes: usize, limit: usize },
    /// `kind` and `api_group` as the template wrote them (JSON, `null` when missing).
    #[error(
        "roleRef must be a Role of apiGroup rbac.authorization.k8s.io (got kind {kind} apiGroup {api_group}); flotilla binds only the Roles it stamps, never a ClusterRole"
    )]
    RoleRef { kind: Value, api_group: Value },
    #[error("subjects must be a list")]
    SubjectsNotAList,
    #[error("binds {0}, which stands for everyone; bind the ServiceAccounts that need the Role")]
    BindsEveryone(String),
    #[error(
        "binds ServiceAccount {namespace}/{name}; a stamped RoleBinding may only bind ServiceAccounts of {target}"
    )]
    BindsForeignServiceAccount {
        namespace: String,
        name: String,
        target: String,
    },
    /// `path` leads from the object to the string holding `character` (keys cut to 100 bytes).
    #[error(
        "{} holds U+{:04X}, a control character server-side apply cannot carry; remove it where it comes from (a namespace's annotation, usually)",
        path_text(.path),
        *.character as u32
    )]
    Unsendable { path: Vec<String>, character: char },
}

/// An object as messages name it: `ConfigMap workflow-controller-configmap`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectName {
    pub kind: Kind,
    pub name: String,
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

fn path_text(path: &[String]) -> String {
    if path.is_empty() {
        "the object".into()
    } else {
        path.join(".")
    }
}
