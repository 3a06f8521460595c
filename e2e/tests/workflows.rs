//! Workflows a namespace's controller ignores, as its NamespaceWorker shows them: Argo's CRD
//! absent and then installed while flotilla runs, a Workflow without the instanceid label and
//! the fix, `instanceID: none`, and the README's "Run your first workflow" command by command.
//! No Argo controller runs in these tests (real_argo.rs runs it): what is checked is what
//! flotilla tells.

use crate::argo_world::install_argo_crds;
use crate::harness::*;
use flotilla::status::{Condition, NamespaceWorker};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use std::time::Duration;

const CRD: &str = "workflows.argoproj.io";
const LABEL: &str = "workflows.argoproj.io/controller-instanceid";

fn workflows(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Workflow");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

async fn remove_workflow_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let _ = crds.delete(CRD, &Default::default()).await;
    eventually_within(
        Duration::from_secs(120),
        "the Workflow CRD gone",
        || async { absent(&crds, CRD).await.then_some(()) },
    )
    .await;
}

async fn create_workflow(client: &kube::Client, namespace: &str, name: &str, label: Option<&str>) {
    let mut metadata = serde_json::json!({"name": name});
    if let Some(id) = label {
        metadata["labels"] = serde_json::json!({LABEL: id});
    }
    let workflow: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": metadata,
        "spec": {"entrypoint": "main", "templates": [{"name": "main", "container": {"image": "busybox"}}]},
    }))
    .unwrap();
    workflows(client, namespace)
        .create(&PostParams::default(), &workflow)
        .await
        .unwrap();
}

/// The namespace's `WorkflowsIgnored` condition and count, once `check` accepts them.
async fn wait_ignored<F>(
    client: &kube::Client,
    namespace: &str,
    what: &str,
    check: F,
) -> (Condition, Option<u32>)
where
    F: Fn(&Condition, Option<u32>) -> bool,
{
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    eventually(&format!("{namespace}: {what}"), || async {
        let status = workers.get_opt(namespace).await.ok()??.status?;
        let condition = status
            .conditions
            .iter()
            .find(|c| c.type_ == "WorkflowsIgnored")?
            .clone();
        check(&condition, status.workflows_ignored).then_some((condition, status.workflows_ignored))
    })
    .await
}

fn is(status: &'static str, reason: &'static str) -> impl Fn(&Condition, Option<u32>) -> bool {
    move |c, _| c.status == status && c.reason == reason
}

#[tokio::test]
async fn ignored_workflows_show_on_the_namespace_worker_from_a_missing_crd_to_the_fix() {
    let client = admin().await;
    remove_workflow_crd(&client).await;
    let fleet = Fleet::new("wfcount");
    let flotilla = fleet.start();
    fleet.namespace(&client, "wfcount-a", true).await;
    let (missing, count) = wait_ignored(
        &client,
        "wfcount-a",
        "CRD missing",
        is("Unknown", "WorkflowCRDMissing"),
    )
    .await;
    assert!(
        missing.message.contains("install Argo's CRDs"),
        "{}",
        missing.message
    );
    assert_eq!(count, None);
    // Looked for every 5 s, said once.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let said = flotilla
        .logs()
        .matches("Workflow CRD (workflows.argoproj.io) is not installed")
        .count();
    assert_eq!(
        said,
        1,
        "one log line while the CRD is missing:\n{}",
        flotilla.logs()
    );

    install_argo_crds(&client).await;
    let (none, count) =
        wait_ignored(&client, "wfcount-a", "counting", is("False", "NoneIgnored")).await;
    assert_eq!(count, Some(0), "{none:?}");

    create_workflow(&client, "wfcount-a", "hello", None).await;
    create_workflow(&client, "wfcount-a", "labelled", Some("wfcount-a")).await;
    let (ignored, count) = wait_ignored(
        &client,
        "wfcount-a",
        "one ignored",
        is("True", "InstanceIDMismatch"),
    )
    .await;
    assert_eq!(count, Some(1));
    for fix in [
        "kubectl -n wfcount-a label workflow NAME workflows.argoproj.io/controller-instanceid=wfcount-a",
        "argo submit -n wfcount-a --instanceid wfcount-a",
    ] {
        assert!(ignored.message.contains(fix), "{}", ignored.message);
    }
    let workers: Api<NamespaceWorker> = Api::all(client.clone());
    let message = workers
        .get("wfcount-a")
        .await
        .unwrap()
        .status
        .unwrap()
        .message;
    assert!(message.contains("1 Workflow is ignored"), "{message}");

    // The fix the condition gives, as it gives it.
    let patch = serde_json::json!({"metadata": {"labels": {LABEL: "wfcount-a"}}});
    workflows(&client, "wfcount-a")
        .patch("hello", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let (_, count) = wait_ignored(
        &client,
        "wfcount-a",
        "none ignored",
        is("False", "NoneIgnored"),
    )
    .await;
    assert_eq!(count, Some(0));
    flotilla.stop();
    delete_namespaces_and_wait(&client, &["wfcount-a"]).await;
}

#[tokio::test]
async fn with_instance_id_none_unlabelled_workflows_run_and_labelled_ones_are_ignored() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let mut fleet = Fleet::new("wfnone");
    fleet.values["instanceID"] = "none".into();
    let flotilla = fleet.start();
    fleet.namespace(&client, "wfnone-a", true).await;
    fleet.wait_stamped(&client, "wfnone-a").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "wfnone-a");
    let data = configmaps
        .get("workflow-controller-configmap")
        .await
        .unwrap()
        .data
        .unwrap();
    assert!(!data.contains_key("instanceID"), "no instanceID: {data:?}");

    create_workflow(&client, "wfnone-a", "plain", None).await;
    let (_, count) = wait_ignored(&client, "wfnone-a", "counted", |c, n| {
        c.reason == "NoneIgnored" && n == Some(0)
    })
    .await;
    assert_eq!(count, Some(0));
    // Settled: the unlabelled one is not news a second later either.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (still, _) = wait_ignored(&client, "wfnone-a", "still none", |_, _| true).await;
    assert_eq!(still.reason, "NoneIgnored");

    create_workflow(&client, "wfnone-a", "submitted-with-id", Some("someone")).await;
    let (ignored, count) = wait_ignored(
        &client,
        "wfnone-a",
        "the labelled one",
        is("True", "LabelPresent"),
    )
    .await;
    assert_eq!(count, Some(1));
    assert!(
        ignored
            .message
            .contains("workflows.argoproj.io/controller-instanceid-"),
        "{}",
        ignored.message
    );
    flotilla.stop();
    delete_namespaces_and_wait(&client, &["wfnone-a"]).await;
}

/// The commands of the README's "Run your first workflow", in order (its `sh` block).
fn first_workflow_commands() -> Vec<String> {
    const SECTION: &str = "## Run your first workflow";
    let readme = std::fs::read_to_string(env().repo.join("README.md")).unwrap();
    let start = readme.find(SECTION).expect("the README has the section") + SECTION.len();
    let section = &readme[start..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let block = section.split("```sh\n").nth(1).expect("a sh block");
    let block = &block[..block.find("```").unwrap()];
    block
        .lines()
        // A comment is what follows "  # ".
        .map(|line| line.split("  #").next().unwrap_or(line).trim().to_string())
        .filter(|line| !line.is_empty())
        .collect()
}

#[tokio::test]
async fn a_teams_first_workflow_as_the_readme_shows_it() {
    let client = admin().await;
    install_argo_crds(&client).await;
    let fleet = Fleet::new("wfreadme");
    let flotilla = fleet.start();
    let ns = "wfreadme-a";
    fleet.namespace(&client, ns, true).await;
    fleet.wait_stamped(&client, ns).await;
    // The README's team-a is this test's namespace, in the commands and in the example.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    let example = std::fs::read_to_string(env().repo.join("examples/hello-world.yaml")).unwrap();
    assert!(example.contains(&format!("{LABEL}: team-a")), "{example}");
    std::fs::write(
        dir.path().join("examples/hello-world.yaml"),
        example.replace("team-a", ns),
    )
    .unwrap();
    let commands = first_workflow_commands();
    let expected = [
        "kubectl -n team-a create -f examples/hello-world.yaml",
        "kubectl -n team-a get workflows",
        "argo submit -n team-a --instanceid team-a examples/hello-world.yaml",
        "kubectl get nsw team-a",
    ];
    assert_eq!(commands, expected, "the README's commands");
    let mut outputs = Vec::new();
    for command in commands.iter().filter(|c| c.starts_with("kubectl ")) {
        let out = std::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", &command.replace("team-a", ns)])
            .current_dir(dir.path())
            .env("KUBECONFIG", &env().admin_kubeconfig)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{command}: {}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push(stdout);
    }
    // Accepted by the API server, with the label its controller runs.
    let listed = workflows(&client, ns)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert!(
        listed.items[0]
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("hello-world-")
    );
    assert_eq!(
        listed.items[0].labels().get(LABEL).map(String::as_str),
        Some(ns)
    );
    assert!(outputs[1].contains("hello-world-"), "{}", outputs[1]);
    let (_, count) = wait_ignored(&client, ns, "counted", |c, n| {
        c.reason == "NoneIgnored" && n == Some(0)
    })
    .await;
    assert_eq!(count, Some(0));
    // What the README's last command shows, once counted.
    let shown = kubectl_get_nsw(ns);
    let header: Vec<&str> = shown.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = shown.lines().nth(1).unwrap().split_whitespace().collect();
    let ignored = header
        .iter()
        .position(|h| *h == "IGNORED")
        .expect("an IGNORED column");
    assert_eq!(row[ignored], "0", "{shown}");
    flotilla.stop();
    delete_namespaces_and_wait(&client, &[ns]).await;
}

fn kubectl_get_nsw(namespace: &str) -> String {
    let out = std::process::Command::new("kubectl")
        .args(["get", "nsw", namespace])
        .env("KUBECONFIG", &env().admin_kubeconfig)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}
