//! The config while flotilla runs: an edit to the file or the templates becomes a new revision
//! without a restart, a broken one changes nothing and says why, and a selector edit that would
//! reap most of the fleet waits for `flotilla rollout resume`.

use crate::harness::*;
use flotilla::rollout::fleet::Fleet as FleetObject;
use flotilla::status::NamespaceWorker;
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment};
use kube::api::{Api, ListParams, ResourceExt};
use std::collections::BTreeMap;
use std::time::Duration;

const IMAGE: &str = "quay.io/argoproj/workflow-controller";

/// The image of each of `names`' controller Deployments, where there is one.
async fn images(client: &kube::Client, names: &[String]) -> BTreeMap<String, String> {
    let deployments: Api<Deployment> = Api::all(client.clone());
    let listed = deployments
        .list(&ListParams::default().labels("app.kubernetes.io/name=workflow-controller"))
        .await
        .unwrap();
    listed
        .items
        .into_iter()
        .filter(|d| names.contains(&d.namespace().unwrap_or_default()))
        .filter_map(|d| {
            let image = d.spec.template.spec?.containers.first()?.image.clone()?;
            Some((d.metadata.namespace?, image))
        })
        .collect()
}

async fn wait_images(client: &kube::Client, names: &[String], image: &str) {
    eventually_within(
        Duration::from_secs(120),
        &format!("every namespace at {image}"),
        || async {
            let seen = images(client, names).await;
            (seen.len() == names.len() && seen.values().all(|i| i == image)).then_some(())
        },
    )
    .await;
}

/// Waits until the Fleet's status passes `check`, and returns the Fleet.
async fn wait_fleet<F>(client: &kube::Client, instance: &str, what: &str, check: F) -> FleetObject
where
    F: Fn(&FleetObject) -> bool,
{
    eventually(what, || async {
        fleet_object(client, instance)
            .await
            .filter(|f| f.status.is_some() && check(f))
    })
    .await
}

async fn revisions(client: &kube::Client, instance: &str) -> usize {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    let params = ListParams::default().labels(&format!("flotilla.dev/instance={instance}"));
    api.list(&params).await.unwrap().items.len()
}

/// Keeps a failing check of the Fleet's message readable.
fn message(fleet: &FleetObject) -> String {
    fleet
        .status
        .as_ref()
        .map(|s| s.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_config_edit_rolls_out_without_a_restart_and_a_broken_one_changes_nothing() {
    let client = admin().await;
    let mut fleet = Fleet::new("live");
    forget_revisions(&client, &fleet.instance).await;
    let names: Vec<String> = ["live-a", "live-b", "live-c"].map(String::from).into();
    for name in &names {
        fleet.namespace(&client, name, true).await;
    }
    let flotilla = fleet.start();
    let first = fleet.values["controllerImage"]
        .as_str()
        .unwrap()
        .to_string();
    wait_images(&client, &names, &first).await;
    let at_first = wait_fleet(&client, &fleet.instance, "the Fleet", |_| true).await;
    let first_revision = at_first.status.unwrap().target_revision;

    // An edit of the values: a new revision, rolled out by the running process.
    let edited = format!("{IMAGE}:v9-live");
    fleet.values["controllerImage"] = serde_json::json!(edited);
    fleet.config_file();
    flotilla.wait_log("config reloaded").await;
    wait_images(&client, &names, &edited).await;
    let fleet_at = wait_fleet(&client, &fleet.instance, "the new target", |f| {
        f.status.as_ref().unwrap().target_revision == first_revision + 1
    })
    .await;
    let kept = revisions(&client, &fleet.instance).await;

    // A broken config: refused, in the log, an Event and the Fleet's message; nothing moves.
    let path = fleet.config_file();
    std::fs::write(&path, "values: [\n").unwrap();
    flotilla.wait_log("config change refused").await;
    let refused = wait_fleet(&client, &fleet.instance, "the refusal shown", |f| {
        message(f).contains("refused") && message(f).contains("flotilla.yaml")
    })
    .await;
    println!("{}", message(&refused));
    assert!(message(&refused).contains("line "), "{}", message(&refused));
    let uid = fleet_at.uid().unwrap();
    eventually("a ConfigRefused Event on the Fleet", || async {
        let found = events(&client, "Fleet", &uid, "ConfigRefused").await;
        found
            .iter()
            .any(|e| e.message.as_deref().unwrap_or("").contains("flotilla.yaml"))
            .then_some(())
    })
    .await;

    // A broken template: refused with its file and line.
    fleet.config_file();
    fleet.add_template(
        "broken.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{ oops\n",
    );
    let refused = wait_fleet(&client, &fleet.instance, "the broken template shown", |f| {
        message(f).contains("broken.yaml:6")
    })
    .await;
    println!("{}", message(&refused));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        images(&client, &names).await.values().collect::<Vec<_>>(),
        vec![&edited; 3],
        "a refused change moved a namespace"
    );
    assert_eq!(revisions(&client, &fleet.instance).await, kept);

    // Mended: the refusal is gone and the revision in force is the same one. A key of the
    // process itself waits for a restart, and says so.
    fleet.remove_template("broken.yaml");
    fleet
        .settings
        .insert("concurrency".into(), serde_json::json!(3));
    fleet.config_file();
    let mended = wait_fleet(&client, &fleet.instance, "the refusal gone", |f| {
        !message(f).contains("refused") && message(f).contains("next restart: concurrency")
    })
    .await;
    assert_eq!(
        mended.status.unwrap().target_revision,
        first_revision + 1,
        "mending made a new revision"
    );
    assert_eq!(revisions(&client, &fleet.instance).await, kept);
    flotilla.stop();
    delete_namespaces(&client, &names).await;
}

#[tokio::test]
async fn a_selector_edit_that_would_reap_most_of_the_fleet_waits_for_resume() {
    let client = admin().await;
    // The brake as it comes: more than 10% of the fleet, and at least 5.
    let mut fleet =
        Fleet::new("brake").with("rollout", serde_json::json!({"maxUnavailable": "100%"}));
    forget_revisions(&client, &fleet.instance).await;
    // Forty namespaces, ten of which the new selector keeps, and one that opts out alone.
    let names: Vec<String> = (0..40).map(|i| format!("brake-{i:02}")).collect();
    let kept: Vec<String> = names[..10].to_vec();
    let solo = "brake-solo".to_string();
    for name in names.iter().chain([&solo]) {
        let mut labels = BTreeMap::from([(fleet.label.clone(), "on".to_string())]);
        if kept.contains(name) {
            labels.insert("keep".into(), "yes".into());
        }
        create_namespace(&client, name, labels, BTreeMap::new()).await;
    }
    let flotilla = fleet.start();
    let all: Vec<String> = names.iter().chain([&solo]).cloned().collect();
    eventually_within(
        Duration::from_secs(240),
        "every namespace stamped",
        || async { (images(&client, &all).await.len() == all.len()).then_some(()) },
    )
    .await;

    // One namespace opting out on its own is reaped at once.
    fleet.set_opt_in(&client, &solo, None).await;
    fleet.wait_reaped(&client, &solo).await;
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    eventually("its NamespaceWorker gone", || async {
        absent(&workers, &solo).await.then_some(())
    })
    .await;

    // The selector edit would reap 30 of 40: held.
    let selector = format!("{}=on,keep=yes", fleet.label);
    fleet
        .settings
        .insert("selector".into(), serde_json::json!(selector));
    fleet.config_file();
    flotilla.wait_log("config reloaded").await;
    let held = wait_fleet(&client, &fleet.instance, "30 namespaces held", |f| {
        f.status.as_ref().unwrap().reap_held == 30
    })
    .await;
    println!("{}", message(&held));
    assert!(message(&held).contains("flotilla rollout resume"));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        images(&client, &names).await.len(),
        40,
        "a namespace was reaped while the brake held"
    );
    let listed = workers.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(
        listed
            .iter()
            .filter(|w| names.contains(&w.name_any()))
            .count(),
        40
    );
    let uid = held.uid().unwrap();
    assert_eq!(events(&client, "Fleet", &uid, "ReapingHeld").await.len(), 1);
    let (code, out) = fleet.cli(&["rollout", "status"]);
    assert_eq!(code, 1, "held: {out}");
    assert!(out.contains("holding the reaping of 30"), "{out}");

    // Confirmed: the 30 are reaped, the 10 kept, and the confirmation is spent.
    assert_eq!(fleet.cli(&["rollout", "resume"]).0, 0);
    for name in &names[10..] {
        fleet.wait_reaped(&client, name).await;
    }
    assert_eq!(images(&client, &kept).await.len(), 10);
    wait_fleet(&client, &fleet.instance, "the brake let go", |f| {
        f.status.as_ref().unwrap().reap_held == 0 && f.spec.confirm_reaping.is_none()
    })
    .await;
    flotilla.stop();
    delete_namespaces(&client, &all).await;
}

/// A template holding `<`, `>` and `&`, as a shell script or a Jinja comparison does.
const SCRIPT_TEMPLATE: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: e2e-script
data:
  run.sh: "test -s /tmp/in && sort < /tmp/in > /tmp/out"
{% if values.parallelism > 55 %}
  many: "yes"
{% endif %}
"#;

#[tokio::test]
async fn a_config_back_at_an_earlier_revisions_content_is_the_newest_again() {
    let client = admin().await;
    let mut fleet = Fleet::new("back");
    forget_revisions(&client, &fleet.instance).await;
    fleet.add_template("script.yaml", SCRIPT_TEMPLATE);
    let _grant = Grant::names("back", flotilla::kinds::Kind::ConfigMap, &["e2e-script"]);
    let ns = "back-a";
    fleet.namespace(&client, ns, true).await;
    let flotilla = fleet.start();
    fleet.wait_stamped(&client, ns).await;
    let target = |number: i64| {
        let instance = fleet.instance.clone();
        let client = client.clone();
        async move {
            wait_fleet(
                &client,
                &instance,
                &format!("revision {number} the target"),
                |f| f.status.as_ref().unwrap().target_revision == number,
            )
            .await
        }
    };
    target(1).await;
    fleet.values["parallelism"] = serde_json::json!(60);
    fleet.config_file();
    flotilla.wait_log("config reloaded").await;
    target(2).await;
    fleet.wait_stamped(&client, ns).await;

    // Back to the first content: that revision is renumbered the newest, 3, and rolls out.
    fleet.values["parallelism"] = serde_json::json!(50);
    fleet.config_file();
    let back = target(3).await;
    assert!(!message(&back).contains("refused"), "{}", message(&back));
    fleet.wait_stamped(&client, ns).await;
    assert_eq!(revisions(&client, &fleet.instance).await, 2);
    delete_namespaces(&client, &[ns]).await;
}

/// A restart with the content before the newest, moments after the newest was recorded (an
/// admin's quick revert, or a `helm rollback` right after an upgrade): files read after the
/// recording are the admin's, even within the same second, and that content is the newest again.
#[tokio::test]
async fn a_revert_moments_after_a_recording_is_the_newest_again() {
    let client = admin().await;
    let mut fleet = Fleet::new("revert");
    forget_revisions(&client, &fleet.instance).await;
    let ns = "revert-a";
    fleet.namespace(&client, ns, true).await;
    let mut flotilla = fleet.start();
    let target = |number: i64| {
        let instance = fleet.instance.clone();
        let client = client.clone();
        async move {
            wait_fleet(
                &client,
                &instance,
                &format!("revision {number} the target"),
                |f| {
                    f.status
                        .as_ref()
                        .is_some_and(|s| s.target_revision == number)
                },
            )
            .await
        }
    };
    target(1).await;
    // Several rounds: each restart lands at a different point of the recording's second.
    for number in 2..=5 {
        flotilla.wait_log("revision recorded as the newest").await;
        let parallelism = if number % 2 == 0 { 60 } else { 50 };
        fleet.values["parallelism"] = serde_json::json!(parallelism);
        flotilla.kill();
        flotilla = fleet.start();
        target(number).await;
    }
    fleet.wait_stamped(&client, ns).await;
    flotilla.stop();
    delete_namespaces(&client, &[ns]).await;
}
