//! The policy and its binding as YAML, every rule commented with why.

use super::cel::{self, lit};
use super::{BOUNDS_ANNOTATION, Bounds, Pattern, SELECTOR_ANNOTATION};
use crate::kinds::Kind;
use crate::ownership::{INSTANCE, MANAGED_BY, MANAGED_BY_VALUE};
use std::fmt::Write;

/// The policy's and the binding's name.
pub const POLICY: &str = "flotilla-stamp";
pub const BINDING: &str = "flotilla-stamp";

pub(super) const RULE_FIELDS: [&str; 5] = [
    "apiGroups",
    "resources",
    "verbs",
    "resourceNames",
    "nonResourceURLs",
];
const ROLE_REF_FIELDS: [&str; 3] = ["apiGroup", "kind", "name"];
const SUBJECT_FIELDS: [&str; 4] = ["kind", "apiGroup", "name", "namespace"];

/// One validation: its expression and what the API server answers when it fails.
struct Validation {
    why: &'static str,
    expression: String,
    message: Message,
}

enum Message {
    Fixed(String),
    Expression(String),
}

/// A check on writes (not deletes) of one resource.
fn on(resource: &str, check: String) -> String {
    format!(
        "request.operation == \"DELETE\" || request.resource.resource != {} ||\n{check}",
        lit(resource)
    )
}

fn variables(bounds: &Bounds) -> Vec<(&'static str, String)> {
    let labels = "oldObject.metadata.labels";
    let label = |key: &str, value: &str| {
        format!(
            "{} in {labels} && {labels}[{}] == {}",
            lit(key),
            lit(key),
            lit(value)
        )
    };
    vec![
        (
            "optedIn",
            format!(
                "namespaceObject != null\n&& {}",
                cel::selector("namespaceObject.metadata.labels", &bounds.selector)
                    .replace('\n', "\n   ")
            ),
        ),
        (
            "own",
            format!("request.namespace == {}", lit(&bounds.own_namespace)),
        ),
        (
            "stamped",
            format!(
                "oldObject != null && has({labels})\n&& {}\n&& {}",
                label(MANAGED_BY, MANAGED_BY_VALUE),
                label(INSTANCE, &bounds.instance)
            ),
        ),
    ]
}

fn validations(bounds: &Bounds) -> Vec<Validation> {
    let mut out = Vec::new();
    out.push(Validation {
        why: "Deletes prune and reap what flotilla stamped, opted in or not: nothing else.",
        expression: "request.operation != \"DELETE\" || variables.stamped".into(),
        message: Message::Fixed(format!(
            "flotilla deletes only what it stamped (labelled {MANAGED_BY}={MANAGED_BY_VALUE}, {INSTANCE}={})",
            bounds.instance
        )),
    });
    let reserved = cel::list(bounds.reserved.iter().map(String::as_str));
    out.push(Validation {
        why: "Writes go to opted-in namespaces (never a reserved one the config does not allow) and flotilla's own.",
        expression: format!(
            "request.operation == \"DELETE\" || variables.own\n|| (variables.optedIn && !(request.namespace in {reserved}))"
        ),
        message: Message::Expression(format!(
            "{} + request.namespace + {}",
            lit("flotilla writes only in namespaces opted in and in its own; namespace "),
            lit(&format!(
                " is not opted in by the selector this policy was generated for ({}). If flotilla.yaml's selector changed, apply what `flotilla rbac --admission-policy` prints for it",
                bounds.selector_text
            ))
        )),
    });
    let own: Vec<String> = bounds
        .own_objects
        .iter()
        .map(|(kind, name)| {
            format!(
                "request.resource.resource == {} && request.name == {}",
                lit(&kind.api_resource().plural),
                lit(name)
            )
        })
        .collect();
    out.push(Validation {
        why: "In flotilla's own namespace, which holds its token: only what the templates place there.",
        expression: format!(
            "request.operation == \"DELETE\" || !variables.own ||\n{}",
            cel::any(&own)
        ),
        message: Message::Fixed(format!(
            "in {} flotilla writes only what its templates place there",
            bounds.own_namespace
        )),
    });
    let roles: Vec<String> = bounds
        .roles
        .iter()
        .map(|(name, variants)| {
            let variants: Vec<String> = variants
                .iter()
                .map(|rules| cel::objects("object.rules", Some(rules), &RULE_FIELDS))
                .collect();
            format!("request.name == {} && ({})", lit(name), cel::any(&variants))
        })
        .collect();
    out.push(Validation {
        why: "A Role holds exactly the rules its template renders (flotilla may escalate these names).",
        expression: on("roles", cel::any(&roles)),
        message: Message::Fixed(
            "a Role written by flotilla holds exactly the rules its template renders".into(),
        ),
    });
    let bindings: Vec<String> = bounds
        .bindings
        .iter()
        .map(|(name, variants)| {
            let variants: Vec<String> = variants.iter().map(binding).collect();
            format!("request.name == {} && ({})", lit(name), cel::any(&variants))
        })
        .collect();
    out.push(Validation {
        why: "A RoleBinding binds the Role its template renders to the ServiceAccounts it renders, of the request's namespace (flotilla may bind these names).",
        expression: on("rolebindings", cel::any(&bindings)),
        message: Message::Fixed(
            "a RoleBinding written by flotilla binds the Role its template renders to the ServiceAccounts it renders, in its own namespace".into(),
        ),
    });
    let pod = "object.spec.template.spec";
    let accounts: Vec<String> = bounds
        .accounts
        .iter()
        .map(|(name, accounts)| {
            format!(
                "request.name == {} && has({pod}.serviceAccountName) && {pod}.serviceAccountName in {}\n  && (!has({pod}.serviceAccount) || {pod}.serviceAccount == {pod}.serviceAccountName)",
                lit(name),
                cel::list(accounts.iter().map(String::as_str))
            )
        })
        .collect();
    out.push(Validation {
        why: "A Deployment's pods run as the ServiceAccount its template renders.",
        expression: on("deployments", cel::any(&accounts)),
        message: Message::Fixed(
            "a Deployment written by flotilla runs as the ServiceAccount its template renders"
                .into(),
        ),
    });
    for (rule, message) in cel::pod_rules(pod) {
        out.push(Validation {
            why: "The render policy's pod rules: a stamped pod gets nothing of the node.",
            expression: on("deployments", rule),
            message: Message::Fixed(message.into()),
        });
    }
    let types = cel::list(bounds.service_types.iter().map(|t| t.name()));
    out.push(Validation {
        why: "A Service is of a type the config allows, without external IPs.",
        expression: on(
            "services",
            format!(
                "(!has(object.spec.type) || object.spec.type in {types})\n&& (!has(object.spec.externalIPs) || object.spec.externalIPs.size() == 0)"
            ),
        ),
        message: Message::Fixed(format!(
            "a Service written by flotilla is of type {} and claims no external IPs",
            bounds
                .service_types
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(" or ")
        )),
    });
    out
}

pub(super) fn binding(pattern: &Pattern) -> String {
    let Pattern::Map(map) = pattern else {
        return "false".into();
    };
    let role_ref = map
        .get("roleRef")
        .map(|r| cel::object("object.roleRef", r, &ROLE_REF_FIELDS))
        .unwrap_or_else(|| "false".into());
    format!(
        "has(object.roleRef) && {role_ref}\n  && {}",
        cel::objects("object.subjects", map.get("subjects"), &SUBJECT_FIELDS)
    )
}

/// `text` as a YAML block scalar of key `key` (written at `indent`, `- ` included), its lines
/// indented past the mapping the key is in. CEL text holds printable ASCII only ([`lit`]).
fn block(out: &mut String, key: &str, text: &str, indent: usize) {
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "{pad}{key}: |-");
    let mapping = indent + key.len() - key.trim_start_matches("- ").len();
    let content = " ".repeat(mapping + 2);
    for line in text.lines() {
        let _ = writeln!(out, "{content}{line}");
    }
}

/// What the policy checks: its variables and validations.
fn validations_text(bounds: &Bounds) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "  variables:");
    for (name, expression) in variables(bounds) {
        let _ = writeln!(out, "    - name: {name}");
        block(&mut out, "expression", &expression, 6);
    }
    let _ = writeln!(out, "  validations:");
    for validation in validations(bounds) {
        let _ = writeln!(out, "    # {}", validation.why);
        block(&mut out, "- expression", &validation.expression, 4);
        let _ = writeln!(out, "      reason: Forbidden");
        match validation.message {
            Message::Fixed(text) => {
                let _ = writeln!(out, "      message: {}", serde_json::Value::from(text));
            }
            Message::Expression(text) => block(&mut out, "messageExpression", &text, 6),
        }
    }
    out
}

/// The ValidatingAdmissionPolicy [`POLICY`] for requests by `service_account` (as
/// `namespace/name`), and its binding.
pub fn policy_yaml(bounds: &Bounds, service_account: &str) -> String {
    let (namespace, name) = service_account
        .split_once('/')
        .unwrap_or((&bounds.own_namespace, service_account));
    let username = format!("system:serviceaccount:{namespace}:{name}");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# What flotilla's token may write, bounded in the API server (Kubernetes 1.30 or later):\n\
         # RBAC (clusterrole-stamp.yaml) limits the names, this limits where and what. It applies to\n\
         # flotilla's ServiceAccount only. Generated from the templates rendered for sample\n\
         # namespaces (`flotilla rbac --admission-policy`); flotilla checks at start and on every\n\
         # config change that the installed policy was generated for its config and templates, and\n\
         # logs and tells the Fleet what to apply when it was not."
    );
    let _ = writeln!(
        out,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: {POLICY}\n  labels:\n    app.kubernetes.io/name: flotilla\n  annotations:\n    {SELECTOR_ANNOTATION}: {}\n    {BOUNDS_ANNOTATION}: {}",
        serde_json::Value::from(bounds.selector_text.as_str()),
        serde_json::Value::from(
            bounds
                .allowances()
                .into_keys()
                .collect::<Vec<_>>()
                .join(" ")
        )
    );
    let _ = writeln!(
        out,
        "spec:\n  # A request the policy cannot judge is refused.\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:"
    );
    for kind in Kind::ALL {
        let resource = kind.api_resource();
        let group = if resource.group.is_empty() {
            "\"\"".to_string()
        } else {
            resource.group
        };
        let _ = writeln!(
            out,
            "      - apiGroups: [{group}]\n        apiVersions: [\"*\"]\n        operations: [CREATE, UPDATE, DELETE]\n        resources: [{}]",
            resource.plural
        );
    }
    let _ = writeln!(
        out,
        "  matchConditions:\n    - name: flotilla-service-account"
    );
    block(
        &mut out,
        "expression",
        &format!("request.userInfo.username == {}", lit(&username)),
        6,
    );
    out.push_str(&validations_text(bounds));
    let _ = writeln!(
        out,
        "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata:\n  name: {BINDING}\n  labels:\n    app.kubernetes.io/name: flotilla\nspec:\n  policyName: {POLICY}\n  validationActions: [Deny]"
    );
    out
}
