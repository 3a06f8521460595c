//! flotilla's own credentials: its ServiceAccount token is refused what flotilla must not do
//! (Secrets, cluster-wide or widened RBAC, bindings of powerful roles, Namespaces, Pods,
//! tokens), and the Roles it stamps grant what docs/security.md lists and nothing dangerous.

use super::helpers::*;
use crate::harness::*;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, ResourceExt};
use std::collections::BTreeMap;

pub(super) async fn flotillas_own_credentials_are_refused_what_it_must_not_do() {
    let admin = admin().await;
    let flotilla = client_for(&env().flotilla_kubeconfig).await;
    let ns = "sec-rbac";
    create_namespace(&admin, ns, BTreeMap::new(), BTreeMap::new()).await;
    targets_of_the_refused_requests(&admin, ns).await;

    its_token_works_for_what_flotilla_does(&flotilla, ns).await;
    secrets_are_refused(&flotilla, ns).await;
    granting_or_widening_rbac_is_refused(&flotilla, ns).await;
    namespaces_pods_and_tokens_are_refused(&flotilla, ns).await;
    // Nothing of the above exists now.
    assert!(absent(&Api::<ClusterRole>::all(admin.clone()), "sec-rbac-evil").await);
    assert!(
        absent(
            &Api::<RoleBinding>::namespaced(admin.clone(), ns),
            "sec-rbac-evil"
        )
        .await
    );

    // The Roles flotilla does stamp grant what docs/security.md lists, and nothing dangerous.
    let fleet = Fleet::new("sec-rbac");
    let _running = fleet.start();
    let stamped_ns = "sec-rbac-stamped";
    fleet.namespace(&admin, stamped_ns, true).await;
    wait_count(&fleet, &admin, stamped_ns, FULL_SET).await;
    stamped_roles_are_the_readmes(&admin, &fleet, stamped_ns).await;
    delete_namespaces(&admin, &[ns, stamped_ns]).await;
}

/// What the refused requests aim at, made by the admin in `ns`: a Secret, a Role that grants
/// everything, a ServiceAccount to bind or mint a token for.
async fn targets_of_the_refused_requests(admin: &kube::Client, ns: &str) {
    let secret = Secret {
        metadata: meta("sec-rbac-secret"),
        string_data: Some(BTreeMap::from([("password".into(), "hunter2".into())])),
        ..Default::default()
    };
    create_in(admin, ns, &secret).await;
    create_in(
        admin,
        ns,
        &role("admin-like", vec![rule(&["*"], &["*"], &["*"])]),
    )
    .await;
    create_in(admin, ns, &account("someone")).await;
}

/// Control: the token works, for what flotilla is meant to do: a ConfigMap of a name the
/// templates render, created as flotilla creates (server-side apply; writes.rs shows the rest).
async fn its_token_works_for_what_flotilla_does(flotilla: &kube::Client, ns: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(flotilla.clone(), ns);
    let probe = ConfigMap {
        metadata: meta("workflow-controller-configmap"),
        ..Default::default()
    };
    cms.patch(
        "workflow-controller-configmap",
        &PatchParams::apply("flotilla"),
        &Patch::Apply(&probe),
    )
    .await
    .expect("flotilla may create a ConfigMap");
    cms.delete("workflow-controller-configmap", &DeleteParams::default())
        .await
        .expect("and delete it");
    Api::<Namespace>::all(flotilla.clone())
        .get(ns)
        .await
        .expect("flotilla may read namespaces");
}

async fn secrets_are_refused(flotilla: &kube::Client, ns: &str) {
    let secrets: Api<Secret> = Api::namespaced(flotilla.clone(), ns);
    assert_forbidden("get a Secret", secrets.get("sec-rbac-secret").await);
    assert_forbidden("list Secrets", secrets.list(&Default::default()).await);
    assert_forbidden(
        "list Secrets everywhere",
        Api::<Secret>::all(flotilla.clone())
            .list(&Default::default())
            .await,
    );
    assert_forbidden(
        "list its own namespace's Secrets (its token)",
        Api::<Secret>::namespaced(flotilla.clone(), FLOTILLA_NAMESPACE)
            .list(&Default::default())
            .await,
    );
}

/// No cluster-wide RBAC, no widening of its own ClusterRole, no binding of powerful roles
/// (to others or to itself), no Role that is not on its escalate list.
async fn granting_or_widening_rbac_is_refused(flotilla: &kube::Client, ns: &str) {
    let pp = PostParams::default();
    let cluster_role = ClusterRole {
        metadata: meta("sec-rbac-evil"),
        rules: Some(vec![rule(&["*"], &["*"], &["*"])]),
        ..Default::default()
    };
    assert_forbidden(
        "create a ClusterRole",
        Api::<ClusterRole>::all(flotilla.clone())
            .create(&pp, &cluster_role)
            .await,
    );
    let grow =
        serde_json::json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    assert_forbidden(
        "widen its own ClusterRole",
        Api::<ClusterRole>::all(flotilla.clone())
            .patch("flotilla", &PatchParams::default(), &Patch::Merge(grow))
            .await,
    );
    let crb = ClusterRoleBinding {
        metadata: meta("sec-rbac-evil"),
        role_ref: role_ref("ClusterRole", "cluster-admin"),
        subjects: Some(service_account_subject(FLOTILLA_NAMESPACE, "flotilla")),
    };
    assert_forbidden(
        "create a ClusterRoleBinding",
        Api::<ClusterRoleBinding>::all(flotilla.clone())
            .create(&pp, &crb)
            .await,
    );
    let bindings: Api<RoleBinding> = Api::namespaced(flotilla.clone(), ns);
    for (kind, name) in [
        ("ClusterRole", "cluster-admin"),
        ("ClusterRole", "admin"),
        ("Role", "admin-like"),
    ] {
        let binding = binding("sec-rbac-evil", (kind, name), (ns, "someone"));
        assert_forbidden(
            &format!("bind {kind} {name}"),
            bindings.create(&pp, &binding).await,
        );
    }
    let to_self = binding(
        "sec-rbac-evil",
        ("ClusterRole", "cluster-admin"),
        (FLOTILLA_NAMESPACE, "flotilla"),
    );
    assert_forbidden(
        "bind cluster-admin to itself in kube-system",
        Api::<RoleBinding>::namespaced(flotilla.clone(), "kube-system")
            .create(&pp, &to_self)
            .await,
    );
    let roles: Api<Role> = Api::namespaced(flotilla.clone(), ns);
    for rules in [
        vec![rule(&[""], &["secrets"], &["get"])],
        vec![rule(&[""], &["pods/exec"], &["create"])],
        vec![rule(&["*"], &["*"], &["*"])],
    ] {
        let role = role("not-templated", rules.clone());
        assert_forbidden(
            &format!("create a Role not on the escalate list with {rules:?}"),
            roles.create(&pp, &role).await,
        );
    }
}

/// No labels or annotations on a Namespace (opt-in, overrides), no creating or deleting one,
/// no Pods, no tokens for ServiceAccounts.
async fn namespaces_pods_and_tokens_are_refused(flotilla: &kube::Client, ns: &str) {
    let pp = PostParams::default();
    let label = serde_json::json!({"metadata": {"labels": {"flotilla.dev/enabled": "true"}}});
    assert_forbidden(
        "label a Namespace",
        patch_namespace(flotilla, ns, label).await,
    );
    let annotate = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "1"}}});
    assert_forbidden(
        "annotate a Namespace",
        patch_namespace(flotilla, ns, annotate).await,
    );
    let namespaces: Api<Namespace> = Api::all(flotilla.clone());
    let new_ns = Namespace {
        metadata: meta("sec-rbac-new"),
        ..Default::default()
    };
    assert_forbidden("create a Namespace", namespaces.create(&pp, &new_ns).await);
    assert_forbidden(
        "delete a Namespace",
        namespaces.delete(ns, &DeleteParams::default()).await,
    );
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "sec-rbac-pod"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    assert_forbidden(
        "run a Pod",
        Api::<Pod>::namespaced(flotilla.clone(), ns)
            .create(&pp, &pod)
            .await,
    );
    let token = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec!["x".into()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_forbidden(
        "mint a token for a ServiceAccount",
        Api::<ServiceAccount>::namespaced(flotilla.clone(), ns)
            .create_token_request("someone", &pp, &token)
            .await,
    );
}

/// The stamped Roles' rules as docs/security.md (linked from the README) lists them (the first
/// YAML block after the `<!-- stamped-roles` comment).
fn readme_role_rules() -> serde_json::Value {
    let readme = std::fs::read_to_string(env().repo.join("docs/security.md")).unwrap();
    let (_, after) = readme
        .split_once("<!-- stamped-roles")
        .expect("docs/security.md lists the stamped Roles");
    let block = after
        .split_once("```yaml\n")
        .unwrap()
        .1
        .split_once("```")
        .unwrap()
        .0;
    serde_saphyr::from_str(block).unwrap()
}

/// The Roles `fleet` stamped in `ns`: as many as docs/security.md lists, each with its's
/// rules, and none with a dangerous rule ([`assert_harmless`]).
async fn stamped_roles_are_the_readmes(admin: &kube::Client, fleet: &Fleet, ns: &str) {
    let listed = readme_role_rules();
    let live_roles = Api::<Role>::namespaced(admin.clone(), ns)
        .list(&Default::default())
        .await
        .unwrap();
    let stamped: Vec<&Role> = live_roles
        .items
        .iter()
        .filter(|r| r.labels().get("flotilla.dev/instance") == Some(&fleet.instance))
        .collect();
    assert_eq!(stamped.len(), listed.as_object().unwrap().len(), "{listed}");
    for role in stamped {
        let rules = serde_json::to_value(role.rules.clone().unwrap_or_default()).unwrap();
        assert_eq!(
            rules,
            listed[role.name_any()],
            "Role {} differs from docs/security.md",
            role.name_any()
        );
        for rule in role.rules.iter().flatten() {
            assert_harmless(&role.name_any(), rule);
        }
    }
}

/// No wildcard, no non-resource URLs or resource names, no escalate, bind or impersonate, no
/// RBAC objects or ServiceAccount tokens, and Secrets only `get`.
fn assert_harmless(role: &str, rule: &PolicyRule) {
    let at = format!("Role {role}: {rule:?}");
    let all = rule
        .verbs
        .iter()
        .chain(rule.resources.iter().flatten())
        .chain(rule.api_groups.iter().flatten());
    assert!(!all.clone().any(|v| v.contains('*')), "{at}: wildcard");
    assert!(
        rule.non_resource_urls.is_none() && rule.resource_names.is_none(),
        "{at}"
    );
    assert!(
        !rule
            .verbs
            .iter()
            .any(|v| ["escalate", "bind", "impersonate"].contains(&v.as_str())),
        "{at}"
    );
    let resources = rule.resources.clone().unwrap_or_default();
    assert!(
        !resources.iter().any(|r| r.starts_with("roles")
            || r.starts_with("rolebindings")
            || r == "serviceaccounts/token"),
        "{at}"
    );
    if resources.iter().any(|r| r == "secrets") {
        assert_eq!(rule.verbs, ["get"], "{at}: secrets beyond get");
    }
}
