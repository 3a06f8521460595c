//! The policy's CEL evaluated as the API server would, on requests built here: what the
//! templates render passes; what a stolen token would send is refused, each with its message.
//! The oracles are independent of the generator: the rendered objects themselves, requests
//! written by hand, kube's own label-selector matching, and the render policy's verdict on pods.

use super::tests::repo;
use super::*;
use crate::render::NamespaceInput;
use ::cel::{Context, Program};
use kube::core::SelectorExt;
use serde_json::json;

const FLOTILLA: &str = "system:serviceaccount:flotilla-system:flotilla";
const OPTED_IN: &str = "team-a";

struct Compiled {
    condition: Program,
    variables: Vec<(String, Program)>,
    validations: Vec<(Program, Value)>,
}

fn compile(text: &Value) -> Program {
    Program::compile(text.as_str().unwrap()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn load(bounds: &Bounds) -> Compiled {
    let yaml = policy_yaml(bounds, "flotilla-system/flotilla");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let spec = &docs[0]["spec"];
    Compiled {
        condition: compile(&spec["matchConditions"][0]["expression"]),
        variables: spec["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap().to_string(),
                    compile(&v["expression"]),
                )
            })
            .collect(),
        validations: spec["validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (compile(&v["expression"]), v.clone()))
            .collect(),
    }
}

/// The API server's verdict: `None` when the policy does not apply or every validation
/// holds, else the message of the first that fails (an error fails it too).
fn judge(policy: &Compiled, request: &Value) -> Option<String> {
    let mut context = Context::default();
    for name in ["request", "object", "oldObject", "namespaceObject"] {
        context
            .add_variable(name, ::cel::to_value(&request[name]).unwrap())
            .unwrap();
    }
    if policy.condition.execute(&context).unwrap() != true.into() {
        return None;
    }
    let mut variables = std::collections::HashMap::new();
    for (name, program) in &policy.variables {
        let value = program
            .execute(&context)
            .unwrap_or_else(|e| panic!("variable {name}: {e}"));
        variables.insert(name.clone(), value);
    }
    context.add_variable_from_value("variables", variables);
    for (program, validation) in &policy.validations {
        if program.execute(&context) != Ok(true.into()) {
            let message = match &validation["messageExpression"] {
                Value::String(text) => {
                    match Program::compile(text).unwrap().execute(&context).unwrap() {
                        ::cel::Value::String(s) => s.to_string(),
                        other => panic!("{other:?}"),
                    }
                }
                _ => validation["message"].as_str().unwrap().to_string(),
            };
            return Some(message);
        }
    }
    None
}

fn namespace(name: &str, labels: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}})
}

/// A request by `user` to write `object` (CREATE), as the API server shows it to the policy.
fn write_by(user: &str, object: &Value, ns_labels: Value) -> Value {
    let kind = Kind::from_type(
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    )
    .unwrap();
    let resource = kind.api_resource();
    let ns = object["metadata"]["namespace"].as_str().unwrap();
    json!({
        "request": {
            "operation": "CREATE",
            "namespace": ns,
            "name": object["metadata"]["name"],
            "resource": {"group": resource.group, "version": resource.version, "resource": resource.plural},
            "userInfo": {"username": user},
        },
        "object": object,
        "oldObject": null,
        "namespaceObject": namespace(ns, ns_labels),
    })
}

fn write(object: &Value, ns_labels: Value) -> Value {
    write_by(FLOTILLA, object, ns_labels)
}

fn opted_in() -> Value {
    json!({"flotilla.dev/enabled": "true"})
}

/// Every object the repository's templates render for `team-a`, argo-server on.
fn rendered() -> Vec<Value> {
    let (config, _) = repo();
    let mut varied = config.clone();
    varied.values["argoServer"]["enabled"] = json!(true);
    let renderer = Renderer::load(&varied).unwrap();
    let input = NamespaceInput {
        name: OPTED_IN.into(),
        labels: [("flotilla.dev/enabled".to_string(), "true".to_string())].into(),
        annotations: Default::default(),
    };
    renderer
        .render(&input)
        .unwrap()
        .into_iter()
        .map(|o| o.body)
        .collect()
}

fn find(objects: &[Value], kind: &str, name: &str) -> Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name}"))
        .clone()
}

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

#[test]
fn the_namespace_selector_means_what_kubes_does() {
    let label_sets = [
        json!({}),
        json!({"a": "x"}),
        json!({"a": "y"}),
        json!({"a": "z", "b": "1"}),
        json!({"b": "1"}),
    ];
    for text in [
        "a=x",
        "a!=x",
        "a in (x,y)",
        "a notin (x,y)",
        "a",
        "!a",
        "a=x,b",
        "a!=x,!b",
        "b,a notin (z)",
    ] {
        let mut config = config_with_selector(text);
        config.policy.allow_namespaces.clear();
        let bounds = Bounds::from_samples(&config, &[]).unwrap();
        let policy = load(&bounds);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "team"}});
        for labels in &label_sets {
            let map: std::collections::BTreeMap<String, String> =
                serde_json::from_value(labels.clone()).unwrap();
            let want = config.selector.matches(&map);
            let verdict = judge(&policy, &write(&cm, labels.clone()));
            // Matched, a ConfigMap the templates do not render is refused for its name only
            // by RBAC; here the namespace rule is what is under test.
            let namespace_refused = verdict.is_some_and(|m| m.contains("is not opted in"));
            assert_eq!(!namespace_refused, want, "{text} on {labels}");
        }
    }
    // Without labels at all.
    let bounds = Bounds::from_samples(&config_with_selector("!a"), &[]).unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n", "namespace": "team"}});
    let mut request = write(&cm, Value::Null);
    request["namespaceObject"] = json!({"metadata": {"name": "team"}});
    assert_eq!(judge(&load(&bounds), &request), None);
}

fn config_with_selector(selector: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    Config::parse(
        &format!("selector: {selector:?}\n"),
        &dir.path().join("flotilla.yaml"),
    )
    .unwrap()
}

#[test]
fn pods_are_judged_as_the_render_policy_judges_them() {
    let (config, bounds) = repo();
    let policy = load(&bounds);
    let deployment = find(&rendered(), "Deployment", "workflow-controller");
    let target = crate::render::policy::Target {
        namespace: OPTED_IN,
        own_namespace: &config.namespace,
        instance: &config.instance,
        revision: "r",
        service_types: &config.policy.allow_service_types,
    };
    let container =
        |context: Value| json!([{"name": "c", "image": "x:1", "securityContext": context}]);
    let safe = json!({"allowPrivilegeEscalation": false});
    // (what the pod template's spec gets, whether it passes)
    let cases: Vec<(Value, bool)> = vec![
        (json!({}), true),
        (json!({"hostNetwork": false, "hostPID": false}), true),
        (json!({"hostNetwork": true}), false),
        (json!({"hostPID": true}), false),
        (json!({"hostIPC": true}), false),
        (json!({"volumes": [{"name": "t", "emptyDir": {}}]}), true),
        (
            json!({"volumes": [{"name": "t", "emptyDir": {}}, {"name": "r", "hostPath": {"path": "/"}}]}),
            false,
        ),
        (json!({"securityContext": {"sysctls": []}}), true),
        (
            json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
            false,
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
            true,
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
            false,
        ),
        (json!({"containers": container(safe.clone())}), true),
        (json!({"containers": container(json!({}))}), false),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": true}))}),
            false,
        ),
        (
            json!({"containers": [{"name": "c", "image": "x:1"}]}),
            false,
        ),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": false, "privileged": true}))}),
            false,
        ),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": false, "privileged": false}))}),
            true,
        ),
        (
            json!({"initContainers": container(json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["SYS_ADMIN"]}}))}),
            false,
        ),
        (
            json!({"initContainers": container(json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": []}}))}),
            true,
        ),
        (
            json!({"containers": container(json!({"allowPrivilegeEscalation": false, "seccompProfile": {"type": "Unconfined"}}))}),
            false,
        ),
        (
            json!({"containers": [{"name": "c", "image": "x:1", "securityContext": safe, "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
            false,
        ),
        (
            json!({"containers": [{"name": "c", "image": "x:1", "securityContext": safe, "ports": [{"containerPort": 80}]}]}),
            true,
        ),
        (
            json!({"ephemeralContainers": container(json!({"privileged": true}))}),
            false,
        ),
    ];
    for (change, passes) in cases {
        let mut object = deployment.clone();
        for (key, value) in change.as_object().unwrap() {
            object["spec"]["template"]["spec"][key] = value.clone();
        }
        let by_render = crate::render::policy::admit(object.clone(), "d.yaml", &target);
        assert_eq!(by_render.is_ok(), passes, "render policy on {change}");
        let by_policy = judge(&policy, &write(&object, opted_in()));
        assert_eq!(
            by_policy.is_none(),
            passes,
            "admission policy on {change}: {by_policy:?}"
        );
    }
}
