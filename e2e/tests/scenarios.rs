//! The behaviours a cluster admin relies on, each against the real control plane.

use crate::harness::*;
use flotilla::kinds::Kind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, ResourceExt};
use kube::core::ObjectMeta;
use std::collections::BTreeMap;
use std::time::Duration;

fn merge(value: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(value)
}

/// The API of a rendered object's kind, in its namespace.
fn dynamic_api(client: &kube::Client, object: &serde_json::Value) -> Api<DynamicObject> {
    let kind = flotilla::kinds::Kind::from_type(
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    )
    .unwrap();
    let namespace = object["metadata"]["namespace"].as_str().unwrap();
    Api::namespaced_with(client.clone(), namespace, &kind.api_resource())
}

/// An object without what changes on every write or read no matter its content: its
/// managedFields (timestamps) and status (another controller's).
fn comparable(object: DynamicObject) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap();
    if let Some(meta) = value["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    if let Some(obj) = value.as_object_mut() {
        obj.remove("status");
    }
    value
}

#[tokio::test]
async fn opt_in_stamps_every_templated_object_as_rendered() {
    let client = admin().await;
    let fleet = Fleet::new("optin");
    let flotilla = fleet.start();
    fleet.namespace(&client, "optin-a", true).await;
    let live = fleet.wait_stamped(&client, "optin-a").await;
    let rendered = fleet.render("optin-a", &[]);
    assert_eq!(live.len(), 9, "the default templates stamp 9 objects");
    // What `flotilla render` prints is what is live, field for field, as the API server itself
    // judges it: a server-side dry-run apply of the render under flotilla's field manager
    // changes nothing of the live object. (flotilla's own comparison, `plan::contains`, is
    // deliberately not used: a bug in it would hide on both sides.)
    for want in &rendered {
        let (kind, name) = (
            want["kind"].as_str().unwrap(),
            want["metadata"]["name"].as_str().unwrap(),
        );
        let api = dynamic_api(&client, want);
        let params = PatchParams::apply("flotilla").force().dry_run();
        // Retried: the controller-manager may write to the object (a ServiceAccount's token)
        // between the dry run and the read.
        eventually(&format!("{kind} {name} as rendered"), || async {
            let applied = api.patch(name, &params, &Patch::Apply(want)).await.ok()?;
            let live = api.get(name).await.ok()?;
            let (applied, live) = (comparable(applied), comparable(live));
            if applied != live {
                println!(
                    "{kind} {name}: dry-run apply of the render differs from live:\n{}",
                    flotilla::diff::unified(name, Some(&live), Some(&applied)).unwrap_or_default()
                );
            }
            (applied == live).then_some(())
        })
        .await;
    }
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "optin-a");
    let deploy = deploys.get("workflow-controller").await.unwrap();
    let container = &deploy.spec.template.spec.unwrap().containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("quay.io/argoproj/workflow-controller:v4.1.2")
    );
    let args = container.args.clone().unwrap();
    assert!(
        args.contains(&"--managed-namespace=optin-a".to_string()),
        "{args:?}"
    );
    assert!(args.contains(&"--executor-image=quay.io/argoproj/argoexec:v4.1.2".to_string()));
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "optin-a");
    let binding = bindings.get("argo-binding").await.unwrap();
    assert_eq!(
        binding.subjects.unwrap()[0].namespace.as_deref(),
        Some("optin-a")
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "optin-a");
    let cm = cms.get("workflow-controller-configmap").await.unwrap();
    assert_eq!(cm.data.unwrap()["instanceID"], "optin-a");
    // A namespace without the label gets nothing.
    fleet.namespace(&client, "optin-b", false).await;
    flotilla.wait_log("initial sync complete").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(fleet.stamped_for(&client, "optin-b").await.is_empty());
    delete_namespaces(&client, &["optin-a", "optin-b"]).await;
}

#[tokio::test]
async fn opt_out_by_removing_or_changing_the_label_reaps_everything() {
    let client = admin().await;
    let fleet = Fleet::new("optout");
    let _flotilla = fleet.start();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in ["optout-removed", "optout-changed"] {
        fleet.namespace(&client, name, true).await;
    }
    for name in ["optout-removed", "optout-changed"] {
        fleet.wait_stamped(&client, name).await;
    }
    let pp = PatchParams::default();
    namespaces
        .patch("optout-removed", &pp, &merge(fleet.opt_in_patch(None)))
        .await
        .unwrap();
    namespaces
        .patch(
            "optout-changed",
            &pp,
            &merge(fleet.opt_in_patch(Some("off"))),
        )
        .await
        .unwrap();
    for name in ["optout-removed", "optout-changed"] {
        fleet.wait_reaped(&client, name).await;
        // The namespace itself is never touched.
        assert!(namespaces.get(name).await.is_ok());
    }
    // Opting in again stamps everything again.
    namespaces
        .patch(
            "optout-changed",
            &pp,
            &merge(fleet.opt_in_patch(Some("on"))),
        )
        .await
        .unwrap();
    fleet.wait_stamped(&client, "optout-changed").await;
    delete_namespaces(&client, &["optout-removed", "optout-changed"]).await;
}

#[tokio::test]
async fn deleting_the_namespace_reaps_everything_also_outside_it() {
    let client = admin().await;
    let fleet = Fleet::new("nsdelete");
    fleet.add_template("outside.yaml", OUTSIDE_TEMPLATE);
    // Its names depend on the namespace: an admin grants what they cost.
    let _grant = outside_grant();
    let _flotilla = fleet.start();
    fleet.namespace(&client, "nsdelete-a", true).await;
    let stamped = fleet.wait_stamped(&client, "nsdelete-a").await;
    let outside: Api<ConfigMap> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    assert!(
        stamped
            .iter()
            .any(|o| o.namespace().as_deref() == Some(FLOTILLA_NAMESPACE))
    );
    assert!(outside.get("nsdelete-a-fleet-entry").await.is_ok());
    delete_namespaces(&client, &["nsdelete-a"]).await;
    fleet.wait_reaped(&client, "nsdelete-a").await;
    assert!(absent(&outside, "nsdelete-a-fleet-entry").await);
}

#[tokio::test]
async fn drift_is_repaired_deleted_objects_return_and_edits_are_reverted() {
    let client = admin().await;
    let fleet = Fleet::new("drift");
    let flotilla = fleet.start();
    fleet.namespace(&client, "drift-a", true).await;
    fleet.wait_stamped(&client, "drift-a").await;
    let deploys: Api<Deployment> = Api::namespaced(client.clone(), "drift-a");
    let original = deploys.get("workflow-controller").await.unwrap();

    deploys
        .delete("workflow-controller", &DeleteParams::default())
        .await
        .unwrap();
    let recreated = eventually("the deleted Deployment to come back", || async {
        let d = deploys.get_opt("workflow-controller").await.ok()??;
        (d.uid() != original.uid()).then_some(d)
    })
    .await;
    assert_eq!(recreated.spec, original.spec);

    tamper_image(&client, "drift-a", "attacker/controller:evil").await;
    eventually("the edited image to be reverted", || async {
        let d = deploys.get("workflow-controller").await.ok()?;
        let image = d.spec.template.spec?.containers[0].image.clone()?;
        (image == "quay.io/argoproj/workflow-controller:v4.1.2").then_some(())
    })
    .await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "drift-a");
    cms.patch(
        "workflow-controller-configmap",
        &PatchParams::default(),
        &merge(serde_json::json!({"data": {"instanceID": "hijacked"}})),
    )
    .await
    .unwrap();
    eventually("the edited ConfigMap to be reverted", || async {
        let cm = cms.get("workflow-controller-configmap").await.ok()?;
        (cm.data?["instanceID"] == "drift-a").then_some(())
    })
    .await;
    // Waited for: the revert is visible a moment before flotilla has its response, and logs.
    flotilla.wait_log("drift repaired").await;
    delete_namespaces(&client, &["drift-a"]).await;
}

#[tokio::test]
async fn an_object_flotilla_did_not_stamp_is_never_touched() {
    let client = admin().await;
    let fleet = Fleet::new("collide");
    fleet.namespace(&client, "collide-a", false).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "collide-a");
    let theirs = ConfigMap {
        metadata: ObjectMeta {
            name: Some("workflow-controller-configmap".into()),
            labels: Some(BTreeMap::from([("owner".into(), "team".into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("instanceID".into(), "theirs".into())])),
        ..ConfigMap::default()
    };
    let before = cms.create(&PostParams::default(), &theirs).await.unwrap();
    let flotilla = fleet.start();
    fleet.set_opt_in(&client, "collide-a", Some("on")).await;
    // Everything else is stamped; the colliding name is reported, not taken over.
    eventually("the rest of the set to be stamped", || async {
        let n = fleet.stamped_for(&client, "collide-a").await.len();
        (n == fleet.render("collide-a", &[]).len() - 1).then_some(())
    })
    .await;
    flotilla.wait_log("not created by flotilla").await;
    let after = cms.get("workflow-controller-configmap").await.unwrap();
    assert_eq!(after.resource_version(), before.resource_version());
    assert_eq!(after.data, before.data);
    assert_eq!(after.metadata.labels, before.metadata.labels);
    // Opting out reaps what flotilla stamped and still leaves theirs alone.
    fleet.set_opt_in(&client, "collide-a", None).await;
    fleet.wait_reaped(&client, "collide-a").await;
    let kept = cms.get("workflow-controller-configmap").await.unwrap();
    assert_eq!(kept.resource_version(), before.resource_version());
    delete_namespaces(&client, &["collide-a"]).await;
}

/// flotilla knows a name is free from its watches rather than by reading each object before
/// creating it; these are the cases that knowledge must get right while it runs.
#[tokio::test]
async fn a_name_taken_while_flotilla_runs_is_left_alone_and_stamped_once_freed() {
    let client = admin().await;
    let fleet = Fleet::new("taken");
    let rendered = fleet.render("taken-a", &[]).len();
    fleet.namespace(&client, "taken-a", true).await;
    let flotilla = fleet.start();
    // Stamped once: the watches of every rendered name are running from here on.
    fleet.wait_stamped(&client, "taken-a").await;
    let theirs = |team: &str| ConfigMap {
        metadata: ObjectMeta {
            name: Some("workflow-controller-configmap".into()),
            labels: Some(BTreeMap::from([("owner".into(), team.into())])),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("instanceID".into(), team.into())])),
        ..ConfigMap::default()
    };

    // Their object created a moment before the opt-in, in several namespaces at once.
    let late = ["taken-b", "taken-c", "taken-d"];
    let mut before = Vec::new();
    for ns in late {
        fleet.namespace(&client, ns, false).await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        before.push(
            cms.create(&PostParams::default(), &theirs(ns))
                .await
                .unwrap(),
        );
        fleet.set_opt_in(&client, ns, Some("on")).await;
    }
    for (ns, before) in late.iter().zip(&before) {
        eventually("the rest of the set to be stamped", || async {
            let n = fleet.stamped_for(&client, ns).await.len();
            (n == rendered - 1).then_some(())
        })
        .await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let after = cms.get("workflow-controller-configmap").await.unwrap();
        assert_eq!(after.resource_version(), before.resource_version(), "{ns}");
        assert_eq!(after.metadata.labels, before.metadata.labels, "{ns}");
    }

    // Freed by its owner: flotilla stamps its own at once, not at the next full resync (600 s).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "taken-b");
    cms.delete("workflow-controller-configmap", &DeleteParams::default())
        .await
        .unwrap();
    eventually_within(
        Duration::from_secs(30),
        "the freed name to be stamped",
        || async {
            let n = fleet.stamped_for(&client, "taken-b").await.len();
            (n == rendered).then_some(())
        },
    )
    .await;

    // An object of flotilla's that someone took the namespace label off is still its own (its
    // apply in managedFields and its hash say so, issue 30/3 item 4): the label is drift,
    // taken back, not a Conflict for good.
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(client.clone(), "taken-a");
    let detach = serde_json::json!({"metadata": {"labels": {"flotilla.dev/namespace": null}}});
    let detached = roles
        .patch("argo-role", &PatchParams::default(), &merge(detach))
        .await
        .unwrap();
    let repaired = eventually("the detached Role's label taken back", || async {
        let role = roles.get("argo-role").await.ok()?;
        let label = role.labels().get("flotilla.dev/namespace").cloned();
        (label.as_deref() == Some("taken-a")).then_some(role)
    })
    .await;
    assert_ne!(repaired.resource_version(), detached.resource_version());
    assert!(
        !flotilla
            .logs()
            .contains("argo-role exists and was not created by flotilla"),
        "reported as another's"
    );
    delete_namespaces(&client, &["taken-a", "taken-b", "taken-c", "taken-d"]).await;
}

#[tokio::test]
async fn template_and_values_changes_roll_out_to_every_namespace() {
    let client = admin().await;
    let mut fleet = Fleet::new("rollout");
    let names = ["rollout-a", "rollout-b", "rollout-c"];
    let flotilla = fleet.start();
    for name in names {
        fleet.namespace(&client, name, true).await;
    }
    for name in names {
        fleet.wait_stamped(&client, name).await;
    }
    flotilla.stop();
    let audit = AuditWindow::open();

    fleet.values["controllerImage"] = "quay.io/argoproj/workflow-controller:v4.1.1".into();
    fleet.remove_template("controller-metrics-service.yaml");
    let role = std::fs::read_to_string(fleet.templates.join("executor-role.yaml")).unwrap();
    fleet.add_template(
        "executor-role.yaml",
        &role.replace("[create, patch]", "[create, patch, get]"),
    );
    let _flotilla = fleet.start();
    for name in names {
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), name);
        eventually(&format!("the new image in {name}"), || async {
            let d = deploys.get("workflow-controller").await.ok()?;
            let image = d.spec.template.spec?.containers[0].image.clone()?;
            image.ends_with(":v4.1.1").then_some(())
        })
        .await;
        let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(client.clone(), name);
        eventually(&format!("the new Role rules in {name}"), || async {
            let role = roles.get("argo-workflow").await.ok()?;
            (role.rules?[0].verbs.len() == 3).then_some(())
        })
        .await;
        // A template that is gone takes its objects with it.
        let services: Api<k8s_openapi::api::core::v1::Service> =
            Api::namespaced(client.clone(), name);
        eventually(&format!("the metrics Service pruned in {name}"), || async {
            services
                .get_opt("workflow-controller-metrics")
                .await
                .ok()?
                .is_none()
                .then_some(())
        })
        .await;
        let stamped = fleet.wait_stamped(&client, name).await;
        let revisions: std::collections::BTreeSet<_> = stamped
            .iter()
            .map(|o| o.annotations()["flotilla.dev/revision"].clone())
            .collect();
        assert_eq!(
            revisions.len(),
            1,
            "one revision across {name}: {revisions:?}"
        );
    }
    // Every object's hash annotation, as the watches show it, says it was rendered otherwise:
    // the rollout applies without reading them first. GETs of Deployments are left out: they
    // are read again whenever their status changes (their health is the NamespaceWorker's).
    let in_fleet = |e: &serde_json::Value| names.iter().any(|n| e["objectRef"]["namespace"] == *n);
    let requests = audit.requests(FLOTILLA_USER, None);
    let reads = requests
        .iter()
        .filter(|e| e["verb"] == "get" && e["objectRef"]["resource"] != "deployments")
        .filter(|e| in_fleet(e))
        .count();
    // The window holds the rollout: its applies (PATCH) of every object of the three namespaces.
    let applies = requests
        .iter()
        .filter(|e| e["verb"] == "patch" && in_fleet(e))
        .count();
    println!(
        "rollout over {} namespaces: {applies} applies, {reads} reads",
        names.len()
    );
    assert!(applies >= 3 * 8, "{applies} applies seen in the rollout");
    assert_eq!(reads, 0, "the rollout read objects it was about to apply");
    delete_namespaces(&client, &names).await;
}

const NOTE: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: team-note
data:
  note: {{ namespace.annotations["e2e.flotilla.dev/note"] }}
  argo: {% raw %}"{{workflow.name}}"{% endraw %}
"#;

#[tokio::test]
async fn an_injection_payload_in_an_annotation_adds_no_objects_or_fields() {
    let client = admin().await;
    let fleet = Fleet::new("inject");
    fleet.add_template("note.yaml", NOTE);
    // Not among the repository's templates: an admin grants its name.
    let _grant = Grant::names("team-note", Kind::ConfigMap, &["team-note"]);
    let _flotilla = fleet.start();
    let payload = "x\"\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: inject-pwned\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}]\n{{ values }} {% raw %}\nextra: field";
    let labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
    let annotations = BTreeMap::from([("e2e.flotilla.dev/note".to_string(), payload.to_string())]);
    create_namespace(&client, "inject-a", labels, annotations).await;
    let stamped = fleet
        .wait_stamped_annotated(&client, "inject-a", &[("e2e.flotilla.dev/note", payload)])
        .await;
    assert_eq!(
        stamped.len(),
        10,
        "the default set plus the note, nothing more"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "inject-a");
    let data = cms.get("team-note").await.unwrap().data.unwrap();
    assert_eq!(data.len(), 2, "{data:?}");
    assert_eq!(data["note"], payload);
    assert_eq!(data["argo"], "{{workflow.name}}");
    let crbs: Api<ClusterRoleBinding> = Api::all(client.clone());
    assert!(crbs.get_opt("inject-pwned").await.unwrap().is_none());
    delete_namespaces(&client, &["inject-a"]).await;
}
