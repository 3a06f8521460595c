//! What flotilla's token may write: the objects its templates render, by name, and nothing
//! else. Its ClusterRole's create, patch and delete carry the rendered names
//! (`manifests/generated/clusterrole-stamp.yaml`), so the token cannot run a Deployment of
//! another name, re-image coredns, repoint kube-dns or patch aws-auth, in a tenant namespace or
//! in kube-system; the templated names still work, by server-side apply (a POST cannot be
//! limited by name, so it is refused even for them).

use super::helpers::*;
use crate::harness::*;
use flotilla::cluster::{self, Mode};
use flotilla::kinds::Kind;
use flotilla::object::{ObjectKey, Stamped};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, ResourceExt};

/// A name no template renders.
const UNTEMPLATED: &str = "sec-writes-evil";

/// A minimal object of `kind` named `name`, valid for the API server.
fn object(kind: Kind, name: &str) -> serde_json::Value {
    let mut object = serde_json::json!({
        "apiVersion": kind.api_version(), "kind": kind.name(), "metadata": {"name": name}});
    match kind {
        Kind::Deployment => {
            object["spec"] = serde_json::json!({
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}});
        }
        Kind::Service => {
            object["spec"] = serde_json::json!({"selector": {"app": name}, "ports": [{"port": 53, "protocol": "TCP"}]});
        }
        Kind::ConfigMap => object["data"] = serde_json::json!({"k": "v"}),
        _ => {}
    }
    object
}

fn api(client: &kube::Client, namespace: &str, kind: Kind) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &kind.api_resource())
}

/// Server-side apply as flotilla sends it: `force` for an update, not for a create.
async fn apply(
    client: &kube::Client,
    namespace: &str,
    body: &serde_json::Value,
    force: bool,
) -> kube::Result<DynamicObject> {
    let kind = Kind::from_type(
        body["apiVersion"].as_str().unwrap(),
        body["kind"].as_str().unwrap(),
    )
    .unwrap();
    let mut params = PatchParams::apply("flotilla");
    params.force = force;
    let name = body["metadata"]["name"].as_str().unwrap();
    api(client, namespace, kind)
        .patch(name, &params, &Patch::Apply(body))
        .await
}

/// Records `what` in `allowed` unless the API server refused it as Forbidden (403): so that a
/// run against a wider ClusterRole lists everything it let through, not only the first.
fn refused<T: std::fmt::Debug>(allowed: &mut Vec<String>, what: String, result: kube::Result<T>) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 && status.reason == "Forbidden" => {}
        Err(kube::Error::Api(status)) => allowed.push(format!(
            "{what}: not a 403 but {} {}",
            status.code, status.reason
        )),
        Err(other) => allowed.push(format!("{what}: not a 403 but {other}")),
        Ok(_) => allowed.push(format!("{what}: allowed")),
    }
}

/// What a real cluster has in kube-system and this control plane (no add-ons) does not:
/// coredns' Deployment, the kube-dns Service, EKS's aws-auth ConfigMap. Made by the admin if
/// missing; the API server keeps `extension-apiserver-authentication` there itself. Returns
/// (kind, name, resourceVersion) of each.
async fn kube_system_targets(admin: &kube::Client) -> Vec<(Kind, String, String)> {
    let made = PatchParams::apply("e2e-cluster-addons");
    for (kind, name) in [
        (Kind::Deployment, "coredns"),
        (Kind::Service, "kube-dns"),
        (Kind::ConfigMap, "aws-auth"),
    ] {
        let body = object(kind, name);
        if api(admin, "kube-system", kind)
            .get_opt(name)
            .await
            .unwrap()
            .is_none()
        {
            api(admin, "kube-system", kind)
                .patch(name, &made, &Patch::Apply(&body))
                .await
                .unwrap();
        }
    }
    kube_system_versions(admin).await
}

async fn kube_system_versions(admin: &kube::Client) -> Vec<(Kind, String, String)> {
    let mut versions = Vec::new();
    for (kind, name) in [
        (Kind::Deployment, "coredns"),
        (Kind::Service, "kube-dns"),
        (Kind::ConfigMap, "aws-auth"),
        (Kind::ConfigMap, "extension-apiserver-authentication"),
    ] {
        let live = api(admin, "kube-system", kind).get(name).await.unwrap();
        let version = match kind {
            // Its status keeps changing; its spec only by a write.
            Kind::Deployment => format!("generation {:?}", live.metadata.generation),
            _ => live.metadata.resource_version.unwrap_or_default(),
        };
        versions.push((kind, name.to_string(), version));
    }
    versions
}

pub(super) async fn flotillas_token_writes_only_the_names_its_templates_render() {
    let admin = admin().await;
    let flotilla = client_for(&env().flotilla_kubeconfig).await;
    let ns = "sec-writes";
    create_namespace(&admin, ns, Default::default(), Default::default()).await;
    let before = kube_system_targets(&admin).await;
    let mut allowed = Vec::new();

    // A Deployment, a Service, a ConfigMap of a name no template renders, in a tenant
    // namespace and in kube-system: refused, by server-side apply (as flotilla creates) and
    // by POST.
    for namespace in [ns, "kube-system"] {
        for kind in [Kind::Deployment, Kind::Service, Kind::ConfigMap] {
            let body = object(kind, UNTEMPLATED);
            let at = format!("{kind} {namespace}/{UNTEMPLATED}");
            let applied = apply(&flotilla, namespace, &body, false).await;
            refused(&mut allowed, format!("apply (create) {at}"), applied);
            let posted = api(&flotilla, namespace, kind)
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(body).unwrap(),
                )
                .await;
            refused(&mut allowed, format!("POST {at}"), posted);
        }
    }
    // Existing objects in kube-system: re-imaging coredns, repointing kube-dns, patching
    // aws-auth or the API server's own ConfigMap, by apply or by patch, and deleting them. Sent
    // as dry runs and with a uid precondition that never holds (authorization comes first), so
    // that a run against a wider ClusterRole lists what it let through without doing it.
    let edits = [
        (
            Kind::Deployment,
            "coredns",
            serde_json::json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "attacker/dns:1"}]}}}}),
        ),
        (
            Kind::Service,
            "kube-dns",
            serde_json::json!({"spec": {"selector": {"app": "attacker"}}}),
        ),
        (
            Kind::ConfigMap,
            "aws-auth",
            serde_json::json!({"data": {"mapRoles": "- rolearn: arn:aws:iam::1:role/attacker\n  groups: [system:masters]\n"}}),
        ),
        (
            Kind::ConfigMap,
            "extension-apiserver-authentication",
            serde_json::json!({"data": {"requestheader-allowed-names": "[\"attacker\"]"}}),
        ),
    ];
    for (kind, name, edit) in edits {
        let at = format!("{kind} kube-system/{name}");
        let mut body = object(kind, name);
        json_merge(&mut body, &edit);
        let system = api(&flotilla, "kube-system", kind);
        let force = PatchParams::apply("flotilla").force().dry_run();
        let applied = system.patch(name, &force, &Patch::Apply(&body)).await;
        refused(&mut allowed, format!("apply (forced) {at}"), applied);
        let patched = system
            .patch(
                name,
                &PatchParams::default().dry_run(),
                &Patch::Merge(&edit),
            )
            .await;
        refused(&mut allowed, format!("patch {at}"), patched);
        let never = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: Some("00000000-0000-0000-0000-000000000000".into()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let deleted = system.delete(name, &never).await;
        refused(&mut allowed, format!("delete {at}"), deleted);
    }
    // Cleaned up before asserting, so that a run against a wider ClusterRole leaves nothing.
    for namespace in [ns, "kube-system"] {
        for kind in [Kind::Deployment, Kind::Service, Kind::ConfigMap] {
            let _ = api(&admin, namespace, kind)
                .delete(UNTEMPLATED, &DeleteParams::default())
                .await;
        }
    }
    assert!(
        allowed.is_empty(),
        "flotilla's token was not refused {} request(s) outside the templated names:\n  {}",
        allowed.len(),
        allowed.join("\n  ")
    );
    assert_eq!(
        before,
        kube_system_versions(&admin).await,
        "kube-system changed"
    );

    the_templated_names_still_work(&flotilla, ns).await;
    delete_namespaces(&admin, &[ns]).await;
}

/// Control: the names the templates render may be created (by server-side apply), updated
/// and deleted, as flotilla does. A POST of the same name is refused: RBAC cannot limit a
/// create request by name when the name is in the body, so flotilla never POSTs a stamped
/// object (it creates by apply, authorized as `create` of the name in the URL).
async fn the_templated_names_still_work(flotilla: &kube::Client, ns: &str) {
    for (kind, name) in [
        (Kind::ConfigMap, "workflow-controller-configmap"),
        (Kind::Service, "workflow-controller-metrics"),
        (Kind::Deployment, "workflow-controller"),
    ] {
        let body = object(kind, name);
        apply(flotilla, ns, &body, false)
            .await
            .unwrap_or_else(|e| panic!("flotilla may create {kind} {ns}/{name} by apply: {e}"));
        apply(flotilla, ns, &body, true)
            .await
            .unwrap_or_else(|e| panic!("and apply it again: {e}"));
        api(flotilla, ns, kind)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("and delete it: {e}"));
        let posted = api(flotilla, ns, kind)
            .create(
                &PostParams::default(),
                &serde_json::from_value(body).unwrap(),
            )
            .await;
        assert_forbidden(&format!("POST {kind} {ns}/{name}"), posted);
    }
}

/// `edit` merged into `target`, as a JSON merge patch would (without deletions).
fn json_merge(target: &mut serde_json::Value, edit: &serde_json::Value) {
    match (target, edit) {
        (serde_json::Value::Object(t), serde_json::Value::Object(e)) => {
            for (k, v) in e {
                json_merge(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
        (t, e) => *t = e.clone(),
    }
}

/// A create with flotilla's token into a name someone took since its watches showed it free:
/// refused, even when their object holds exactly what flotilla renders, for every kind the
/// templates stamp. Theirs stays as it was; nothing of it becomes flotilla's.
pub(super) async fn a_create_never_takes_over_an_object_made_in_the_meantime() {
    let admin = admin().await;
    let flotilla = client_for(&env().flotilla_kubeconfig).await;
    let fleet = Fleet::new("sec-takeover");
    let ns = "sec-takeover";
    fleet.namespace(&admin, ns, false).await;
    let rendered = fleet.render(ns, &[]);
    let mut taken_over = Vec::new();
    let mut stamps = Vec::new();
    for body in rendered {
        let kind = Kind::from_type(
            body["apiVersion"].as_str().unwrap(),
            body["kind"].as_str().unwrap(),
        )
        .unwrap();
        let name = body["metadata"]["name"].as_str().unwrap().to_string();
        // Theirs: the same content without flotilla's labels and annotations.
        let mut theirs = body.clone();
        let meta = theirs["metadata"].as_object_mut().unwrap();
        meta.remove("labels");
        meta.remove("annotations");
        let before = api(&admin, ns, kind)
            .create(
                &PostParams::default(),
                &serde_json::from_value(theirs).unwrap(),
            )
            .await
            .unwrap();
        let stamped = Stamped {
            key: ObjectKey {
                kind,
                namespace: ns.into(),
                name: name.clone(),
            },
            body,
            hash: String::new(),
            template: String::new(),
        };
        let created = cluster::apply(&flotilla, "flotilla", &stamped, Mode::Create).await;
        let after = api(&admin, ns, kind).get(&name).await.unwrap();
        match created {
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => taken_over.push(format!("{kind} {name}: not a 409 but {e}")),
            Ok(_) => taken_over.push(format!("{kind} {name}: applied")),
        }
        // Its resourceVersion may move (the controller-manager writes to some kinds).
        let managers: Vec<_> = after.managed_fields().iter().map(|f| &f.manager).collect();
        if after.metadata.labels != before.metadata.labels
            || managers.iter().any(|m| m.as_deref() == Some("flotilla"))
        {
            taken_over.push(format!("{kind} {name}: now managed by {managers:?}"));
        }
        stamps.push(stamped);
    }
    assert!(taken_over.is_empty(), "{taken_over:#?}");
    // Once each name is free again, the same creates succeed.
    for stamped in &stamps {
        api(&admin, ns, stamped.key.kind)
            .delete(&stamped.key.name, &DeleteParams::default())
            .await
            .unwrap();
        eventually("a deleted object to be gone", || async {
            absent(&api(&admin, ns, stamped.key.kind), &stamped.key.name)
                .await
                .then_some(())
        })
        .await;
        cluster::apply(&flotilla, "flotilla", stamped, Mode::Create)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", stamped.key));
    }
}
