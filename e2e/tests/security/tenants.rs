//! Tenants: a namespace owner, with every right Kubernetes gives them in their namespace,
//! cannot make flotilla act outside it. What they may edit of flotilla's is reverted; what they
//! forge in flotilla's name stays in their namespace as they made it (flotilla may not delete a
//! name its templates do not render) and holds up nothing.

use super::helpers::*;
use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams, ResourceExt};
use std::collections::BTreeMap;

pub(super) async fn a_namespace_owner_cannot_make_flotilla_act_outside_their_namespace() {
    let admin = admin().await;
    let fleet = Fleet::new("sec-tenant");
    let (tenant_ns, victim_ns) = ("sec-tenant-a", "sec-tenant-victim");
    let _flotilla = fleet.start();
    for ns in [tenant_ns, victim_ns] {
        fleet.namespace(&admin, ns, true).await;
    }
    for ns in [tenant_ns, victim_ns] {
        wait_full_set(&fleet, &admin, ns).await;
    }
    let victim_before = untouched(&fleet, &admin, victim_ns).await;

    let (owner, argo_role) = an_owner_of(&admin, tenant_ns).await;
    namespaces_and_workers_are_out_of_their_reach(&owner, &fleet, [tenant_ns, victim_ns]).await;
    a_star_role_reaches_its_own_namespace_only(&admin, tenant_ns, victim_ns).await;
    let rendered = fleet.render(tenant_ns, &[]);
    they_edit_stamped_objects(&owner, tenant_ns, &argo_role, &rendered).await;
    the_edits_are_reverted(&admin, tenant_ns, &rendered).await;
    forged_objects_stay_in_their_namespace_as_made(&admin, &owner, &fleet, tenant_ns, victim_ns)
        .await;

    // None of it made flotilla act on the other namespace, or for the one that does not exist.
    victim_before.assert_kept(&fleet, &admin).await;
    let victim = workers(&admin).get(victim_ns).await.unwrap();
    assert!(
        victim
            .status
            .is_some_and(|s| !matches!(s.phase, Phase::RenderFailed | Phase::ApplyFailed))
    );
    assert!(absent(&workers(&admin), "sec-tenant-ghost").await);
    delete_namespaces(&admin, &[tenant_ns, victim_ns]).await;
}

/// The owner: the built-in `admin` role in their namespace, plus the rights of the stamped
/// controller Role (which Kubernetes requires before anyone may edit that Role or its binding).
/// Returns a client acting as the owner, and that Role as stamped.
async fn an_owner_of(admin: &kube::Client, tenant_ns: &str) -> (kube::Client, Role) {
    create_in(admin, tenant_ns, &account("owner")).await;
    let argo_role = Api::<Role>::namespaced(admin.clone(), tenant_ns)
        .get("argo-role")
        .await
        .unwrap();
    let owner_argo = Role {
        metadata: meta("owner-argo"),
        rules: argo_role.rules.clone(),
    };
    create_in(admin, tenant_ns, &owner_argo).await;
    for (name, kind, role) in [
        ("owner-admin", "ClusterRole", "admin"),
        ("owner-argo", "Role", "owner-argo"),
    ] {
        create_in(
            admin,
            tenant_ns,
            &binding(name, (kind, role), (tenant_ns, "owner")),
        )
        .await;
    }
    let owner = client_for(&kubeconfig_for_account(tenant_ns, "owner")).await;
    (owner, argo_role)
}

/// The opt-in label and the overrides live on the Namespace: out of the owner's reach, for
/// their own namespace as for another; and so is creating a NamespaceWorker.
async fn namespaces_and_workers_are_out_of_their_reach(
    owner: &kube::Client,
    fleet: &Fleet,
    namespaces: [&str; 2],
) {
    for ns in namespaces {
        let opt_out = serde_json::json!({"metadata": {"labels": {fleet.label.clone(): null}}});
        assert_forbidden(
            &format!("owner unlabels {ns}"),
            patch_namespace(owner, ns, opt_out).await,
        );
        let override_ = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "500"}}});
        assert_forbidden(
            &format!("owner overrides for {ns}"),
            patch_namespace(owner, ns, override_).await,
        );
    }
    let worker = serde_json::from_value::<NamespaceWorker>(serde_json::json!({
        "apiVersion": "flotilla.dev/v1alpha1", "kind": "NamespaceWorker",
        "metadata": {"name": "sec-tenant-ghost"}, "spec": {"namespace": "sec-tenant-ghost"}}))
    .unwrap();
    assert_forbidden(
        "owner creates a NamespaceWorker",
        workers(owner).create(&PostParams::default(), &worker).await,
    );
}

/// Why tenants get the built-in roles and never wildcards: a `*` Role bound in a namespace
/// covers that Namespace object too, opt-in label included (README, "Reserving the opt-in
/// label"). Shown with a harmless label; another Namespace stays out of reach.
async fn a_star_role_reaches_its_own_namespace_only(
    admin: &kube::Client,
    tenant_ns: &str,
    victim_ns: &str,
) {
    create_in(admin, tenant_ns, &account("starred")).await;
    create_in(
        admin,
        tenant_ns,
        &role("star", vec![rule(&["*"], &["*"], &["*"])]),
    )
    .await;
    let star_binding = binding("starred-star", ("Role", "star"), (tenant_ns, "starred"));
    create_in(admin, tenant_ns, &star_binding).await;
    let starred = client_for(&kubeconfig_for_account(tenant_ns, "starred")).await;
    let probe =
        serde_json::json!({"metadata": {"labels": {"e2e.flotilla.dev/probe": "set-by-tenant"}}});
    patch_namespace(&starred, tenant_ns, probe)
        .await
        .expect("a `*` Role in a namespace lets its subjects label that Namespace");
    let probe = serde_json::json!({"metadata": {"labels": {"e2e.flotilla.dev/probe": "x"}}});
    assert_forbidden(
        "a `*` Role does not reach another Namespace",
        patch_namespace(&starred, victim_ns, probe).await,
    );
}

/// The object of `kind` named `name` in `flotilla render`'s output.
fn rendered_of(rendered: &[serde_json::Value], kind: &str, name: &str) -> serde_json::Value {
    rendered
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap()
        .clone()
}

/// Edits to stamped objects, each allowed by Kubernetes: the controller Role widened to list
/// Secrets, the owner added to its binding, the Deployment's identity, image and
/// securityContext loosened.
async fn they_edit_stamped_objects(
    owner: &kube::Client,
    tenant_ns: &str,
    argo_role: &Role,
    rendered: &[serde_json::Value],
) {
    let roles: Api<Role> = Api::namespaced(owner.clone(), tenant_ns);
    let mut rules = serde_json::to_value(&argo_role.rules).unwrap();
    rules.as_array_mut().unwrap().push(serde_json::json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}));
    roles
        .patch(
            "argo-role",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"rules": rules})),
        )
        .await
        .expect("the owner may widen the Role within their own rights");
    let bindings: Api<RoleBinding> = Api::namespaced(owner.clone(), tenant_ns);
    let mut subjects = rendered_of(rendered, "RoleBinding", "argo-binding")["subjects"].clone();
    subjects.as_array_mut().unwrap().push(
        serde_json::json!({"kind": "ServiceAccount", "name": "owner", "namespace": tenant_ns}),
    );
    bindings
        .patch(
            "argo-binding",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"subjects": subjects})),
        )
        .await
        .expect("the owner may add themselves to the controller's binding");
    let deploys: Api<Deployment> = Api::namespaced(owner.clone(), tenant_ns);
    let loosen = serde_json::json!({"spec": {"template": {"spec": {
        "serviceAccountName": "default",
        "securityContext": {"runAsNonRoot": false},
        "containers": [{"name": "workflow-controller", "image": "attacker/controller:1",
            "securityContext": {"readOnlyRootFilesystem": false, "allowPrivilegeEscalation": true, "runAsNonRoot": false}}]}}}});
    deploys
        .patch(
            "workflow-controller",
            &PatchParams::default(),
            &Patch::Strategic(loosen),
        )
        .await
        .expect("the owner may edit the controller Deployment");
}

/// Waits until `get` shows `want` (as JSON), e.g. an edited field back at its rendered value.
async fn wait_json<F, Fut>(what: &str, want: &serde_json::Value, get: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<serde_json::Value>>,
{
    eventually_within(LONG, what, || async {
        (get().await? == *want).then_some(())
    })
    .await
}

/// flotilla puts each edited field back at its rendered value.
async fn the_edits_are_reverted(
    admin: &kube::Client,
    tenant_ns: &str,
    rendered: &[serde_json::Value],
) {
    let admin_roles: Api<Role> = Api::namespaced(admin.clone(), tenant_ns);
    let want_rules = rendered_of(rendered, "Role", "argo-role")["rules"].clone();
    wait_json("the Role's rules reverted", &want_rules, || async {
        serde_json::to_value(admin_roles.get("argo-role").await.ok()?.rules).ok()
    })
    .await;
    let admin_bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), tenant_ns);
    let want_subjects = rendered_of(rendered, "RoleBinding", "argo-binding")["subjects"].clone();
    wait_json(
        "the binding's subjects reverted",
        &want_subjects,
        || async {
            serde_json::to_value(admin_bindings.get("argo-binding").await.ok()?.subjects).ok()
        },
    )
    .await;
    let admin_deploys: Api<Deployment> = Api::namespaced(admin.clone(), tenant_ns);
    let want_pod =
        rendered_of(rendered, "Deployment", "workflow-controller")["spec"]["template"]["spec"]
            .clone();
    let pick = |pod: &serde_json::Value| {
        let c = &pod["containers"][0];
        serde_json::json!([
            pod["serviceAccountName"],
            pod["securityContext"]["runAsNonRoot"],
            c["image"],
            c["securityContext"]["readOnlyRootFilesystem"],
            c["securityContext"]["allowPrivilegeEscalation"],
            c["securityContext"]["runAsNonRoot"]
        ])
    };
    let want = pick(&want_pod);
    assert_eq!(
        want,
        serde_json::json!([
            "argo",
            true,
            "quay.io/argoproj/workflow-controller:v4.1.2",
            true,
            false,
            true
        ])
    );
    wait_json(
        "the Deployment's identity, image and securityContext reverted",
        &want,
        || async {
            let live =
                serde_json::to_value(admin_deploys.get("workflow-controller").await.ok()?).ok()?;
            Some(pick(&live["spec"]["template"]["spec"]))
        },
    )
    .await;
}

/// Objects the owner labels as flotilla's, for another namespace and for one that does not
/// exist. flotilla takes them for its own: the one "for" the victim is not rendered there, so it
/// is to be pruned; the one for a namespace that does not exist, reaped. But their names are
/// none its templates render, so its token may not delete them: the API server refuses (403),
/// and they stay exactly as the owner made them, in the owner's own namespace, holding up
/// nothing (the victim's worker is checked by the caller).
async fn forged_objects_stay_in_their_namespace_as_made(
    admin: &kube::Client,
    owner: &kube::Client,
    fleet: &Fleet,
    tenant_ns: &str,
    victim_ns: &str,
) {
    let audit = AuditWindow::open();
    let cms: Api<ConfigMap> = Api::namespaced(owner.clone(), tenant_ns);
    let mut made = BTreeMap::new();
    for (name, for_namespace) in [
        ("forged-victim", victim_ns),
        ("forged-ghost", "sec-tenant-ghost"),
    ] {
        let forged = ConfigMap {
            metadata: kube::core::ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([
                    (
                        "app.kubernetes.io/managed-by".to_string(),
                        "flotilla".to_string(),
                    ),
                    ("flotilla.dev/instance".to_string(), fleet.instance.clone()),
                    (
                        "flotilla.dev/namespace".to_string(),
                        for_namespace.to_string(),
                    ),
                ])),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = cms.create(&PostParams::default(), &forged).await.unwrap();
        made.insert(name.to_string(), created.resource_version());
    }
    eventually_within(
        LONG,
        "flotilla's deletes of the forged objects refused",
        || async {
            let refused: std::collections::BTreeSet<String> = audit
                .requests(FLOTILLA_USER, Some("forged-"))
                .iter()
                .filter(|e| e["verb"] == "delete" && e["responseStatus"]["code"] == 403)
                .filter(|e| e["objectRef"]["namespace"] == tenant_ns)
                .filter_map(|e| e["objectRef"]["name"].as_str().map(str::to_string))
                .collect();
            (refused.len() == made.len()).then_some(())
        },
    )
    .await;
    let tenant_cms: Api<ConfigMap> = Api::namespaced(admin.clone(), tenant_ns);
    for (name, version) in &made {
        let live = tenant_cms.get(name).await.unwrap();
        assert_eq!(&live.resource_version(), version, "{name} changed");
    }
    // No write anywhere else, and nothing but those deletes in the owner's namespace.
    let elsewhere: Vec<String> = audit
        .requests(FLOTILLA_USER, Some("forged-"))
        .iter()
        .filter(|e| e["objectRef"]["namespace"] != tenant_ns)
        .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
        .collect();
    assert!(elsewhere.is_empty(), "{elsewhere:?}");
    // Theirs to remove.
    for name in made.keys() {
        cms.delete(name, &Default::default()).await.unwrap();
    }
}
