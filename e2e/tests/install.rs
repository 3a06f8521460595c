//! The README's "Install on your cluster", command by command, against the local control plane.
//! Read from README.md itself, so the two cannot drift apart. Two commands cannot run here and
//! have stand-ins: the push to a registry (to an `oci-archive:` file instead, which the pod then
//! runs from, as a node would pull it) and the Argo CRDs' install (from GitHub, which this network
//! does not reach: Argo's CRDs of the release e2e/build.sh built, instead). The label and
//! namespace are this test's own, not the README's.

use crate::fleet_pod::{RunningPod, take_pod_port};
use crate::harness::*;
use crate::pod::{self, Image};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use std::process::Command;

const SECTION: &str = "## Install on your cluster";
const OVERLAY: &str = "my-flotilla/kustomization.yaml";
const REGISTRY_IMAGE: &str = "registry.example.com/flotilla";
/// How each of the README's commands starts, in the README's order.
const STEPS: [&str; 7] = [
    "make -C flotilla image",
    "skopeo copy",
    "kubectl apply -k",
    "kubectl apply --server-side -k",
    "kubectl label namespace",
    "kubectl get nsw",
    "jq -r '.manifests[]",
];
/// The media type of the SBOM `make image` attaches (image/sbom.sh).
const SBOM: &str = "application/vnd.cyclonedx+json";

/// The fenced code blocks of the README's section `heading` (up to the next `## `), as
/// (language, text); and the section's text.
pub fn readme_blocks(heading: &str) -> (Vec<(String, String)>, String) {
    let readme = std::fs::read_to_string(env().repo.join("README.md")).unwrap();
    let start = readme
        .find(heading)
        .unwrap_or_else(|| panic!("the README has a section {heading}"));
    let section = &readme[start + heading.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in section.lines() {
        match (line.strip_prefix("```"), current.take()) {
            (Some(language), None) => current = Some((language.to_string(), String::new())),
            (Some(_), Some(block)) => blocks.push(block),
            (None, Some((language, mut text))) => {
                text.push_str(line);
                text.push('\n');
                current = Some((language, text));
            }
            (None, None) => {}
        }
    }
    (blocks, section.to_string())
}

/// The commands of the `sh` blocks, one a line, without their comments, each stand-in
/// (from, to) put in; and whether each stand-in was used.
pub fn shell_commands(
    blocks: &[(String, String)],
    stand_ins: &[(String, String)],
) -> (Vec<String>, Vec<bool>) {
    let mut used = vec![false; stand_ins.len()];
    let mut commands = Vec::new();
    for (_, text) in blocks.iter().filter(|(l, _)| l == "sh") {
        for line in text.lines() {
            let mut command = line.split("  #").next().unwrap().trim().to_string();
            for (i, (from, to)) in stand_ins.iter().enumerate() {
                if command.contains(from.as_str()) {
                    command = command.replace(from.as_str(), to);
                    used[i] = true;
                }
            }
            commands.push(command);
        }
    }
    (commands, used)
}

/// Which of `steps` (how each command starts) `command` is; a new command fails the test until
/// the test knows what to check after it.
pub fn step_of<'a>(steps: &[&'a str], command: &str) -> &'a str {
    steps
        .iter()
        .copied()
        .find(|s| command.starts_with(s))
        .unwrap_or_else(|| {
            panic!("the README has a command no step of this test checks: {command}")
        })
}

/// Runs one of the README's shell commands in `dir` as the cluster admin, in the environment
/// the test was started in; returns stdout.
pub fn sh(dir: &std::path::Path, command: &str) -> String {
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", command])
        .current_dir(dir)
        .env("KUBECONFIG", &env().admin_kubeconfig);
    // Not what cargo sets for the test itself: `make image` runs cargo again, and some build
    // scripts (ring's) watch CARGO_MANIFEST_DIR, so with it the release build would start over.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_by_cargo = ["CARGO_PKG_", "CARGO_BIN_EXE_"]
            .iter()
            .any(|p| name.starts_with(p))
            || [
                "CARGO",
                "CARGO_MANIFEST_DIR",
                "CARGO_MANIFEST_PATH",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
                "LD_LIBRARY_PATH",
                "FLOTILLA_GIT_COMMIT",
            ]
            .contains(&name.as_ref());
        if set_by_cargo {
            cmd.env_remove(name.as_ref());
        }
    }
    pod::run(&mut cmd)
}

/// The objects `kubectl kustomize` builds from `dir`, as JSON values.
fn kustomize(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let yaml = kubectl(
        &env().admin_kubeconfig,
        &["kustomize", dir.to_str().unwrap()],
    );
    serde_saphyr::from_multiple(&yaml).unwrap()
}

#[tokio::test]
async fn install_on_your_cluster_as_the_readme_says() {
    let client = admin().await;
    let fleet = Fleet::new("install");
    let version = env!("CARGO_PKG_VERSION");
    let built = Image::built();
    // The README's commands run where a user keeps the checkout `flotilla/` and the overlay.
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&env().repo, work.path().join("flotilla")).unwrap();
    let pushed = work.path().join("pushed.tar");
    let pulled = work.path().join("pulled");
    // What differs here from a user's cluster, each of which must be in the README.
    let stand_ins = [
        (
            format!("docker://{REGISTRY_IMAGE}:{version}"),
            format!("oci-archive:{}", pushed.display()),
        ),
        (
            format!("flotilla/target/image:{version}"),
            built.reference(),
        ),
        (
            "flotilla/target/image/".to_string(),
            format!("{}/", built.layout.display()),
        ),
        ("team-a".to_string(), "install-a".to_string()),
        (
            "flotilla.dev/enabled=true".to_string(),
            format!("{}=on", fleet.label),
        ),
    ];
    let (blocks, section) = readme_blocks(SECTION);
    assert!(
        section.contains(OVERLAY),
        "the README names the overlay file {OVERLAY}"
    );
    let languages: Vec<&str> = blocks.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        languages,
        ["sh", "yaml", "sh", "sh"],
        "build and push, overlay, install, the SBOM"
    );
    let (commands, used) = shell_commands(&blocks, &stand_ins);
    std::fs::create_dir_all(work.path().join("my-flotilla")).unwrap();
    std::fs::write(work.path().join(OVERLAY), &blocks[1].1).unwrap();
    fleet.namespace(&client, "install-a", false).await;
    let mut running = None;
    let mut policy = None;
    let mut steps = Vec::new();
    for command in &commands {
        let step = step_of(&STEPS, command);
        steps.push(step);
        match step {
            "make -C flotilla image" => {
                sh(work.path(), command);
                // Reproducible: a second build of the same commit has the same digest, and
                // attaches the same SBOM.
                let first = (built.digest(), built.referrer(SBOM).0);
                sh(work.path(), "bash flotilla/image/build.sh");
                let second = (built.digest(), built.referrer(SBOM).0);
                assert_eq!(second, first, "two builds, two digests");
            }
            "skopeo copy" => {
                sh(work.path(), command);
                // What was pushed is what was built; the pod runs what a node pulls from there.
                let inspect = sh(
                    work.path(),
                    &format!("skopeo inspect oci-archive:{}", pushed.display()),
                );
                let inspect: serde_json::Value = serde_json::from_str(&inspect).unwrap();
                assert_eq!(inspect["Digest"], built.digest().as_str());
                sh(
                    work.path(),
                    &format!(
                        "skopeo copy oci-archive:{} oci:{}:{version}",
                        pushed.display(),
                        pulled.display()
                    ),
                );
            }
            "kubectl apply -k" => {
                sh(work.path(), command);
                // The overlay changes the image and nothing else.
                let mut want = kustomize(&env().repo.join("manifests"));
                for object in want.iter_mut().filter(|o| o["kind"] == "Deployment") {
                    object["spec"]["template"]["spec"]["containers"][0]["image"] =
                        format!("{REGISTRY_IMAGE}:{version}").into();
                }
                let have = kustomize(&work.path().join("my-flotilla"));
                assert_eq!(have.len(), want.len());
                for (have, want) in have.iter().zip(&want) {
                    let what = format!("{} {}", want["kind"], want["metadata"]["name"]);
                    assert_eq!(have, want, "the overlay's {what} differs from manifests/'");
                }
                let deployments: Api<Deployment> =
                    Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
                let live = deployments.get("flotilla").await.unwrap();
                let image = live.spec.template.spec.unwrap().containers[0].image.clone();
                assert_eq!(image, Some(format!("{REGISTRY_IMAGE}:{version}")));
                // The install bounds flotilla's token in the API server; the policy is generated
                // for flotilla.yaml's selector, so the one for this test's own takes its place:
                // everything below is stamped through it.
                let installed = kubectl(
                    &env().admin_kubeconfig,
                    &[
                        "get",
                        "validatingadmissionpolicy",
                        flotilla::admission::POLICY,
                        "-o",
                        "name",
                    ],
                );
                assert!(
                    installed.contains(flotilla::admission::POLICY),
                    "{installed}"
                );
                policy = Some(crate::admission_policy::Installed::for_fleet(&fleet));
            }
            // The Argo CRDs come from GitHub, out of this network's reach: those of the Argo
            // build (e2e/build.sh, from the Go module proxy) stand in for them.
            "kubectl apply --server-side -k" => {
                assert!(command.contains("argoproj/argo-workflows"));
                crate::argo_world::install_argo_crds(&client).await;
            }
            "kubectl label namespace" => {
                let image = Image {
                    layout: pulled.clone(),
                    tag: version.to_string(),
                };
                let (_, container) = pod::deployment(&env().repo);
                let port = pod::container_port(&container, "http");
                let lock = take_pod_port(port);
                running = Some((RunningPod::start(&fleet, &image), lock));
                sh(work.path(), command);
            }
            "kubectl get nsw" => {
                let (pod, _) = running.as_mut().expect("flotilla runs by now");
                let shown = pod
                    .wait("kubectl get nsw to show install-a", || async {
                        let out = Command::new("bash")
                            .args(["-c", command])
                            .env("KUBECONFIG", &env().admin_kubeconfig)
                            .output()
                            .ok()?;
                        let text = String::from_utf8_lossy(&out.stdout).into_owned();
                        (out.status.success() && text.contains("install-a")).then_some(text)
                    })
                    .await;
                assert!(shown.starts_with("NAME "), "{shown}");
            }
            // The README's way to the SBOM finds the one attached to the image.
            "jq -r '.manifests[]" => {
                let printed = sh(work.path(), command);
                assert_eq!(printed.trim(), built.referrer(SBOM).0);
            }
            _ => unreachable!("every step is matched"),
        }
    }
    assert_eq!(steps, STEPS, "the README's commands, in this order");
    assert!(
        used.iter().all(|u| *u),
        "every stand-in applies: {stand_ins:?} {used:?}"
    );
    fleet.wait_stamped(&client, "install-a").await;
    // The pod's ClusterRole lets it watch Workflows: install-a's are counted.
    let workers: Api<flotilla::status::NamespaceWorker> = Api::all(client.clone());
    eventually("install-a's Workflows counted", || async {
        let status = workers.get_opt("install-a").await.ok()??.status?;
        let counted = status
            .conditions
            .iter()
            .any(|c| c.type_ == "WorkflowsIgnored" && c.reason == "NoneIgnored");
        counted.then_some(())
    })
    .await;
    let (pod, _lock) = running.unwrap();
    assert!(pod.stop().is_empty());
    // The rest of the suite runs with manifests/ as it is, without the admission policy.
    kubectl(
        &env().admin_kubeconfig,
        &[
            "apply",
            "-k",
            env().repo.join("manifests").to_str().unwrap(),
        ],
    );
    drop(policy);
    delete_namespaces(&client, &["install-a"]).await;
}
