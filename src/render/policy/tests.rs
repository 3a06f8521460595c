use super::*;
use serde_json::json;

const TARGET: Target = Target {
    namespace: "team-a",
    own_namespace: "flotilla-system",
    instance: "flotilla",
    revision: "rev1",
    service_types: &[ServiceType::ClusterIP],
};

fn role_ref() -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-role"})
}

fn binding(role_ref: Value, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "b"}, "roleRef": role_ref, "subjects": subjects})
}

#[test]
fn a_binding_of_a_templated_role_to_its_namespace_passes() {
    let subjects = json!([
        {"kind": "ServiceAccount", "name": "argo", "namespace": "team-a"},
        {"kind": "ServiceAccount", "name": "argo-workflow"},
    ]);
    let stamped = admit(binding(role_ref(), subjects), "b.yaml", &TARGET).unwrap();
    assert_eq!(stamped.key.to_string(), "RoleBinding team-a/b");
}

#[test]
fn labels_and_annotations_at_their_limits_pass_and_one_byte_over_fails() {
    // The annotation limit counts every key and value, flotilla's own two included.
    let with_big = |len: usize| {
        cm(
            json!({"name": "c", "labels": {"example.com/note": "x".repeat(63)},
            "annotations": {"example.com/big": "y".repeat(len)}}),
        )
    };
    let probe = admit(with_big(0), "c.yaml", &TARGET).unwrap();
    let used: usize = probe.body["metadata"]["annotations"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| k.len() + v.as_str().unwrap().len())
        .sum();
    let at_limit = ANNOTATIONS_MAX_BYTES - used;
    let stamped = admit(with_big(at_limit), "c.yaml", &TARGET).unwrap();
    assert_eq!(
        stamped.body["metadata"]["labels"]["example.com/note"],
        "x".repeat(63)
    );
    // Not `unwrap_err`: on failure that would print a quarter of a megabyte.
    let over = admit(with_big(at_limit + 1), "c.yaml", &TARGET).map(|_| ());
    let over = over.map_err(|e| e.to_string());
    assert_eq!(
        over,
        Err(
            "ConfigMap c: metadata.annotations are 262145 bytes; Kubernetes allows at most 262144"
                .to_string()
        )
    );
}

fn cm(metadata: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"k": "v"}})
}

#[test]
fn forces_namespace_labels_and_annotations() {
    let stamped = admit(
        cm(json!({"name": "c", "labels": {"app.kubernetes.io/managed-by": "helm", "x": "y"}})),
        "c.yaml",
        &TARGET,
    )
    .unwrap();
    assert_eq!(stamped.key.to_string(), "ConfigMap team-a/c");
    let meta = &stamped.body["metadata"];
    assert_eq!(meta["namespace"], "team-a");
    assert_eq!(meta["labels"]["app.kubernetes.io/managed-by"], "flotilla");
    assert_eq!(meta["labels"]["flotilla.dev/namespace"], "team-a");
    assert_eq!(meta["labels"]["flotilla.dev/instance"], "flotilla");
    assert_eq!(meta["labels"]["x"], "y");
    assert_eq!(meta["annotations"]["flotilla.dev/revision"], "rev1");
    assert_eq!(
        meta["annotations"]["flotilla.dev/hash"],
        stamped.hash.as_str()
    );
    assert_eq!(stamped.body["data"]["k"], "v");
}

#[test]
fn hash_ignores_a_hash_annotation_written_by_the_template() {
    let plain = admit(cm(json!({"name": "c"})), "c.yaml", &TARGET).unwrap();
    let spoofed = admit(
        cm(json!({"name": "c", "annotations": {"flotilla.dev/hash": "forged"}})),
        "c.yaml",
        &TARGET,
    )
    .unwrap();
    assert_eq!(plain.hash, spoofed.hash);
    assert_eq!(plain.body, spoofed.body);
}

#[test]
fn own_namespace_is_allowed_explicitly() {
    let stamped = admit(
        cm(json!({"name": "team-a-c", "namespace": "flotilla-system"})),
        "c.yaml",
        &TARGET,
    )
    .unwrap();
    assert_eq!(stamped.key.namespace, "flotilla-system");
    assert_eq!(
        stamped.body["metadata"]["labels"]["flotilla.dev/namespace"],
        "team-a"
    );
}

#[test]
fn refuses_what_it_must_not_stamp() {
    let not_allowed = |kind: &str, api_version: &str| {
        format!(
            "kind {kind} ({api_version}) is not allowed; flotilla stamps only namespaced kinds from its allowlist: v1/ServiceAccount, v1/ConfigMap, rbac.authorization.k8s.io/v1/Role, rbac.authorization.k8s.io/v1/RoleBinding, v1/Service, apps/v1/Deployment"
        )
    };
    let cases: Vec<(Value, String)> = vec![
        (
            json!("just a string"),
            "must render a YAML mapping (one Kubernetes object)".into(),
        ),
        (
            json!({"kind": "ConfigMap", "metadata": {"name": "c"}}),
            "has no apiVersion: each template renders one Kubernetes object, with apiVersion, kind and metadata.name".into(),
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "x"}}),
            not_allowed("ClusterRoleBinding", "rbac.authorization.k8s.io/v1"),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
            not_allowed("Namespace", "v1"),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
            not_allowed("Secret", "v1"),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            "ConfigMap has no metadata mapping".into(),
        ),
        (
            cm(json!({"namespace": "team-a"})),
            "ConfigMap has no metadata.name".into(),
        ),
        (
            cm(json!({"name": "c", "namespace": "team-b"})),
            "ConfigMap c is placed in namespace \"team-b\"; objects may only go to the target namespace (team-a) or flotilla's own (flotilla-system)".into(),
        ),
        (
            cm(json!({"name": "Bad_Name"})),
            "ConfigMap name \"Bad_Name\" is not a valid name (lowercase alphanumerics, '-' and '.', at most 253, at most 63 between dots); a name composed from the namespace name fits with | dns_label".into(),
        ),
        (
            cm(json!({"name": "c", "labels": {"n": 1}})),
            "metadata.labels.n must be a string (quote it)".into(),
        ),
        (
            cm(json!({"name": "c", "labels": ["a"]})),
            "metadata.labels must be a mapping".into(),
        ),
        (
            cm(json!({"name": "c", "ownerReferences": []})),
            "ConfigMap c sets metadata.ownerReferences, which flotilla manages itself or does not support".into(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "9lives"}}),
            "Service name \"9lives\" must be a DNS label: at most 63 lowercase alphanumerics or '-', starting with a letter".into(),
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}),
            not_allowed("ClusterRole", "rbac.authorization.k8s.io/v1"),
        ),
        (
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}),
            not_allowed("Pod", "v1"),
        ),
        (
            json!({"apiVersion": "v1", "metadata": {"name": "c"}}),
            "has no kind: each template renders one Kubernetes object, with apiVersion, kind and metadata.name".into(),
        ),
        (
            cm(json!({"name": format!("{}-x", "n".repeat(63))})),
            "ConfigMap name \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn-x\" is not a valid name (lowercase alphanumerics, '-' and '.', at most 253, at most 63 between dots); a name composed from the namespace name fits with | dns_label".into(),
        ),
        (
            cm(json!({"name": "c", "labels": {"note": "has spaces"}})),
            "ConfigMap c: metadata.labels: note: label value \"has spaces\": must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric".into(),
        ),
        (
            cm(json!({"name": "c", "labels": {"note": "x".repeat(64)}})),
            "ConfigMap c: metadata.labels: note: label value \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric".into(),
        ),
        (
            cm(json!({"name": "c", "labels": {"bad key!": "x"}})),
            "ConfigMap c: metadata.labels: label key \"bad key!\": the name must be 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric".into(),
        ),
        (
            cm(json!({"name": "c", "annotations": {"a": "x".repeat(256 * 1024)}})),
            "ConfigMap c: metadata.annotations are 262203 bytes; Kubernetes allows at most 262144".into(),
        ),
        (
            cm(json!({"name": "c", "annotations": {"no/good/key": "x"}})),
            "ConfigMap c: metadata.annotations: label key \"no/good/key\": the prefix must be a DNS subdomain".into(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 1}}),
            "ConfigMap c: data.n must be a string (quote it, or use | string)".into(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a b": "x"}}),
            "ConfigMap c: data key \"a b\" is not valid (at most 253 characters of [-._a-zA-Z0-9])".into(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"big": "x".repeat(1024 * 1024)}}),
            "ConfigMap c: data is 1048579 bytes; Kubernetes allows at most 1048576".into(),
        ),
        (
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "flotilla-system"}}),
            "Deployment d is placed in flotilla's own namespace flotilla-system; only ServiceAccount, ConfigMap, Service may go there (RBAC or a workload there could reach flotilla's own credentials)".into(),
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "argo-role", "namespace": "flotilla-system"}}),
            "Role argo-role is placed in flotilla's own namespace flotilla-system; only ServiceAccount, ConfigMap, Service may go there (RBAC or a workload there could reach flotilla's own credentials)".into(),
        ),
        (
            binding(
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}),
                json!([]),
            ),
            "RoleBinding b: roleRef must be a Role of apiGroup rbac.authorization.k8s.io (got kind \"ClusterRole\" apiGroup \"rbac.authorization.k8s.io\"); flotilla binds only the Roles it stamps, never a ClusterRole".into(),
        ),
        (
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "a\u{7f}b"}}),
            "ConfigMap c: data.k holds U+007F, a control character server-side apply cannot carry; remove it where it comes from (a namespace's annotation, usually)".into(),
        ),
        (
            cm(json!({"name": "c", "annotations": {"note": "a\u{85}b"}})),
            "ConfigMap c: metadata.annotations.note holds U+0085, a control character server-side apply cannot carry; remove it where it comes from (a namespace's annotation, usually)".into(),
        ),
        (
            binding(
                role_ref(),
                json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}]),
            ),
            "RoleBinding b: binds system:authenticated, which stands for everyone; bind the ServiceAccounts that need the Role".into(),
        ),
        (
            binding(
                role_ref(),
                json!([{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts:team-b"}]),
            ),
            "RoleBinding b: binds system:serviceaccounts:team-b, which stands for everyone; bind the ServiceAccounts that need the Role".into(),
        ),
        (
            binding(
                role_ref(),
                json!([{"kind": "ServiceAccount", "name": "argo", "namespace": "team-b"}]),
            ),
            "RoleBinding b: binds ServiceAccount team-b/argo; a stamped RoleBinding may only bind ServiceAccounts of team-a".into(),
        ),
        (
            binding(
                role_ref(),
                json!([{"kind": "ServiceAccount", "name": "flotilla", "namespace": "flotilla-system"}]),
            ),
            "RoleBinding b: binds ServiceAccount flotilla-system/flotilla; a stamped RoleBinding may only bind ServiceAccounts of team-a".into(),
        ),
    ];
    for (doc, message) in cases {
        let err = admit(doc.clone(), "t.yaml", &TARGET).expect_err(&doc.to_string());
        assert_eq!(err.to_string(), message, "{doc}");
    }
}

/// A RoleBinding's subjects: ServiceAccounts of the target namespace, nothing else.
#[test]
fn a_binding_binds_service_accounts_of_its_namespace_only() {
    let only = "a stamped RoleBinding may only bind ServiceAccounts of team-a";
    let system = "a name Kubernetes keeps for its own identities; a stamped RoleBinding may only bind ServiceAccounts of the namespace";
    let cases: Vec<(Value, String)> = vec![
        (
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "team-a-admins"}),
            format!("binds \"Group\" team-a-admins; {only}"),
        ),
        (
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice@example.com"}),
            format!("binds \"User\" alice@example.com; {only}"),
        ),
        (
            json!({"name": "argo", "namespace": "team-a"}),
            format!("binds null argo; {only}"),
        ),
        (
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "system:kube-controller-manager"}),
            format!("binds system:kube-controller-manager, {system}"),
        ),
        (
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:masters"}),
            format!("binds system:masters, {system}"),
        ),
        (
            json!({"kind": "ServiceAccount", "name": "system:argo", "namespace": "team-a"}),
            format!("binds system:argo, {system}"),
        ),
        (
            json!({"kind": "ServiceAccount", "name": "argo", "namespace": "kube-system"}),
            format!("binds ServiceAccount kube-system/argo; {only}"),
        ),
    ];
    for (subject, message) in cases {
        // After a subject that passes: each subject is checked, not only the first.
        let subjects = json!([{"kind": "ServiceAccount", "name": "argo"}, subject]);
        let err = admit(binding(role_ref(), subjects), "b.yaml", &TARGET).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("RoleBinding b: {message}"),
            "{subject}"
        );
    }
}

/// A Deployment whose pod template is `pod` merged over a hardened one (which passes).
fn deployment(pod: Value) -> Value {
    let mut spec = json!({
        "serviceAccountName": "argo",
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}, "sysctls": []},
        "initContainers": [{"name": "init", "image": "i:1",
            "securityContext": {"allowPrivilegeEscalation": false, "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}}],
        "containers": [{"name": "main", "image": "m:1", "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 0}],
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": []}}}],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "hostNetwork": false,
    });
    for (key, value) in pod.as_object().unwrap() {
        spec[key] = value.clone();
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": spec}}})
}

fn container(name: &str, security_context: Value) -> Value {
    json!([{"name": name, "image": "x:1", "securityContext": security_context}])
}

#[test]
fn a_deployments_pods_get_nothing_of_the_node() {
    admit(deployment(json!({})), "d.yaml", &TARGET).expect("the hardened pod passes");
    let no_escalation = json!({"allowPrivilegeEscalation": false});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"hostNetwork": true}),
            "spec.template.spec.hostNetwork is set; a stamped pod may not share the node's network, PIDs or IPC",
        ),
        (
            json!({"hostPID": true}),
            "spec.template.spec.hostPID is set; a stamped pod may not share the node's network, PIDs or IPC",
        ),
        (
            json!({"hostIPC": true}),
            "spec.template.spec.hostIPC is set; a stamped pod may not share the node's network, PIDs or IPC",
        ),
        (
            json!({"volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}]}),
            "spec.template.spec.volumes: root is a hostPath volume; a stamped pod may not mount the node's files",
        ),
        (
            json!({"containers": container("main", json!({"privileged": true, "allowPrivilegeEscalation": false}))}),
            "container main: securityContext.privileged is set; a stamped container may not be privileged",
        ),
        (
            json!({"initContainers": container("init", json!({"privileged": true, "allowPrivilegeEscalation": false}))}),
            "initContainer init: securityContext.privileged is set; a stamped container may not be privileged",
        ),
        (
            json!({"containers": container("main", json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["NET_ADMIN"]}}))}),
            "container main: securityContext.capabilities.add is [\"NET_ADMIN\"]; a stamped container may only drop capabilities",
        ),
        (
            json!({"initContainers": container("init", json!({"allowPrivilegeEscalation": false, "capabilities": {"add": ["SYS_ADMIN"]}}))}),
            "initContainer init: securityContext.capabilities.add is [\"SYS_ADMIN\"]; a stamped container may only drop capabilities",
        ),
        (
            json!({"containers": container("main", json!({"allowPrivilegeEscalation": true}))}),
            "container main: securityContext.allowPrivilegeEscalation must be false (got true; unset means true)",
        ),
        (
            json!({"containers": container("main", json!({}))}),
            "container main: securityContext.allowPrivilegeEscalation must be false (got null; unset means true)",
        ),
        (
            json!({"initContainers": [{"name": "init", "image": "i:1"}]}),
            "initContainer init: securityContext.allowPrivilegeEscalation must be false (got null; unset means true)",
        ),
        (
            json!({"ephemeralContainers": container("debug", json!({"privileged": true}))}),
            "ephemeralContainer debug: securityContext.privileged is set; a stamped container may not be privileged",
        ),
        (
            json!({"containers": [{"name": "main", "image": "x:1", "securityContext": no_escalation, "ports": [{"containerPort": 80}, {"containerPort": 22, "hostPort": 22}]}]}),
            "container main: ports.hostPort is 22; a stamped container may not take a port of the node",
        ),
        (
            json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
            "spec.template.spec.securityContext.sysctls is [{\"name\":\"kernel.msgmax\",\"value\":\"1\"}]; a stamped pod may not tune the node's kernel",
        ),
        (
            json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
            "spec.template.spec.securityContext.seccompProfile.type is Unconfined; a stamped pod keeps the runtime's system call filter (RuntimeDefault)",
        ),
        (
            json!({"initContainers": container("init", json!({"allowPrivilegeEscalation": false, "seccompProfile": {"type": "Unconfined"}}))}),
            "initContainer init: securityContext.seccompProfile.type is Unconfined; a stamped pod keeps the runtime's system call filter (RuntimeDefault)",
        ),
        (
            json!({"containers": [{"name": "ok", "image": "x:1", "securityContext": no_escalation}, {"name": "second", "image": "x:1"}]}),
            "container second: securityContext.allowPrivilegeEscalation must be false (got null; unset means true)",
        ),
    ];
    for (pod, message) in cases {
        let err = admit(deployment(pod.clone()), "d.yaml", &TARGET).expect_err(&pod.to_string());
        assert_eq!(err.to_string(), format!("Deployment d: {message}"), "{pod}");
    }
}

fn service(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
        "spec": spec})
}

#[test]
fn a_service_claims_no_external_ips_and_is_of_an_allowed_type() {
    let ports = json!([{"port": 80, "protocol": "TCP"}]);
    for spec in [
        json!({"ports": ports}),
        json!({"type": "ClusterIP", "clusterIP": "None", "ports": ports, "externalIPs": []}),
    ] {
        admit(service(spec.clone()), "s.yaml", &TARGET).unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
    let cases = [
        (
            json!({"ports": ports, "externalIPs": ["10.0.0.1"]}),
            "spec.externalIPs is set; a stamped Service may not claim external IPs (traffic to them would reach its pods)",
        ),
        (
            json!({"type": "LoadBalancer", "ports": ports}),
            "spec.type LoadBalancer is not allowed; the config's policy.allowServiceTypes allows ClusterIP",
        ),
        (
            json!({"type": "NodePort", "ports": ports}),
            "spec.type NodePort is not allowed; the config's policy.allowServiceTypes allows ClusterIP",
        ),
        (
            json!({"type": "ExternalName", "externalName": "example.com"}),
            "spec.type ExternalName is not allowed; the config's policy.allowServiceTypes allows ClusterIP",
        ),
    ];
    for (spec, message) in cases {
        let err = admit(service(spec.clone()), "s.yaml", &TARGET).expect_err(&spec.to_string());
        assert_eq!(err.to_string(), format!("Service s: {message}"), "{spec}");
    }
    // What the config allows passes; external IPs never do.
    let open = Target {
        service_types: &[ServiceType::ClusterIP, ServiceType::LoadBalancer],
        ..TARGET
    };
    admit(
        service(json!({"type": "LoadBalancer", "ports": ports})),
        "s.yaml",
        &open,
    )
    .unwrap();
    let err = admit(
        service(json!({"type": "NodePort", "ports": ports})),
        "s.yaml",
        &open,
    )
    .unwrap_err();
    assert!(
        err.to_string().ends_with("allows ClusterIP, LoadBalancer"),
        "{err}"
    );
    let err = admit(
        service(json!({"type": "LoadBalancer", "ports": ports, "externalIPs": ["1.2.3.4"]})),
        "s.yaml",
        &open,
    )
    .unwrap_err();
    assert!(err.to_string().contains("spec.externalIPs is set"), "{err}");
}

/// Admits each of `docs` for [`TARGET`] (each must pass alone), then checks them as one set.
fn set_refusals(docs: Vec<Value>) -> Vec<String> {
    let objects: Vec<Stamped> = docs
        .into_iter()
        .enumerate()
        .map(|(i, doc)| admit(doc, &format!("t{i}.yaml"), &TARGET).unwrap())
        .collect();
    admit_set(&objects)
        .into_iter()
        .map(|(template, error)| format!("{template}: {error}"))
        .collect()
}

fn account(name: &str, namespace: Option<&str>) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace}})
}

fn role(name: &str) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name}, "rules": []})
}

#[test]
fn a_deployment_runs_as_and_a_binding_binds_what_the_same_render_stamps() {
    let subjects = json!([{"kind": "ServiceAccount", "name": "argo"}]);
    let passing = vec![
        account("argo", None),
        role("argo-role"),
        binding(role_ref(), subjects.clone()),
        deployment(json!({})),
    ];
    assert_eq!(set_refusals(passing), Vec::<String>::new());
    let runs_as = "a stamped Deployment runs as a ServiceAccount the templates stamp in team-a";
    let cases: Vec<(Vec<Value>, String)> = vec![
        (
            vec![deployment(json!({}))],
            format!("t0.yaml: Deployment d: spec.template.spec.serviceAccountName is argo, which they do not; {runs_as}"),
        ),
        (
            vec![account("argo", None), deployment(json!({"serviceAccountName": null}))],
            format!("t1.yaml: Deployment d: spec.template.spec.serviceAccountName is unset (so the namespace's `default`); {runs_as}"),
        ),
        (
            vec![account("argo", None), deployment(json!({"serviceAccountName": "default"}))],
            format!("t1.yaml: Deployment d: spec.template.spec.serviceAccountName is default, which they do not; {runs_as}"),
        ),
        // One of the same name in flotilla's namespace is not the target's.
        (
            vec![account("argo", Some("flotilla-system")), deployment(json!({}))],
            format!("t1.yaml: Deployment d: spec.template.spec.serviceAccountName is argo, which they do not; {runs_as}"),
        ),
        (
            vec![account("argo", None), deployment(json!({"serviceAccount": "default"}))],
            "t1.yaml: Deployment d: spec.template.spec.serviceAccount default differs from serviceAccountName; leave out the deprecated field".to_string(),
        ),
        (
            vec![account("argo", None), binding(role_ref(), subjects)],
            "t1.yaml: RoleBinding b: roleRef names Role argo-role, which the templates do not stamp in team-a; a stamped RoleBinding binds only a Role stamped with it".to_string(),
        ),
    ];
    for (docs, message) in cases {
        assert_eq!(set_refusals(docs), [message]);
    }
}

#[test]
fn messages_quote_at_most_a_little_of_a_long_value() {
    let long = "x".repeat(300);
    let label = admit(
        cm(json!({"name": "c", "labels": {"note": format!("{long} y")}})),
        "c.yaml",
        &TARGET,
    )
    .unwrap_err();
    let quoted = format!(
        "label value \"{long} y\": must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric"
    );
    assert_eq!(
        label.to_string(),
        format!(
            "ConfigMap c: metadata.labels: note: {}… ({} bytes)",
            &quoted[..200],
            quoted.len()
        )
    );
    let name = admit(cm(json!({"name": long})), "c.yaml", &TARGET).unwrap_err();
    assert!(
        name.to_string().starts_with(&format!(
            "ConfigMap name \"{}… (300 bytes)\" is not a valid name",
            &long[..100]
        )),
        "{name}"
    );
    let data_key = admit(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {format!("{long} y"): "v"}}),
        "c.yaml",
        &TARGET,
    )
    .unwrap_err();
    assert_eq!(
        data_key.to_string(),
        format!(
            "ConfigMap c: data key \"{}… (302 bytes)\" is not valid (at most 253 characters of [-._a-zA-Z0-9])",
            &long[..100]
        )
    );
}
