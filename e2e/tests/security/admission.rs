//! A stolen token, with the admission policy installed: what RBAC lets flotilla's token write
//! by name (Path A: the controller's Deployment in kube-system as a mighty ServiceAccount; Path
//! B: a Role of all rights bound to flotilla itself) is refused with 403, each of the policy's
//! rules in turn, while flotilla stamps and reaps as before through the same policy (and
//! repairs the Deployment the token re-imaged). What the policy leaves to the token is shown too.

use super::helpers::*;
use crate::admission_policy::Installed;
use crate::harness::*;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

/// `object` (a rendered one, changed) applied as flotilla applies, with flotilla's token.
async fn apply_as_flotilla(flotilla: &kube::Client, object: &Value) -> kube::Result<DynamicObject> {
    let kind = flotilla::kinds::Kind::from_type(
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    )
    .unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(
        flotilla.clone(),
        object["metadata"]["namespace"].as_str().unwrap(),
        &kind.api_resource(),
    );
    let name = object["metadata"]["name"].as_str().unwrap();
    api.patch(name, &PatchParams::apply("flotilla"), &Patch::Apply(object))
        .await
}

fn find(objects: &[Value], kind: &str, name: &str) -> Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name} rendered"))
        .clone()
}

/// `object` with `value` at the JSON pointer `at` (whose parent exists).
fn with(object: &Value, at: &str, value: Value) -> Value {
    let mut changed = object.clone();
    let (parent, key) = at.rsplit_once('/').unwrap();
    match changed.pointer_mut(parent).unwrap() {
        Value::Object(map) => {
            map.insert(key.to_string(), value);
        }
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
        other => panic!("{other}"),
    }
    changed
}

#[track_caller]
fn assert_refused_by_policy<T: std::fmt::Debug>(
    what: &str,
    result: kube::Result<T>,
    message: &str,
) {
    match &result {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            assert!(
                status.message.contains(message),
                "{what}: {}",
                status.message
            );
        }
        _ => {}
    }
    assert_forbidden(what, result);
}

pub(super) async fn a_stolen_token_is_refused_what_the_policy_bounds() {
    let admin = admin().await;
    let flotilla = client_for(&env().flotilla_kubeconfig).await;
    let fleet = Fleet::new("sec-vap");
    let opted = "sec-vap-a";
    let other = "sec-vap-b";
    fleet.namespace(&admin, opted, true).await;
    fleet.namespace(&admin, other, false).await;
    let _policy = Installed::for_fleet(&fleet);
    let mut with_server = Fleet::new("sec-vap");
    with_server.values["argoServer"]["enabled"] = json!(true);
    let rendered = with_server.render(opted, &[]);
    let deployment = find(&rendered, "Deployment", "workflow-controller");
    let role = find(&rendered, "Role", "argo-role");
    let binding = find(&rendered, "RoleBinding", "argo-binding");
    let service = find(&rendered, "Service", "argo-server");
    let cm = find(&rendered, "ConfigMap", "workflow-controller-configmap");

    let in_kube_system = with(&deployment, "/metadata/namespace", json!("kube-system"));
    let path_a = with(
        &in_kube_system,
        "/spec/template/spec/serviceAccountName",
        json!("clusterrole-aggregation-controller"),
    );
    // The policy is in force once the API server has loaded it: until then a harmless probe
    // (a ConfigMap in the namespace not opted in) passes, and is removed.
    let probe = with(&cm, "/metadata/namespace", json!(other));
    let cm_api = flotilla::kinds::Kind::ConfigMap.api_resource();
    let probes: Api<DynamicObject> = Api::namespaced_with(flotilla.clone(), other, &cm_api);
    eventually("the admission policy in force", || async {
        match apply_as_flotilla(&flotilla, &probe).await {
            Err(kube::Error::Api(s)) if s.code == 403 => Some(()),
            _ => {
                let _ = probes
                    .delete("workflow-controller-configmap", &DeleteParams::default())
                    .await;
                None
            }
        }
    })
    .await;

    let not_opted_in = "is not opted in by the selector this policy was generated for";
    let role_rules = "holds exactly the rules its template renders";
    let binding_subjects = "binds the Role its template renders to the ServiceAccounts it renders";
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "Deployment workflow-controller in kube-system",
            path_a.clone(),
            not_opted_in,
        ),
        // Path B, in an opted-in namespace.
        (
            "Role argo-role with */*",
            with(
                &role,
                "/rules",
                json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
            ),
            role_rules,
        ),
        (
            "RoleBinding argo-binding to flotilla's own ServiceAccount",
            with(
                &binding,
                "/subjects",
                json!([{"kind": "ServiceAccount", "name": "flotilla", "namespace": FLOTILLA_NAMESPACE}]),
            ),
            binding_subjects,
        ),
        (
            "RoleBinding argo-binding of the executor's Role (RBAC lets flotilla bind it)",
            with(
                &binding,
                "/roleRef",
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "argo-workflow"}),
            ),
            binding_subjects,
        ),
        (
            "Role argo-role in a namespace not opted in",
            with(&role, "/metadata/namespace", json!(other)),
            not_opted_in,
        ),
        (
            "Deployment running as the namespace's default ServiceAccount",
            with(
                &deployment,
                "/spec/template/spec/serviceAccountName",
                json!("default"),
            ),
            "runs as the ServiceAccount its template renders",
        ),
        // (A privileged container with allowPrivilegeEscalation false is invalid before any
        // admission: the policy's refusal of it is unit-tested.)
        (
            "Deployment adding a capability",
            with(
                &deployment,
                "/spec/template/spec/containers/0/securityContext/capabilities/add",
                json!(["SYS_ADMIN"]),
            ),
            "may only drop capabilities",
        ),
        (
            "Deployment without a seccomp filter",
            with(
                &deployment,
                "/spec/template/spec/securityContext/seccompProfile/type",
                json!("Unconfined"),
            ),
            "keeps the runtime's system call filter",
        ),
        (
            "Deployment mounting the node's root",
            with(
                &deployment,
                "/spec/template/spec/volumes",
                json!([{"name": "root", "hostPath": {"path": "/"}}]),
            ),
            "may not mount the node's files",
        ),
        (
            "Deployment on the node's network",
            with(&deployment, "/spec/template/spec/hostNetwork", json!(true)),
            "may not share the node's network",
        ),
        (
            "ConfigMap in kube-system",
            with(&cm, "/metadata/namespace", json!("kube-system")),
            not_opted_in,
        ),
        (
            "ConfigMap in flotilla's own namespace",
            with(&cm, "/metadata/namespace", json!(FLOTILLA_NAMESPACE)),
            "writes only what its templates place there",
        ),
        (
            "argo-server Service of type LoadBalancer",
            with(&service, "/spec/type", json!("LoadBalancer")),
            "is of type ClusterIP and claims no external IPs",
        ),
        (
            "argo-server Service of type NodePort",
            with(&service, "/spec/type", json!("NodePort")),
            "is of type ClusterIP and claims no external IPs",
        ),
        (
            "argo-server Service claiming an external IP",
            with(&service, "/spec/externalIPs", json!(["192.0.2.1"])),
            "is of type ClusterIP and claims no external IPs",
        ),
    ];
    for (what, object, message) in cases {
        assert_refused_by_policy(what, apply_as_flotilla(&flotilla, &object).await, message);
    }
    // A delete of what flotilla did not stamp, in a namespace not opted in (a cluster-wide
    // Argo's ConfigMap, say).
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "workflow-controller-configmap", "namespace": other}});
    let cms: Api<DynamicObject> = Api::namespaced_with(admin.clone(), other, &cm_api);
    cms.patch(
        "workflow-controller-configmap",
        &PatchParams::apply("admin"),
        &Patch::Apply(&theirs),
    )
    .await
    .unwrap();
    assert_refused_by_policy(
        "delete of a ConfigMap flotilla did not stamp",
        probes
            .delete("workflow-controller-configmap", &DeleteParams::default())
            .await,
        "deletes only what it stamped",
    );
    // Nor may the token lift the policy.
    let policies: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy> =
        Api::all(flotilla.clone());
    assert_forbidden(
        "delete of the admission policy",
        policies
            .delete(flotilla::admission::POLICY, &DeleteParams::default())
            .await,
    );
    let no_rules = json!({"spec": {"validations": [{"expression": "true"}]}});
    assert_forbidden(
        "edit of the admission policy",
        policies
            .patch(
                flotilla::admission::POLICY,
                &PatchParams::default(),
                &Patch::Merge(&no_rules),
            )
            .await,
    );
    let bindings: Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    > = Api::all(flotilla.clone());
    assert_forbidden(
        "delete of the admission policy's binding",
        bindings
            .delete(flotilla::admission::BINDING, &DeleteParams::default())
            .await,
    );

    // What the policy leaves to the token (docs/security.md says so): reading ConfigMaps
    // anywhere, and, in an opted-in namespace, the rendered names with content it does not pin.
    let kube_system: Api<DynamicObject> =
        Api::namespaced_with(flotilla.clone(), "kube-system", &cm_api);
    kube_system
        .list(&Default::default())
        .await
        .expect("the token reads ConfigMaps in kube-system");
    let other_image = with(
        &deployment,
        "/spec/template/spec/containers/0/image",
        json!("registry.example.com/anything:1"),
    );
    apply_as_flotilla(&flotilla, &other_image)
        .await
        .expect("the token runs an image of its choice as argo in an opted-in namespace");

    // Control: flotilla stamps what it renders, says the policy is in step, and reaps, through
    // the same policy.
    let running = fleet.start();
    fleet.wait_stamped(&admin, opted).await;
    running.wait_log("allows what the config renders").await;
    fleet.set_opt_in(&admin, opted, None).await;
    fleet.wait_reaped(&admin, opted).await;
    running.stop();
    delete_namespaces(&admin, &[opted, other]).await;
}
