//! flotilla's image run as the Deployment's pod for a test's fleet: the fleet's config and
//! templates in the volumes the Deployment mounts, flotilla's ServiceAccount in the pod's, the
//! Deployment's env, args and user (pod.rs does the running).

use crate::harness::*;
use crate::pod::{self, Image, PodSpec};
use std::collections::BTreeMap;
use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The pod's name, as the downward API hands it to `POD_NAME` (the Lease holder's identity).
pub const POD_NAME: &str = "flotilla-5d8c7b9f4-x2k7q";

/// The pod's port is the host's (the network is shared), so two suites on one machine take
/// turns at it: the guard holds a lock until dropped.
pub fn take_pod_port(port: i32) -> File {
    let lock = File::create(format!("/tmp/flotilla-e2e-pod-port-{port}.lock")).unwrap();
    lock.lock().unwrap();
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port as u16)).is_err(),
        "something else listens on 127.0.0.1:{port}, the port of flotilla's pod"
    );
    lock
}

/// The API server's port, from the admin kubeconfig's `https://127.0.0.1:PORT`.
fn apiserver_port() -> String {
    let text = std::fs::read_to_string(&env().admin_kubeconfig).unwrap();
    let kubeconfig: kube::config::Kubeconfig = serde_saphyr::from_str(&text).unwrap();
    let server = kubeconfig.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server
        .clone();
    let server = server.unwrap();
    let port = server.rsplit(':').next().unwrap().trim_end_matches('/');
    assert!(
        server.starts_with("https://127.0.0.1:"),
        "the pod reaches the API server as KUBERNETES_SERVICE_HOST=127.0.0.1, not {server}"
    );
    port.to_string()
}

/// flotilla's image running as the Deployment's pod, with `fleet`'s config and templates in the
/// volumes the Deployment mounts. Killed when dropped.
pub struct RunningPod {
    child: Child,
    log: PathBuf,
    rootfs: PathBuf,
    before: BTreeMap<String, pod::Entry>,
    _dir: tempfile::TempDir,
}

impl RunningPod {
    pub fn start(fleet: &Fleet, image: &Image) -> RunningPod {
        let dir = tempfile::tempdir().unwrap();
        let rootfs = image.unpack(&dir.path().join("bundle"));
        let (deployment, container) = pod::deployment(&env().repo);
        let pod_spec = deployment.spec.template.spec.unwrap();
        assert!(container.command.is_none(), "the image's entrypoint runs");

        // The Deployment's volumes, by name; the config reads its templates where the
        // templates volume is mounted, relative to itself as in manifests/generated/config.yaml.
        let mut mounts = Vec::new();
        let mount_path = |name: &str| {
            let mut mounts = container.volume_mounts.iter().flatten();
            let mount = mounts.find(|m| m.name == name);
            mount
                .unwrap_or_else(|| panic!("no volume {name}"))
                .mount_path
                .clone()
        };
        let config_dir = Path::new(&mount_path("config")).to_path_buf();
        let templates_dir = mount_path("templates");
        let relative = Path::new("..").join(Path::new(&templates_dir).file_name().unwrap());
        assert_eq!(config_dir.parent(), Path::new(&templates_dir).parent());
        for mount in container.volume_mounts.iter().flatten() {
            let files: BTreeMap<String, Vec<u8>> = match mount.name.as_str() {
                "config" => {
                    let config = fleet.config(&relative).to_string();
                    BTreeMap::from([("flotilla.yaml".into(), config.into_bytes())])
                }
                "templates" => std::fs::read_dir(&fleet.templates)
                    .unwrap()
                    .map(|e| {
                        let e = e.unwrap();
                        let name = e.file_name().to_string_lossy().into_owned();
                        (name, std::fs::read(e.path()).unwrap())
                    })
                    .collect(),
                other => panic!("the Deployment mounts volume {other}, which this test lacks"),
            };
            let host = dir.path().join("volumes").join(&mount.name);
            pod::write_volume(&host, &files);
            let read_only = mount.read_only.unwrap_or(false);
            mounts.push((host, mount.mount_path.clone(), read_only));
        }
        // The ServiceAccount volume every pod gets: flotilla's own token, the cluster's CA.
        let ca = env().admin_kubeconfig.parent().unwrap().join("pki/ca.crt");
        let account = BTreeMap::from([
            (
                "token".to_string(),
                kubeconfig_token(&env().flotilla_kubeconfig).into_bytes(),
            ),
            ("ca.crt".to_string(), std::fs::read(ca).unwrap()),
            (
                "namespace".to_string(),
                FLOTILLA_NAMESPACE.as_bytes().to_vec(),
            ),
        ]);
        let host = dir.path().join("volumes/serviceaccount");
        pod::write_volume(&host, &account);
        mounts.push((host, pod::SERVICE_ACCOUNT_DIR.to_string(), true));

        // The container's env as the kubelet fills it in, and the API server's address.
        let mut env_vars = BTreeMap::new();
        for var in container.env.iter().flatten() {
            let field = var.value_from.as_ref().and_then(|v| v.field_ref.as_ref());
            let value = match (&var.value, field) {
                (Some(value), _) => value.clone(),
                (None, Some(f)) if f.field_path == "metadata.name" => POD_NAME.to_string(),
                _ => panic!("the test cannot fill in env {}", var.name),
            };
            env_vars.insert(var.name.clone(), value);
        }
        env_vars.insert("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into());
        env_vars.insert("KUBERNETES_SERVICE_PORT".into(), apiserver_port());

        let config = image.config();
        let image_user = config["config"]["User"].as_str().unwrap();
        let (_, image_gid) = image_user.split_once(':').unwrap();
        let uid = container
            .security_context
            .as_ref()
            .and_then(|s| s.run_as_user)
            .or(pod_spec
                .security_context
                .as_ref()
                .and_then(|s| s.run_as_user))
            .unwrap();
        let mut argv: Vec<String> = serde_json::from_value(config["config"]["Entrypoint"].clone())
            .expect("the image has an entrypoint");
        argv.extend(container.args.clone().unwrap_or_default());
        let spec = PodSpec {
            netns: None,
            rootfs: rootfs.clone(),
            mounts,
            uid: uid as u32,
            gid: image_gid.parse().unwrap(),
            argv,
            env: env_vars,
        };
        spec.make_mount_points();
        let before = pod::manifest(&rootfs);
        let log = dir.path().join("pod.log");
        let child = spec.start(&log);
        RunningPod {
            child,
            log,
            rootfs,
            before,
            _dir: dir,
        }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Polls `check` for up to 60 s; fails at once, with the pod's output, if the pod exited.
    pub async fn wait<T, F, Fut>(&mut self, what: &str, check: F) -> T
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "the pod exited ({status}) while waiting for {what}; it printed:\n{}",
                    self.logs()
                );
            }
            if let Some(value) = check().await {
                return value;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out waiting for {what}; the pod printed:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM, as the kubelet stops a pod; then what changed in the root filesystem.
    pub fn stop(mut self) -> Vec<String> {
        crate::common::terminate(&mut self.child, Duration::from_secs(10));
        let _ = self.child.kill();
        let _ = self.child.wait();
        pod::changes(&self.before, &pod::manifest(&self.rootfs))
    }
}

impl Drop for RunningPod {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- the pod printed:\n{}", self.logs());
        }
    }
}

/// GET http://127.0.0.1:<port><path>: the body of a 2xx answer.
pub fn http_get(port: i32, path: &str) -> Option<String> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let out = Command::new("curl")
        .args(["-fsS", "--max-time", "2", &url])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
