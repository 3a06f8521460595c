//! The optional argo-server (`values.argoServer.enabled`): turned on, its five objects are
//! stamped next to the controller's nine, under flotilla's token and the generated ClusterRole
//! alone (its names are there although the repository's config leaves it off); turned off in
//! the running flotilla's config, they are pruned and the controller's objects stay; on again,
//! they are back.

use crate::harness::*;
use flotilla::status::NamespaceWorker;
use kube::api::{Api, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;

/// What argo-server adds, by kind and name.
const ARGO_SERVER: [(&str, &str); 5] = [
    ("Deployment", "argo-server"),
    ("Role", "argo-server-role"),
    ("RoleBinding", "argo-server-binding"),
    ("Service", "argo-server"),
    ("ServiceAccount", "argo-server"),
];

/// Each stamped object's uid, by kind and name.
fn uids(objects: &[kube::api::DynamicObject]) -> BTreeMap<(String, String), String> {
    objects
        .iter()
        .map(|o| {
            let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            ((kind, o.name_any()), o.uid().unwrap_or_default())
        })
        .collect()
}

#[tokio::test]
async fn argo_server_is_stamped_when_on_and_pruned_when_turned_off_live() {
    let client = admin().await;
    let mut fleet = Fleet::new("argo-server");
    fleet.values["argoServer"]["enabled"] = serde_json::json!(true);
    let ns = "argo-server-a";
    fleet.namespace(&client, ns, true).await;
    let flotilla = fleet.start();

    // On: exactly the rendered set, the controller's nine and argo-server's five.
    let on = fleet.wait_stamped(&client, ns).await;
    assert_eq!(on.len(), 14, "{:?}", uids(&on).keys());
    let stamped = uids(&on);
    for (kind, name) in ARGO_SERVER {
        assert!(
            stamped.contains_key(&(kind.to_string(), name.to_string())),
            "{kind} {name} not stamped: {:?}",
            stamped.keys()
        );
    }
    // Its Role is Argo's, as rendered: flotilla may write a Role of that name with those
    // rights (escalate) because the generated ClusterRole lists it.
    let rendered = fleet.render(ns, &[]);
    let want = rendered
        .iter()
        .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == "argo-server-role")
        .unwrap();
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(client.clone(), ns);
    let live = roles.get("argo-server-role").await.unwrap();
    assert_eq!(serde_json::to_value(&live.rules).unwrap(), want["rules"]);
    // The worker still follows the controller, whose Deployment sorts after argo-server's.
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let controller_image = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    eventually("the worker showing the controller's image", || async {
        let worker = workers.get_opt(ns).await.ok()??;
        (worker.status?.image == controller_image).then_some(())
    })
    .await;

    // Off, in the config of the running flotilla: the five are pruned, the nine stay (the same
    // objects, never deleted and made again).
    fleet.values["argoServer"]["enabled"] = serde_json::json!(false);
    fleet.config_file();
    flotilla.wait_log("config reloaded").await;
    let off = eventually_within(
        Duration::from_secs(120),
        "argo-server's objects pruned",
        || async {
            let now = fleet.stamped_for(&client, ns).await;
            (now.len() == 9).then_some(now)
        },
    )
    .await;
    let left = uids(&off);
    for (kind, name) in ARGO_SERVER {
        assert!(
            !left.contains_key(&(kind.to_string(), name.to_string())),
            "{kind} {name} still there"
        );
    }
    for (key, uid) in &left {
        assert_eq!(stamped.get(key), Some(uid), "{key:?} was made again");
    }
    // Exactly the set rendered now, at its content hashes.
    fleet.wait_stamped(&client, ns).await;
    assert!(absent(&roles, "argo-server-role").await);

    // On again: the first revision's content, the newest again, and the five are back.
    fleet.values["argoServer"]["enabled"] = serde_json::json!(true);
    fleet.config_file();
    // Fourteen objects exist before the last of the controller's nine is updated to the
    // revision, so wait for their content, not their count.
    let want = stamped_set(&on);
    eventually_within(
        Duration::from_secs(120),
        "argo-server's objects back, all fourteen at the first revision's content",
        || async { (stamped_set(&fleet.stamped_for(&client, ns).await) == want).then_some(()) },
    )
    .await;
    delete_namespaces(&client, &[ns]).await;
}
