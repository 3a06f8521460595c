//! What goes wrong while loading or rendering templates, located as precisely as the template
//! engine or YAML parser can: in a template file (with a line where known), in an annotation of
//! the namespace, or in the namespace itself.

use super::policy::PolicyError;
use super::truncate;
use crate::object::ObjectKey;
use crate::overrides::AnnotationError;
use std::fmt;

#[derive(Debug)]
pub struct RenderError {
    pub origin: String,
    pub line: Option<usize>,
    pub problem: RenderProblem,
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.origin, self.problem),
            None => write!(f, "{}: {}", self.origin, self.problem),
        }
    }
}

impl RenderError {
    /// Names a template file by its path in `dir`, as a terminal or editor opens it.
    pub fn in_dir(mut self, dir: &std::path::Path) -> RenderError {
        let path = dir.join(&self.origin);
        if path.is_file() {
            self.origin = path.display().to_string();
        }
        self
    }
}

/// Every problem found, so that one run reports them all.
#[derive(Debug, thiserror::Error)]
pub struct RenderErrors(pub Vec<RenderError>);

impl fmt::Display for RenderErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RenderProblem {
    #[error("cannot read: {0}")]
    UnreadableDir(std::io::Error),
    #[error("cannot read {file}: {error}")]
    UnreadableTemplate { file: String, error: std::io::Error },
    #[error("holds no *.yaml templates")]
    NoTemplates,
    /// The revision a namespace is pinned to is not kept or does not compile.
    #[error(
        "is not kept or cannot be compiled (flotilla's log says why); the namespace keeps what it has"
    )]
    RevisionUnavailable,
    /// From minijinja: a syntax error, an undefined value, a refused filter.
    #[error("{kind}{}{}", detail_text(.detail), hint(*.kind))]
    Template {
        kind: minijinja::ErrorKind,
        detail: Option<String>,
    },
    /// The rendered text is not YAML. Only the parser's reason is kept: the lines it quotes
    /// would carry rendered content (and a namespace's annotations) into logs and status.
    #[error(
        "the rendered output is not valid YAML: {}",
        truncate(&at_column(*.column, .reason), 300)
    )]
    NotYaml {
        column: Option<usize>,
        reason: String,
    },
    #[error("renders {0} YAML documents; each template file holds one object")]
    Documents(usize),
    #[error("renders {object}, which {first} renders already")]
    RenderedAlready { object: ObjectKey, first: String },
    /// Boxed: the largest problem, and a rare one, would make every `Result` carry its size.
    #[error(transparent)]
    Policy(Box<PolicyError>),
    #[error(transparent)]
    Override(AnnotationError),
    #[error(
        "is flotilla's own namespace, which holds its credentials; flotilla stamps nothing for it"
    )]
    OwnNamespace,
    #[error(
        "is a namespace Kubernetes keeps for itself; flotilla stamps nothing there, even when the selector matches, unless the config names it in policy.allowNamespaces"
    )]
    ReservedNamespace,
    /// Found by `flotilla check` and `flotilla rbac` (`crate::rbac`): the template names its
    /// object differently for two sample namespaces (each given with the object). Boxed, as
    /// `Policy` is.
    #[error(
        "renders {} for namespace {} but {} for {}: a name composed from the namespace cannot be listed in flotilla's ClusterRole, which may create, patch and delete only the names the templates render; give it a fixed name, or grant flotilla an open rule for {}s by hand (README, Security)",
        .0[0].1, .0[0].0, .0[1].1, .0[1].0, .0[0].1.kind
    )]
    NameFromNamespace(Box<[(String, ObjectKey); 2]>),
    /// Found by `flotilla rbac --admission-policy` (`crate::admission`): the field of the
    /// object the admission policy pins differs between the two sample namespaces by more than
    /// the namespace's own name. Boxed, as `Policy` is.
    #[error(
        "renders {} with {} that differ between namespaces {} and {} beyond the namespace's own name: flotilla's admission policy pins them, so they must be the same for every namespace",
        .0.object, .0.field, .0.namespaces[0], .0.namespaces[1]
    )]
    PinnedFromNamespace(Box<Pinned>),
    /// `values.instanceID` is not `namespace`, `none` or a template of a label value.
    #[error(
        "{0}; use \"namespace\" (the namespace's name), \"none\", or a template such as \"argo-{{{{ namespace.name }}}}\" that renders a label value: at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
    )]
    InstanceId(String),
}

/// An object whose pinned field depends on the namespace, with the two sample namespaces.
#[derive(Debug)]
pub struct Pinned {
    pub object: ObjectKey,
    pub field: &'static str,
    pub namespaces: [String; 2],
}

fn detail_text(detail: &Option<String>) -> String {
    detail
        .as_ref()
        .map(|d| format!(": {d}"))
        .unwrap_or_default()
}

/// Undefined values are most often Argo's own placeholders, which must pass through untouched.
fn hint(kind: minijinja::ErrorKind) -> &'static str {
    if kind == minijinja::ErrorKind::UndefinedError {
        " (Argo placeholders such as {{workflow.name}} must be wrapped in {% raw %}…{% endraw %} to pass through)"
    } else {
        ""
    }
}

fn at_column(column: Option<usize>, reason: &str) -> String {
    match column {
        Some(column) => format!("column {column}: {reason}"),
        None => reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::Kind;
    use minijinja::ErrorKind;

    #[test]
    fn problems_read_as_documented() {
        let key = ObjectKey {
            kind: Kind::ServiceAccount,
            namespace: "team-a".into(),
            name: "argo".into(),
        };
        for (problem, message) in [
            (RenderProblem::NoTemplates, "holds no *.yaml templates".to_string()),
            (
                RenderProblem::Template {
                    kind: ErrorKind::SyntaxError,
                    detail: Some("unexpected end of input".into()),
                },
                "syntax error: unexpected end of input".into(),
            ),
            (
                RenderProblem::Template {
                    kind: ErrorKind::UndefinedError,
                    detail: None,
                },
                "undefined value (Argo placeholders such as {{workflow.name}} must be wrapped in {% raw %}…{% endraw %} to pass through)".into(),
            ),
            (
                RenderProblem::NotYaml {
                    column: Some(9),
                    reason: "unclosed bracket '['".into(),
                },
                "the rendered output is not valid YAML: column 9: unclosed bracket '['".into(),
            ),
            (
                RenderProblem::NotYaml {
                    column: None,
                    reason: "x".repeat(400),
                },
                format!(
                    "the rendered output is not valid YAML: {}… (400 bytes)",
                    "x".repeat(300)
                ),
            ),
            (
                RenderProblem::Documents(2),
                "renders 2 YAML documents; each template file holds one object".into(),
            ),
            (
                RenderProblem::RenderedAlready {
                    object: key,
                    first: "sa.yaml".into(),
                },
                "renders ServiceAccount team-a/argo, which sa.yaml renders already".into(),
            ),
            (
                RenderProblem::Policy(Box::new(PolicyError::NotAMapping)),
                "must render a YAML mapping (one Kubernetes object)".into(),
            ),
            (
                RenderProblem::Override(AnnotationError::NotAnInteger("lots".into())),
                "\"lots\" is not an integer".into(),
            ),
            (
                RenderProblem::OwnNamespace,
                "is flotilla's own namespace, which holds its credentials; flotilla stamps nothing for it".into(),
            ),
            (
                RenderProblem::ReservedNamespace,
                "is a namespace Kubernetes keeps for itself; flotilla stamps nothing there, even when the selector matches, unless the config names it in policy.allowNamespaces".into(),
            ),
            (
                RenderProblem::NameFromNamespace(Box::new([
                    ("a".into(), ObjectKey { kind: Kind::ConfigMap, namespace: "a".into(), name: "a-x".into() }),
                    ("b".into(), ObjectKey { kind: Kind::ConfigMap, namespace: "b".into(), name: "b-x".into() }),
                ])),
                "renders ConfigMap a/a-x for namespace a but ConfigMap b/b-x for b: a name composed from the namespace cannot be listed in flotilla's ClusterRole, which may create, patch and delete only the names the templates render; give it a fixed name, or grant flotilla an open rule for ConfigMaps by hand (README, Security)".into(),
            ),
        ] {
            assert_eq!(problem.to_string(), message);
        }
    }

    #[test]
    fn errors_name_origin_and_line() {
        let error = |line| RenderError {
            origin: "a.yaml".into(),
            line,
            problem: RenderProblem::Documents(3),
        };
        let both = RenderErrors(vec![error(Some(4)), error(None)]);
        assert_eq!(
            both.to_string(),
            "a.yaml:4: renders 3 YAML documents; each template file holds one object\n\
             a.yaml: renders 3 YAML documents; each template file holds one object"
        );
    }
}
