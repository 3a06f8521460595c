//! The README's "Install with Helm", command by command, with the real helm (e2e/tools.sh)
//! against the local control plane. With no kubelet the chart's pods stay Pending, so flotilla
//! runs as the harness runs it, a process, under the chart's ServiceAccount, reading the chart's
//! two ConfigMaps from files as the pod would from its volumes (copied again after an upgrade,
//! as the kubelet would). Stand-ins: the release and its namespace, the label and the opted-in
//! namespace are this test's own, and the install sets this test's selector and instance and
//! moves the whole fleet at once (pods never become ready here).

use crate::harness::*;
use crate::install::{readme_blocks, sh, shell_commands, step_of};
use flotilla::status::NamespaceWorker;
use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

mod volumes;

use volumes::Volumes;

const SECTION: &str = "## Install with Helm";
const RELEASE: &str = "e2e-helm";
const NAMESPACE: &str = "e2e-helm";
/// The chart's name for its objects when the release is not named flotilla.
const FULLNAME: &str = "e2e-helm-flotilla";
const OPTED_IN: &str = "helm-a";
/// How each of the README's commands starts, in the README's order.
const STEPS: [&str; 5] = [
    "helm install",
    "kubectl label namespace",
    "kubectl get nsw",
    "helm upgrade",
    "helm uninstall",
];

/// Each stamped object of the opted-in namespace by identity: its uid and resourceVersion.
type Stamped = BTreeMap<Identity, (String, String)>;

async fn stamped(fleet: &Fleet, client: &Client) -> Stamped {
    fleet
        .stamped_for(client, OPTED_IN)
        .await
        .into_iter()
        .map(|o| {
            let id = identity(&serde_json::to_value(&o).unwrap());
            (id, (o.uid().unwrap(), o.resource_version().unwrap()))
        })
        .collect()
}

/// Waits until exactly what `volumes` renders is stamped.
async fn wait_stamped(fleet: &Fleet, client: &Client, volumes: &Volumes, what: &str) -> Stamped {
    let want = volumes.rendered(&format!("{}=on", fleet.label));
    eventually(what, || async {
        let have = stamped(fleet, client).await;
        (have.keys().cloned().collect::<BTreeSet<_>>() == want).then_some(have)
    })
    .await
}

/// The chart's own objects that exist now, by kind and name.
async fn chart_objects(client: &Client) -> Vec<String> {
    let in_release = |name: String| (NAMESPACE, name);
    let mut found = Vec::new();
    let deployments = Api::<Deployment>::namespaced(client.clone(), NAMESPACE);
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE);
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE);
    if !absent(&deployments, FULLNAME).await {
        found.push(format!("Deployment {FULLNAME}"));
    }
    if !absent(&accounts, FULLNAME).await {
        found.push(format!("ServiceAccount {FULLNAME}"));
    }
    for name in ["config", "templates"].map(|n| format!("{FULLNAME}-{n}")) {
        if !absent(&config_maps, &name).await {
            found.push(format!("ConfigMap {name}"));
        }
    }
    let roles = [
        in_release(format!("{FULLNAME}-leader-election")),
        in_release(format!("{FULLNAME}-revisions")),
        ("default", format!("{FULLNAME}-events")),
    ];
    for (namespace, name) in roles {
        if !absent(&Api::<Role>::namespaced(client.clone(), namespace), &name).await {
            found.push(format!("Role {namespace}/{name}"));
        }
    }
    for name in [FULLNAME.to_string(), format!("{FULLNAME}-stamp")] {
        if !absent(&Api::<ClusterRole>::all(client.clone()), &name).await {
            found.push(format!("ClusterRole {name}"));
        }
        if !absent(&Api::<ClusterRoleBinding>::all(client.clone()), &name).await {
            found.push(format!("ClusterRoleBinding {name}"));
        }
    }
    found
}

/// Removes what an earlier, interrupted run left: the release, its namespace, the Fleet.
async fn clean(client: &Client) {
    let _ = Command::new("helm")
        .args(["uninstall", RELEASE, "--namespace", NAMESPACE])
        .env("KUBECONFIG", &env().admin_kubeconfig)
        .output();
    delete_namespaces_and_wait(client, &[NAMESPACE, OPTED_IN]).await;
    forget_revisions(client, RELEASE).await;
}

#[tokio::test]
async fn install_upgrade_and_uninstall_with_helm_as_the_readme_says() {
    let client = admin().await;
    // Fleet::new("helm"): instance e2e-helm and label e2e.flotilla.dev/helm, the stand-ins'.
    let fleet = Fleet::new("helm");
    assert_eq!(fleet.instance, RELEASE);
    clean(&client).await;
    create_namespace(&client, OPTED_IN, BTreeMap::new(), BTreeMap::new()).await;
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&env().repo, work.path().join("flotilla")).unwrap();
    // The admission policy for this release's ServiceAccount, config and templates, as the
    // chart's values.yaml says to give it for a selector of one's own.
    let policy_fleet = Fleet::new("helm").with("namespace", NAMESPACE.into());
    let policy = work.path().join("admission-policy.yaml");
    let account = format!("{NAMESPACE}/{FULLNAME}");
    let (code, printed) = policy_fleet.cli(&[
        "rbac",
        "--admission-policy",
        "--service-account",
        &account,
        "--set",
        "argoServer.enabled=true",
    ]);
    assert_eq!(code, 0, "flotilla rbac --admission-policy");
    std::fs::write(&policy, printed).unwrap();
    let settings = format!(
        " --set config.selector={}=on,config.instance={},config.rollout.maxUnavailable=100% \
         --set-file admissionPolicy={}",
        fleet.label,
        fleet.instance,
        policy.display()
    );
    let stand_ins = [
        (
            "helm install flotilla ".to_string(),
            format!("helm install {RELEASE} "),
        ),
        (
            "helm upgrade flotilla ".to_string(),
            format!("helm upgrade {RELEASE} "),
        ),
        (
            "helm uninstall flotilla ".to_string(),
            format!("helm uninstall {RELEASE} "),
        ),
        (
            "--namespace flotilla-system".to_string(),
            format!("--namespace {NAMESPACE}"),
        ),
        (
            "--create-namespace".to_string(),
            format!("--create-namespace{settings}"),
        ),
        ("team-a".to_string(), OPTED_IN.to_string()),
        (
            "flotilla.dev/enabled=true".to_string(),
            format!("{}=on", fleet.label),
        ),
    ];
    let (blocks, _) = readme_blocks(SECTION);
    let (commands, used) = shell_commands(&blocks, &stand_ins);
    assert!(
        used.iter().all(|u| *u),
        "every stand-in applies: {stand_ins:?} {used:?}"
    );
    let volumes = Volumes::new();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let mut running = None;
    let mut before_uninstall = None;
    let mut steps = Vec::new();
    for command in &commands {
        let step = step_of(&STEPS, command);
        steps.push(step);
        match step {
            "helm install" => {
                sh(work.path(), command);
                let deployment = deployments.get(FULLNAME).await.unwrap();
                let pod = deployment.spec.template.spec.unwrap();
                let image = pod.containers[0].image.clone().unwrap();
                let version = env!("CARGO_PKG_VERSION");
                assert_eq!(image, format!("registry.example.com/flotilla:{version}"));
                assert_eq!(pod.service_account_name.as_deref(), Some(FULLNAME));
                volumes.sync(&client).await;
                running = Some(volumes.start());
            }
            "kubectl label namespace" => {
                sh(work.path(), command);
                wait_stamped(&fleet, &client, &volumes, "helm-a stamped").await;
            }
            "kubectl get nsw" => {
                let shown = eventually("kubectl get nsw to show helm-a", || async {
                    let out = Command::new("bash")
                        .args(["-c", command])
                        .env("KUBECONFIG", &env().admin_kubeconfig)
                        .output()
                        .ok()?;
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    (out.status.success() && text.contains(OPTED_IN)).then_some(text)
                })
                .await;
                assert!(shown.starts_with("NAME "), "{shown}");
            }
            "helm upgrade" => {
                let flotilla = running.as_ref().expect("flotilla runs by now");
                let pod_before = deployments.get(FULLNAME).await.unwrap();
                let fleet_before = fleet_object(&client, &fleet.instance).await.unwrap();
                let revision_before = fleet_before.status.unwrap().target_revision;
                sh(work.path(), command);
                volumes.sync(&client).await;
                // Rolled out through the Fleet: a new revision, helm-a moved to it.
                let stamped_now =
                    wait_stamped(&fleet, &client, &volumes, "helm-a at the upgraded config").await;
                let fleet_now = eventually("the Fleet at the new revision, updated", || async {
                    let status = fleet_object(&client, &fleet.instance).await?.status?;
                    (status.target_revision == revision_before + 1 && status.updated == "1/1")
                        .then_some(status)
                })
                .await;
                assert_eq!(fleet_now.total, 1);
                let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), OPTED_IN);
                let stamped_config = config_maps
                    .get("workflow-controller-configmap")
                    .await
                    .unwrap();
                let data = stamped_config.data.unwrap();
                assert_eq!(data["parallelism"], "100", "the upgrade's value, stamped");
                assert!(stamped_now.len() > 1);
                // No restart: the same process took it in, the pods' template is unchanged.
                assert!(
                    flotilla.logs().contains("config reloaded"),
                    "{}",
                    flotilla.logs()
                );
                let pod_after = deployments.get(FULLNAME).await.unwrap();
                assert_eq!(
                    pod_after.metadata.generation,
                    pod_before.metadata.generation
                );
                assert_eq!(pod_after.spec.template, pod_before.spec.template);
            }
            "helm uninstall" => {
                let kept = stamped(&fleet, &client).await;
                let workers: Api<NamespaceWorker> = Api::all(client.clone());
                let worker = workers.get(OPTED_IN).await.unwrap();
                let fleet_uid = fleet_object(&client, &fleet.instance).await.unwrap().uid();
                before_uninstall = Some((kept, worker.uid(), fleet_uid));
                sh(work.path(), command);
                // The pods go with the Deployment: SIGTERM, as the kubelet stops them.
                running.take().unwrap().stop();
                assert_eq!(chart_objects(&client).await, Vec::<String>::new());
            }
            _ => unreachable!("every step is matched"),
        }
    }
    assert_eq!(steps, STEPS, "the README's commands, in this order");

    // Left in place, whole: every object stamped for helm-a as it was, its NamespaceWorker, the
    // Fleet and the revisions; the CRDs.
    let (kept, worker_uid, fleet_uid) = before_uninstall.unwrap();
    assert_eq!(stamped(&fleet, &client).await, kept);
    let rendered = volumes.rendered(&format!("{}=on", fleet.label));
    assert_eq!(kept.keys().cloned().collect::<BTreeSet<_>>(), rendered);
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    assert_eq!(workers.get(OPTED_IN).await.unwrap().uid(), worker_uid);
    assert_eq!(
        fleet_object(&client, &fleet.instance).await.unwrap().uid(),
        fleet_uid
    );
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), NAMESPACE);
    let params = ListParams::default().labels(&format!("flotilla.dev/instance={}", fleet.instance));
    assert!(revisions.list(&params).await.unwrap().items.len() >= 2);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in ["namespaceworkers.flotilla.dev", "fleets.flotilla.dev"] {
        assert!(!absent(&crds, crd).await, "{crd} deleted");
    }

    // Installed again with the values it had, flotilla takes the fleet over where it was: the
    // same objects, none written (same uids and resourceVersions), the same NamespaceWorker.
    let install = commands
        .iter()
        .find(|c| c.starts_with("helm install"))
        .unwrap();
    let upgrade = commands
        .iter()
        .find(|c| c.starts_with("helm upgrade"))
        .unwrap();
    let upgraded = upgrade.split(" --reuse-values").nth(1).unwrap();
    sh(work.path(), &format!("{install}{upgraded}"));
    volumes.sync(&client).await;
    let flotilla = volumes.start();
    flotilla.wait_log("initial sync complete").await;
    assert_eq!(stamped(&fleet, &client).await, kept);
    assert_eq!(workers.get(OPTED_IN).await.unwrap().uid(), worker_uid);
    flotilla.stop();
    clean(&client).await;
}

/// Runs the README's install with a value of the wrong type and one missing: each stops helm
/// with the schema's message, and no release nor any of the chart's objects is left.
#[tokio::test]
async fn a_bad_value_stops_helm_install_with_the_schemas_message() {
    let client = admin().await;
    let release = "e2e-helm-bad";
    for (set, message) in [
        ("replicas=two", "- at '/replicas': got string, want integer"),
        (
            "image.repository=null",
            "- at '/image': missing property 'repository'",
        ),
    ] {
        let out = Command::new("helm")
            .args(["install", release])
            .arg(env().repo.join("charts/flotilla"))
            .args(["--namespace", release, "--create-namespace", "--set", set])
            .env("KUBECONFIG", &env().admin_kubeconfig)
            .output()
            .expect("helm on PATH (eval \"$(bash e2e/tools.sh)\")");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--set {set} installed");
        assert!(err.contains(message), "--set {set}: {err}");
        assert!(err.contains("INSTALLATION FAILED"), "{err}");
        let status = Command::new("helm")
            .args(["status", release, "--namespace", release])
            .env("KUBECONFIG", &env().admin_kubeconfig)
            .output()
            .unwrap();
        assert!(!status.status.success(), "a release {release} was recorded");
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), release);
        assert!(
            deployments
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }
    delete_namespaces(&client, &[release]).await;
}
