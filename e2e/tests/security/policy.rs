//! What flotilla must not stamp, asked for by templates on a live fleet: cluster-scoped and
//! unlisted kinds, objects placed outside the namespace, dangerous bindings; a namespace whose
//! first render fails that way; overrides beyond the declared keys and bounds.

use super::helpers::*;
use crate::harness::*;
use flotilla::status::Phase;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use kube::api::Api;
use std::collections::BTreeMap;
use std::time::Duration;

const POLICY: &str = r#"{% set case = namespace.annotations["e2e.flotilla.dev/case"] if "e2e.flotilla.dev/case" in namespace.annotations else "" %}
{% if case == "clusterrole" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: sec-pol-evil
rules:
  - {apiGroups: ["*"], resources: ["*"], verbs: ["*"]}
{% elif case == "clusterrolebinding" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: argo, namespace: {{ namespace.name }}}]
{% elif case == "namespace" %}
apiVersion: v1
kind: Namespace
metadata:
  name: sec-pol-evil
{% elif case == "secret" %}
apiVersion: v1
kind: Secret
metadata:
  name: sec-pol-evil
stringData: {token: x}
{% elif case == "elsewhere" %}
apiVersion: v1
kind: ConfigMap
metadata:
  name: sec-pol-evil
  namespace: {{ namespace.annotations["e2e.flotilla.dev/place"] }}
{% elif case == "own-role" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: argo-role
  namespace: {{ flotilla.namespace }}
rules: []
{% elif case == "bind-admin" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{kind: ServiceAccount, name: argo, namespace: {{ namespace.name }}}]
{% elif case == "bind-everyone" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: argo-role}
subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: "system:authenticated"}]
{% elif case == "bind-group" %}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: sec-pol-evil
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: argo-role}
subjects: [{kind: Group, apiGroup: rbac.authorization.k8s.io, name: team-admins}]
{% elif case == "privileged" %}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sec-pol-evil
spec:
  selector: {matchLabels: {app: evil}}
  template:
    metadata: {labels: {app: evil}}
    spec:
      serviceAccountName: argo
      containers: [{name: c, image: "busybox:1", securityContext: {privileged: true, allowPrivilegeEscalation: false}}]
{% elif case == "default-sa" %}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sec-pol-evil
spec:
  selector: {matchLabels: {app: evil}}
  template:
    metadata: {labels: {app: evil}}
    spec:
      containers: [{name: c, image: "busybox:1", securityContext: {allowPrivilegeEscalation: false}}]
{% elif case == "loadbalancer" %}
apiVersion: v1
kind: Service
metadata:
  name: sec-pol-evil
spec:
  type: LoadBalancer
  ports: [{port: 80, protocol: TCP}]
{% endif %}
"#;

/// The policy cases: (namespace and case, the reason its worker must show).
const POLICY_CASES: [(&str, &str); 12] = [
    (
        "clusterrole",
        "policy.yaml: kind ClusterRole (rbac.authorization.k8s.io/v1) is not allowed; flotilla stamps only namespaced kinds from its allowlist",
    ),
    (
        "clusterrolebinding",
        "policy.yaml: kind ClusterRoleBinding (rbac.authorization.k8s.io/v1) is not allowed",
    ),
    (
        "namespace",
        "policy.yaml: kind Namespace (v1) is not allowed",
    ),
    ("secret", "policy.yaml: kind Secret (v1) is not allowed"),
    (
        "elsewhere",
        "policy.yaml: ConfigMap sec-pol-evil is placed in namespace \"kube-system\"; objects may only go to the target namespace (sec-pol-elsewhere) or flotilla's own (flotilla-system)",
    ),
    (
        "own-role",
        "policy.yaml: Role argo-role is placed in flotilla's own namespace flotilla-system; only ServiceAccount, ConfigMap, Service may go there",
    ),
    (
        "bind-admin",
        "policy.yaml: RoleBinding sec-pol-evil: roleRef must be a Role",
    ),
    (
        "bind-everyone",
        "policy.yaml: RoleBinding sec-pol-evil: binds system:authenticated, which stands for everyone",
    ),
    (
        "bind-group",
        "policy.yaml: RoleBinding sec-pol-evil: binds \"Group\" team-admins; a stamped RoleBinding may only bind ServiceAccounts of sec-pol-bind-group",
    ),
    (
        "privileged",
        "policy.yaml: Deployment sec-pol-evil: container c: securityContext.privileged is set; a stamped container may not be privileged",
    ),
    (
        "default-sa",
        "policy.yaml: Deployment sec-pol-evil: spec.template.spec.serviceAccountName is unset (so the namespace's `default`)",
    ),
    (
        "loadbalancer",
        "policy.yaml: Service sec-pol-evil: spec.type LoadBalancer is not allowed; the config's policy.allowServiceTypes allows ClusterIP",
    ),
];

/// Nothing that a refused template asked for exists.
async fn assert_nothing_forbidden_exists(client: &kube::Client) {
    assert!(absent(&Api::<ClusterRole>::all(client.clone()), "sec-pol-evil").await);
    assert!(
        absent(
            &Api::<ClusterRoleBinding>::all(client.clone()),
            "sec-pol-evil"
        )
        .await
    );
    assert!(absent(&Api::<Namespace>::all(client.clone()), "sec-pol-evil").await);
    assert!(
        absent(
            &Api::<ConfigMap>::namespaced(client.clone(), "kube-system"),
            "sec-pol-evil"
        )
        .await
    );
    assert!(
        absent(
            &Api::<Role>::namespaced(client.clone(), FLOTILLA_NAMESPACE),
            "argo-role"
        )
        .await
    );
}

pub(super) async fn policy_refuses_cluster_scoped_unlisted_and_misplaced_objects() {
    let client = admin().await;
    let fleet = Fleet::new("sec-policy");
    fleet.add_template("policy.yaml", POLICY);
    let _flotilla = fleet.start();
    let name = |case: &str| format!("sec-pol-{case}");
    // Each namespace first gets the full set (the template renders nothing for it)...
    for (case, _) in POLICY_CASES {
        fleet.namespace(&client, &name(case), true).await;
    }
    let mut before = BTreeMap::new();
    for (case, _) in POLICY_CASES {
        let ns = name(case);
        wait_full_set(&fleet, &client, &ns).await;
        before.insert(case, untouched(&fleet, &client, &ns).await);
    }
    // ...then asks, by annotation, for something flotilla must not stamp, and where to put it:
    // an annotation is no way out of the namespace either.
    for (case, _) in POLICY_CASES {
        let patch = serde_json::json!({"metadata": {"annotations": {
            "e2e.flotilla.dev/case": case, "e2e.flotilla.dev/place": "kube-system"}}});
        patch_namespace(&client, &name(case), patch).await.unwrap();
    }
    for (case, reason) in POLICY_CASES {
        let message = wait_render_failed(&client, &name(case)).await;
        assert!(
            message.contains(reason),
            "{case}: {message}\n  lacks {reason}"
        );
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (case, _) in POLICY_CASES {
        before[case].assert_kept(&fleet, &client).await;
    }
    assert_nothing_forbidden_exists(&client).await;
    let names: Vec<String> = POLICY_CASES.iter().map(|(case, _)| name(case)).collect();
    delete_namespaces(&client, &names).await;
}

/// A namespace opted in with a template that fails from the start has nothing stamped and
/// must show why. (Its first status has no revision or image yet: the status leaves them out,
/// since this API server turns an empty string into null, which the schema refuses.)
pub(super) async fn a_namespace_whose_first_render_fails_shows_why_and_gets_nothing() {
    let client = admin().await;
    let fleet = Fleet::new("sec-policy-fresh");
    fleet.add_template("policy.yaml", POLICY);
    let _flotilla = fleet.start();
    let labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
    let ns = "sec-pol-fresh";
    let annotations = BTreeMap::from([(
        "e2e.flotilla.dev/case".to_string(),
        "clusterrole".to_string(),
    )]);
    let audit = AuditWindow::open();
    create_namespace(&client, ns, labels, annotations).await;
    let message = wait_render_failed(&client, ns).await;
    assert!(message.contains(POLICY_CASES[0].1), "{message}");
    assert!(fleet.stamped_for(&client, ns).await.is_empty());
    // The window holds flotilla's writes for the namespace: its NamespaceWorker's.
    let worker_writes = audit
        .requests(FLOTILLA_USER, Some(&format!("namespaceworkers/{ns}")))
        .len();
    assert!(worker_writes > 0, "no NamespaceWorker write for {ns} seen");
    assert_eq!(audit.writes_in(FLOTILLA_USER, ns), 0);
    assert_nothing_forbidden_exists(&client).await;
    delete_namespaces(&client, &[ns]).await;
}

pub(super) async fn overrides_beyond_the_declared_keys_and_bounds_change_nothing() {
    let client = admin().await;
    let fleet = Fleet::new("sec-override");
    let ns = "sec-override-a";
    let _flotilla = fleet.start();
    fleet.namespace(&client, ns, true).await;
    wait_full_set(&fleet, &client, ns).await;
    let before = untouched(&fleet, &client, ns).await;
    let attempts = [
        // Not declared: the workflows' ServiceAccount (a way to the controller's own rights).
        (
            "workflowDefaults.spec.serviceAccountName",
            "argo",
            "is not overridable (the config allows: controllerBurst, controllerImage, controllerQps, executorImage, logLevel, namespaceParallelism, parallelism, resourceRateLimit.burst, resourceRateLimit.limit, resources.limits.cpu",
        ),
        // A parent of declared keys: would replace the whole map, bounds and all.
        ("resources", "{}", "\"resources\" is not overridable"),
        // Another registry for a declared image.
        (
            "executorImage",
            "evil.example/argoproj/argoexec:v4.1.2",
            "\"evil.example/argoproj/argoexec:v4.1.2\" does not match the allowed pattern",
        ),
        ("parallelism", "100000", "100000 is above the maximum 500"),
        ("parallelism", "lots", "\"lots\" is not an integer"),
        (
            "logLevel",
            "info\n- --namespaced=false",
            "is not one of [\"debug\", \"info\", \"warn\", \"error\"]",
        ),
        (
            "resources.limits.memory",
            "unlimited",
            "\"unlimited\" is not a Kubernetes quantity",
        ),
    ];
    // Two values for one key cannot coexist: parallelism gets its second attempt afterwards.
    for round in [0, 1] {
        let mut annotations = serde_json::Map::new();
        for (i, (key, value, _)) in attempts.iter().enumerate() {
            if *key == "parallelism" && (i % 2 == 0) != (round == 0) {
                continue;
            }
            annotations.insert(format!("override.flotilla.dev/{key}"), (*value).into());
        }
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        patch_namespace(&client, ns, patch).await.unwrap();
        let tried: Vec<_> = attempts
            .iter()
            .filter(|(key, value, _)| {
                annotations
                    .get(&format!("override.flotilla.dev/{key}"))
                    .and_then(|v| v.as_str())
                    == Some(*value)
            })
            .collect();
        let worker = wait_worker(
            &client,
            ns,
            "RenderFailed naming every refused override",
            |w| {
                let status = w.status.as_ref().unwrap();
                status.phase == Phase::RenderFailed
                    && tried
                        .iter()
                        .all(|(_, _, reason)| status.message.contains(reason))
            },
        )
        .await;
        let message = worker.status.unwrap().message;
        for (key, _, reason) in &tried {
            let named = format!("annotation override.flotilla.dev/{key}: ");
            assert!(message.contains(&named), "{message}\n  lacks {named}");
            assert!(message.contains(reason), "{message}\n  lacks {reason}");
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    before.assert_kept(&fleet, &client).await;
    // Removed again: the namespace is back to its defaults, which it never left.
    let mut clear = serde_json::Map::new();
    for (key, _, _) in attempts {
        clear.insert(
            format!("override.flotilla.dev/{key}"),
            serde_json::Value::Null,
        );
    }
    let patch = serde_json::json!({"metadata": {"annotations": clear}});
    patch_namespace(&client, ns, patch).await.unwrap();
    wait_rendered(&client, ns).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        before.versions,
        versions(&fleet.stamped_for(&client, ns).await)
    );
    delete_namespaces(&client, &[ns]).await;
}

/// kube-system matching the selector (its labels are the admin's to set) is still no target:
/// its worker shows why and which key would allow it, and flotilla writes nothing there.
pub(super) async fn a_reserved_namespace_is_no_target_even_when_the_selector_matches() {
    let client = admin().await;
    let fleet = Fleet::new("sec-reserved");
    let _flotilla = fleet.start();
    let audit = AuditWindow::open();
    fleet.set_opt_in(&client, "kube-system", Some("on")).await;
    let message = wait_render_failed(&client, "kube-system").await;
    let reason = "namespace kube-system: is a namespace Kubernetes keeps for itself; flotilla stamps nothing there, even when the selector matches, unless the config names it in policy.allowNamespaces";
    assert!(message.contains(reason), "{message}\n  lacks {reason}");
    let now = k8s_openapi::jiff::Timestamp::now();
    eventually("the audit log past the RenderFailed status", || async {
        audit.reaches(now).then_some(())
    })
    .await;
    assert!(fleet.stamped_for(&client, "kube-system").await.is_empty());
    // Positive control: the window holds the NamespaceWorker's writes.
    let worker_writes = audit
        .requests(FLOTILLA_USER, Some("namespaceworkers/kube-system"))
        .len();
    assert!(
        worker_writes > 0,
        "no NamespaceWorker write for kube-system seen"
    );
    assert_eq!(audit.writes_in(FLOTILLA_USER, "kube-system"), 0);
    // Opted out again: the worker goes.
    fleet.set_opt_in(&client, "kube-system", None).await;
    eventually_within(LONG, "the kube-system worker removed", || async {
        absent(&workers(&client), "kube-system").await.then_some(())
    })
    .await;
}
