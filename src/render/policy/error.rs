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
    #[error(
        "binds {}, a name Kubernetes keeps for its own identities; a stamped RoleBinding may only bind ServiceAccounts of the namespace",
        truncate(.0, 100)
    )]
    BindsSystemName(String),
    /// `kind` as the template wrote it (JSON, `null` when missing).
    #[error(
        "binds {kind} {}; a stamped RoleBinding may only bind ServiceAccounts of {target}",
        truncate(.name, 100)
    )]
    BindsNonServiceAccount {
        kind: Value,
        name: String,
        target: String,
    },
    #[error(
        "roleRef names Role {}, which the templates do not stamp in {namespace}; a stamped RoleBinding binds only a Role stamped with it",
        truncate(.name, 100)
    )]
    RoleNotStamped { name: String, namespace: String },
    #[error(
        "spec.template.spec.{0} is set; a stamped pod may not share the node's network, PIDs or IPC"
    )]
    HostNamespace(&'static str),
    #[error(
        "spec.template.spec.volumes: {} is a hostPath volume; a stamped pod may not mount the node's files",
        truncate(.0, 100)
    )]
    HostPath(String),
    #[error("{0}: securityContext.privileged is set; a stamped container may not be privileged")]
    Privileged(ContainerName),
    /// `added` as the template wrote it.
    #[error(
        "{container}: securityContext.capabilities.add is {}; a stamped container may only drop capabilities",
        truncate(&.added.to_string(), 100)
    )]
    AddsCapabilities {
        container: ContainerName,
        added: Value,
    },
    /// `port` as the template wrote it.
    #[error(
        "{container}: ports.hostPort is {}; a stamped container may not take a port of the node",
        truncate(&.port.to_string(), 100)
    )]
    HostPort {
        container: ContainerName,
        port: Value,
    },
    /// The sysctls as the template wrote them.
    #[error(
        "spec.template.spec.securityContext.sysctls is {}; a stamped pod may not tune the node's kernel",
        truncate(&.0.to_string(), 100)
    )]
    Sysctls(Value),
    /// The container whose profile it is; `None` for the pod's.
    #[error(
        "{}seccompProfile.type is Unconfined; a stamped pod keeps the runtime's system call filter (RuntimeDefault)",
        match .0 { Some(container) => format!("{container}: securityContext."), None => "spec.template.spec.securityContext.".to_string() }
    )]
    SeccompUnconfined(Option<ContainerName>),
    /// `value` as the template wrote it (`null` when unset, which Kubernetes takes as true).
    #[error(
        "{container}: securityContext.allowPrivilegeEscalation must be false (got {value}; unset means true)"
    )]
    PrivilegeEscalation {
        container: ContainerName,
        value: Value,
    },
    #[error(
        "spec.template.spec.serviceAccountName {}; a stamped Deployment runs as a ServiceAccount the templates stamp in {namespace}",
        match .name { Some(name) => format!("is {}, which they do not", truncate(name, 100)), None => "is unset (so the namespace's `default`)".to_string() }
    )]
    ServiceAccountNotStamped {
        name: Option<String>,
        namespace: String,
    },
    #[error(
        "spec.template.spec.serviceAccount {} differs from serviceAccountName; leave out the deprecated field",
        truncate(.0, 100)
    )]
    LegacyServiceAccount(String),
    #[error(
        "spec.externalIPs is set; a stamped Service may not claim external IPs (traffic to them would reach its pods)"
    )]
    ExternalIps,
    #[error(
        "spec.type {} is not allowed; the config's policy.allowServiceTypes allows {}",
        truncate(.kind, 100),
        .allowed.join(", ")
    )]
    ServiceType {
        kind: String,
        allowed: Vec<&'static str>,
    },
    /// `path` leads from the object to the string holding `character` (keys cut to 100 bytes).
    #[error(
        "{} holds U+{:04X}, a control character server-side apply cannot carry; remove it where it comes from (a namespace's annotation, usually)",
        path_text(.path),
        *.character as u32
    )]
    Unsendable { path: Vec<String>, character: char },
}

/// A container as messages name it: `container workflow-controller`, `initContainer init`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerName {
    /// `containers`, `initContainers` or `ephemeralContainers`.
    pub list: &'static str,
    pub name: String,
}

impl fmt::Display for ContainerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let singular = self.list.strip_suffix('s').unwrap_or(self.list);
        write!(f, "{singular} {}", truncate(&self.name, 100))
    }
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
