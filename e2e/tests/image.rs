//! flotilla's image (`make image`): what it holds, and that it does its job when run the way the
//! Deployment in manifests/ runs it (see pod.rs for how a pod is stood in for, fleet_pod.rs for
//! what goes into it).

use crate::fleet_pod::{POD_NAME, RunningPod, http_get, take_pod_port};
use crate::harness::*;
use crate::pod::{self, Image};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::Api;
use std::collections::BTreeSet;
use std::process::Command;

/// The git commit the checkout is at: what a fresh image's revision label must say.
fn head() -> String {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&env().repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "the e2e suite runs in a git checkout");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn git_commit_time() -> i64 {
    let out = Command::new("git")
        .args(["log", "-1", "--format=%ct", "HEAD"])
        .current_dir(&env().repo)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[tokio::test]
async fn the_image_holds_the_binary_its_libraries_certificates_and_users_only() {
    let image = Image::built();
    let config = image.config();
    let labels = &config["config"]["Labels"];
    let revision = labels["org.opencontainers.image.revision"]
        .as_str()
        .unwrap();
    assert_eq!(revision, head(), "the image is stale: run make image");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        labels["org.opencontainers.image.source"].is_string(),
        "{labels}"
    );
    assert_eq!(config["config"]["User"], "65532:65532");
    let entrypoint = config["config"]["Entrypoint"][0].as_str().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let rootfs = image.unpack(&dir.path().join("bundle"));
    let binary = rootfs.join(entrypoint.trim_start_matches('/'));
    // Every library the loader needs, at the path it looks for it (ldd of the image's binary).
    let ldd = pod::run(Command::new("ldd").arg(&binary));
    let mut want: BTreeSet<String> = ldd
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
        .map(str::to_string)
        .collect();
    assert!(want.iter().any(|l| l.contains("libc.so")), "{ldd}");
    want.extend(
        [
            entrypoint,
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/passwd",
            "/etc/group",
        ]
        .map(str::to_string),
    );
    let manifest = pod::manifest(&rootfs);
    let have: BTreeSet<String> = manifest
        .iter()
        .filter(|(_, e)| e.mode & 0o170000 != 0o040000)
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(have, want, "what the image holds besides directories");

    // Normalised for a reproducible digest: owned by root, dated the commit's time.
    let created = git_commit_time();
    for (path, entry) in &manifest {
        assert_eq!((entry.uid, entry.gid), (0, 0), "{path}");
        assert_eq!(
            entry.mtime, created,
            "{path} is not dated SOURCE_DATE_EPOCH"
        );
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("nonroot:x:65532:65532:")),
        "{passwd}"
    );
    let group = std::fs::read_to_string(rootfs.join("etc/group")).unwrap();
    assert!(group.lines().any(|l| l == "nonroot:x:65532:"), "{group}");
    let cas = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt")).unwrap();
    assert!(cas.matches("BEGIN CERTIFICATE").count() > 10, "a CA bundle");

    // The binary runs as the nonroot user and names the commit of the revision label.
    let version = pod::run(
        Command::new("chroot")
            .arg("--userspec=65532:65532")
            .arg(&rootfs)
            .args([entrypoint, "--version"]),
    );
    let want = format!(
        "flotilla {} (commit {revision})\n",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(version, want);
}

#[tokio::test]
async fn the_image_runs_as_the_deployments_pod_with_a_read_only_root() {
    let (_, container) = pod::deployment(&env().repo);
    let readiness = container.readiness_probe.clone().unwrap().http_get.unwrap();
    let liveness = container.liveness_probe.clone().unwrap().http_get.unwrap();
    let port_of = |port: &IntOrString| match port {
        IntOrString::String(name) => pod::container_port(&container, name),
        IntOrString::Int(n) => *n,
    };
    let port = port_of(&readiness.port);
    let _port = take_pod_port(port);
    let client = admin().await;
    let fleet = Fleet::new("image");
    let image = Image::built();
    let revision = image.config()["config"]["Labels"]["org.opencontainers.image.revision"]
        .as_str()
        .unwrap()
        .to_string();
    let audit = AuditWindow::open();
    let lease_writes = || {
        let entries = audit.requests(FLOTILLA_USER, Some(&fleet.instance));
        let is_lease_write = |e: &&serde_json::Value| {
            e["objectRef"]["resource"] == "leases"
                && e["objectRef"]["name"] == fleet.instance.as_str()
                && matches!(e["verb"].as_str(), Some("create" | "update"))
        };
        entries.iter().filter(is_lease_write).count()
    };
    let lease_writes_before = lease_writes();
    let mut pod = RunningPod::start(&fleet, &image);

    // It leads: the Lease names the pod.
    let leases: Api<Lease> = Api::namespaced(client.clone(), FLOTILLA_NAMESPACE);
    let holder = pod
        .wait("the pod to take the Lease", || async {
            let lease = leases.get_opt(&fleet.instance).await.ok()??;
            lease.spec?.holder_identity.filter(|h| h == POD_NAME)
        })
        .await;
    assert_eq!(holder, POD_NAME);
    // It stamps an opted-in namespace.
    fleet.namespace(&client, "image-a", true).await;
    let want = fleet.render("image-a", &[]).len();
    pod.wait("image-a stamped", || async {
        (fleet.stamped_for(&client, "image-a").await.len() == want).then_some(())
    })
    .await;
    // Its probes answer on the port the Deployment's probes name.
    let ready = pod
        .wait("/readyz", || async {
            http_get(port, &readiness.path.clone()?)
        })
        .await;
    assert_eq!(ready, "ok\n");
    assert_eq!(port_of(&liveness.port), port);
    assert_eq!(
        http_get(port, liveness.path.as_deref().unwrap()).as_deref(),
        Some("ok\n")
    );
    let metrics = http_get(port, "/metrics").unwrap();
    let build_info = format!(
        "flotilla_build_info{{version=\"{}\",commit=\"{revision}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        metrics.contains(&build_info),
        "{build_info} not in:\n{metrics}"
    );
    // The start-up line (JSON, as the Deployment's args ask) names the version and commit.
    let logs = pod.logs();
    let starting = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["fields"]["message"] == "starting")
        .unwrap_or_else(|| panic!("no JSON 'starting' line in:\n{logs}"));
    assert_eq!(starting["fields"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(starting["fields"]["commit"], revision.as_str());
    // As the nonroot user, with the in-cluster credentials (the only ones it was given).
    let status = std::fs::read_to_string(format!("/proc/{}/status", pod.pid())).unwrap();
    for (field, want) in [("Uid:", "65532"), ("Gid:", "65532")] {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        assert!(
            line.split_whitespace().skip(1).all(|id| id == want),
            "{line}"
        );
    }
    assert!(
        lease_writes() > lease_writes_before,
        "the Lease was written with flotilla's ServiceAccount token (audit log)"
    );

    let changed = pod.stop();
    assert!(
        changed.is_empty(),
        "the pod wrote to its root filesystem: {changed:#?}"
    );
    delete_namespaces(&client, &["image-a"]).await;
}
