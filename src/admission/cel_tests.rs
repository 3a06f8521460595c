//! The policy's CEL evaluated as the API server would, on requests built here: what the
//! templates render passes; what a stolen token would send is refused, each with its message.
//! The oracles are independent of the generator: the rendered objects themselves, and requests
//! written by hand.

use super::cel_fixture::*;
use super::tests::repo;
use super::*;
use serde_json::json;

#[test]
fn everything_the_templates_render_passes_in_an_opted_in_namespace() {
    let (_, bounds) = repo();
    let policy = load(&bounds);
    let objects = rendered();
    assert_eq!(objects.len(), 14);
    for object in &objects {
        let mut request = write(object, opted_in());
        assert_eq!(judge(&policy, &request), None, "{object}");
        request["request"]["operation"] = json!("UPDATE");
        request["oldObject"] = object.clone();
        assert_eq!(judge(&policy, &request), None, "update of {object}");
        // Deleted, as a prune or reap does, opted in or not.
        request["request"]["operation"] = json!("DELETE");
        request["object"] = Value::Null;
        request["namespaceObject"] = namespace(OPTED_IN, json!({}));
        assert_eq!(judge(&policy, &request), None, "delete of {object}");
    }
}

#[test]
fn what_a_stolen_token_would_write_is_refused() {
    let (_, bounds) = repo();
    let policy = load(&bounds);
    let objects = rendered();
    let elsewhere = |object: &Value, ns: &str| {
        let mut o = object.clone();
        o["metadata"]["namespace"] = json!(ns);
        o
    };
    let deployment = find(&objects, "Deployment", "workflow-controller");
    let role = find(&objects, "Role", "argo-role");
    let binding = find(&objects, "RoleBinding", "argo-binding");
    let server = find(&objects, "Service", "argo-server");
    let cm = find(&objects, "ConfigMap", "workflow-controller-configmap");
    let namespace_refused = |ns: &str| {
        format!(
            "flotilla writes only in namespaces opted in and in its own; namespace {ns} is not opted in by the selector this policy was generated for (flotilla.dev/enabled=true). If flotilla.yaml's selector changed, apply what `flotilla rbac --admission-policy` prints for it"
        )
    };
    // `object` with `value` at `path` (an index one past a list's end appends).
    let with = |object: &Value, path: &[&str], value: Value| {
        let mut o = object.clone();
        let (last, parent) = path.split_last().unwrap();
        let pointer: String = parent.iter().map(|k| format!("/{k}")).collect();
        match o.pointer_mut(&pointer).unwrap() {
            Value::Array(items) => match last.parse::<usize>().unwrap() {
                i if i == items.len() => items.push(value),
                i => items[i] = value,
            },
            Value::Object(map) => {
                map.insert(last.to_string(), value);
            }
            other => panic!("{other}"),
        }
        o
    };
    let role_message = "a Role written by flotilla holds exactly the rules its template renders";
    let binding_message = "a RoleBinding written by flotilla binds the Role its template renders to the ServiceAccounts it renders, in its own namespace";
    let cases: Vec<(&str, Value, String)> = vec![
        // Path A: the controller's Deployment in kube-system, as a mighty ServiceAccount.
        (
            "Deployment in kube-system",
            write(&elsewhere(&deployment, "kube-system"), json!({})),
            namespace_refused("kube-system"),
        ),
        (
            "Deployment in kube-system, even labelled",
            write(&elsewhere(&deployment, "kube-system"), opted_in()),
            namespace_refused("kube-system"),
        ),
        (
            "Deployment running as another ServiceAccount",
            write(
                &with(
                    &deployment,
                    &["spec", "template", "spec", "serviceAccountName"],
                    json!("clusterrole-aggregation-controller"),
                ),
                opted_in(),
            ),
            "a Deployment written by flotilla runs as the ServiceAccount its template renders"
                .into(),
        ),
        (
            "Deployment with the deprecated field set apart",
            write(
                &with(
                    &deployment,
                    &["spec", "template", "spec", "serviceAccount"],
                    json!("default"),
                ),
                opted_in(),
            ),
            "a Deployment written by flotilla runs as the ServiceAccount its template renders"
                .into(),
        ),
        // Path B: a Role of all rights, bound to flotilla itself.
        (
            "Role */*",
            write(
                &with(
                    &role,
                    &["rules"],
                    json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
                ),
                opted_in(),
            ),
            role_message.into(),
        ),
        (
            "Role with one rule more",
            write(
                &with(
                    &role,
                    &["rules", "12"],
                    json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}),
                ),
                opted_in(),
            ),
            role_message.into(),
        ),
        (
            "Role with a verb more",
            write(
                &with(&role, &["rules", "8", "verbs"], json!(["get", "list"])),
                opted_in(),
            ),
            role_message.into(),
        ),
        (
            "Role with resourceNames",
            write(
                &with(&role, &["rules", "2", "resourceNames"], json!(["x"])),
                opted_in(),
            ),
            role_message.into(),
        ),
        (
            "Role without rules",
            write(&with(&role, &["rules"], Value::Null), opted_in()),
            role_message.into(),
        ),
        (
            "Role in kube-system",
            write(&elsewhere(&role, "kube-system"), json!({})),
            namespace_refused("kube-system"),
        ),
        (
            "RoleBinding to flotilla's own ServiceAccount",
            write(
                &with(
                    &binding,
                    &["subjects"],
                    json!([{"kind": "ServiceAccount", "name": "flotilla", "namespace": "flotilla-system"}]),
                ),
                opted_in(),
            ),
            binding_message.into(),
        ),
        (
            "RoleBinding to one more subject",
            write(
                &with(
                    &binding,
                    &["subjects", "1"],
                    json!({"kind": "ServiceAccount", "name": "default", "namespace": OPTED_IN}),
                ),
                opted_in(),
            ),
            binding_message.into(),
        ),
        (
            "RoleBinding to the argo of another namespace",
            write(
                &with(&binding, &["subjects", "0", "namespace"], json!("team-b")),
                opted_in(),
            ),
            binding_message.into(),
        ),
        (
            "RoleBinding of cluster-admin",
            write(
                &with(
                    &binding,
                    &["roleRef"],
                    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}),
                ),
                opted_in(),
            ),
            binding_message.into(),
        ),
        (
            "RoleBinding without subjects",
            write(&with(&binding, &["subjects"], Value::Null), opted_in()),
            binding_message.into(),
        ),
        (
            "ConfigMap in kube-system",
            write(&elsewhere(&cm, "kube-system"), json!({})),
            namespace_refused("kube-system"),
        ),
        (
            "ConfigMap of a cluster-wide Argo",
            write(&elsewhere(&cm, "argo"), json!({"app": "argo"})),
            namespace_refused("argo"),
        ),
        (
            "ConfigMap in flotilla's own namespace",
            write(&elsewhere(&cm, "flotilla-system"), json!({})),
            "in flotilla-system flotilla writes only what its templates place there".into(),
        ),
        (
            "argo-server Service of type LoadBalancer",
            write(
                &with(&server, &["spec", "type"], json!("LoadBalancer")),
                opted_in(),
            ),
            "a Service written by flotilla is of type ClusterIP and claims no external IPs".into(),
        ),
        (
            "argo-server Service with external IPs",
            write(
                &with(&server, &["spec", "externalIPs"], json!(["1.2.3.4"])),
                opted_in(),
            ),
            "a Service written by flotilla is of type ClusterIP and claims no external IPs".into(),
        ),
    ];
    for (what, request, message) in cases {
        assert_eq!(judge(&policy, &request), Some(message), "{what}");
    }
    // Deletes: only what flotilla stamped, wherever it is.
    let mut foreign = write(&elsewhere(&deployment, "argo"), json!({}));
    foreign["request"]["operation"] = json!("DELETE");
    foreign["oldObject"] = with(&deployment, &["metadata", "labels"], json!({"app": "argo"}));
    foreign["object"] = Value::Null;
    let refused =
        judge(&policy, &foreign).expect("a cluster-wide Argo's Deployment is not deleted");
    assert!(
        refused.starts_with("flotilla deletes only what it stamped"),
        "{refused}"
    );
    // Anyone else is not judged by this policy.
    let admin = write_by(
        "kubernetes-admin",
        &elsewhere(&deployment, "kube-system"),
        json!({}),
    );
    assert_eq!(judge(&policy, &admin), None);
}

/// What the policy leaves to a stolen token, as docs/security.md says: content it does not pin.
#[test]
fn what_the_policy_does_not_pin_passes() {
    let (_, bounds) = repo();
    let policy = load(&bounds);
    let objects = rendered();
    let mut deployment = find(&objects, "Deployment", "workflow-controller");
    let container = &mut deployment["spec"]["template"]["spec"]["containers"][0];
    container["image"] = json!("attacker.example/anything:latest");
    container["command"] = json!(["/bin/sh", "-c", "cat /var/run/secrets/*"]);
    assert_eq!(judge(&policy, &write(&deployment, opted_in())), None);
    let mut cm = find(&objects, "ConfigMap", "workflow-controller-configmap");
    cm["data"] = json!({"workflowDefaults": "spec: {serviceAccountName: argo}"});
    assert_eq!(judge(&policy, &write(&cm, opted_in())), None);
}
