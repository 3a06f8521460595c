//! The bench's own control plane (e2e/cluster.sh on its own ports and state dir), flotilla's
//! manifests and ServiceAccount token, clients, and flotilla as a child process. Small copies of
//! what e2e/tests/harness.rs does, so the bench runs flotilla exactly as the e2e suite does.

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The flotilla processes running now, so that an interrupted bench can stop them.
static RUNNING: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// On SIGINT or SIGTERM: stop flotilla and the control plane, then exit.
pub fn stop_everything_on_signal(repo: PathBuf) {
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("bench: interrupted; stopping flotilla and the control plane");
        for pid in RUNNING.lock().unwrap().drain(..) {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        drop(DownOnDrop(repo));
        std::process::exit(130);
    });
}

pub const FLOTILLA_NAMESPACE: &str = "flotilla-system";
pub const FLOTILLA_USER: &str = "system:serviceaccount:flotilla-system:flotilla";

/// The e2e suite's default state dir: the bench must never touch it.
const E2E_STATE: &str = "/tmp/flotilla-e2e";

/// Where the bench's control plane keeps its state; refuses the e2e suite's.
pub fn state_dir() -> PathBuf {
    let state = std::env::var("FLOTILLA_E2E_DIR").unwrap_or_default();
    let port = std::env::var("FLOTILLA_E2E_PORT").unwrap_or_default();
    assert!(
        !state.is_empty() && state.trim_end_matches('/') != E2E_STATE && !port.is_empty(),
        "set FLOTILLA_E2E_DIR (not {E2E_STATE}), FLOTILLA_E2E_PORT and the other ports of a \
         control plane of the bench's own; `make bench` (e2e/bench/run.sh) does"
    );
    PathBuf::from(state)
}

fn cluster_sh(repo: &Path, action: &str) {
    let status = Command::new("bash")
        .arg(repo.join("e2e/cluster.sh"))
        .arg(action)
        .stdout(Stdio::null())
        .status()
        .expect("bash runs");
    assert!(status.success(), "e2e/cluster.sh {action} failed");
}

pub struct Cluster {
    pub repo: PathBuf,
    pub admin_kubeconfig: PathBuf,
    pub flotilla_kubeconfig: PathBuf,
    pub audit_log: PathBuf,
    pub admin: Client,
    pub flotilla: Client,
}

impl Cluster {
    /// A fresh control plane (any earlier one of the bench's is stopped and removed first),
    /// flotilla installed from manifests/, and clients for admin and flotilla's ServiceAccount.
    pub async fn fresh(repo: &Path, work: &Path) -> Cluster {
        let state = state_dir();
        let t0 = Instant::now();
        cluster_sh(repo, "down");
        cluster_sh(repo, "up");
        let admin_kubeconfig = state.join("admin.kubeconfig");
        kubectl(
            &admin_kubeconfig,
            &["apply", "-k", repo.join("manifests").to_str().unwrap()],
        );
        let token = service_account_token(&admin_kubeconfig);
        let mut kubeconfig = Kubeconfig::read_from(&admin_kubeconfig).unwrap();
        for user in &mut kubeconfig.auth_infos {
            if let Some(auth) = user.auth_info.as_mut() {
                auth.token = Some(token.clone().into());
            }
        }
        let flotilla_kubeconfig = work.join("flotilla.kubeconfig");
        std::fs::write(
            &flotilla_kubeconfig,
            serde_json::to_string(&kubeconfig).unwrap(),
        )
        .unwrap();
        eprintln!(
            "bench: control plane up at {} with flotilla installed ({:.0} s)",
            state.display(),
            t0.elapsed().as_secs_f64()
        );
        Cluster {
            repo: repo.to_path_buf(),
            admin: client_for(&admin_kubeconfig).await,
            flotilla: client_for(&flotilla_kubeconfig).await,
            admin_kubeconfig,
            flotilla_kubeconfig,
            audit_log: state.join("audit.log"),
        }
    }

    pub fn down(&self) {
        cluster_sh(&self.repo, "down");
    }
}

/// Stops the bench's control plane however the bench ends (also on a panic).
pub struct DownOnDrop(pub PathBuf);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(self.0.join("e2e/cluster.sh"))
            .arg("down")
            .stdout(Stdio::null())
            .status();
    }
}

pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The token the controller-manager's token controller minted for flotilla's ServiceAccount.
fn service_account_token(admin: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    let ns = ["--namespace", FLOTILLA_NAMESPACE];
    loop {
        let jsonpath = "jsonpath={.secrets[0].name}";
        let secret = kubectl(
            admin,
            &[
                &ns[..],
                &["get", "serviceaccount", "flotilla", "-o", jsonpath],
            ]
            .concat(),
        );
        if !secret.is_empty() {
            let template = "go-template={{.data.token | base64decode}}";
            return kubectl(
                admin,
                &[&ns[..], &["get", "secret", &secret, "-o", template]].concat(),
            );
        }
        assert!(
            Instant::now() < deadline,
            "no token secret for flotilla's ServiceAccount"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// A running `flotilla run` under its ServiceAccount token; killed when dropped.
pub struct Flotilla {
    child: Child,
    pub started: Instant,
    pub log: PathBuf,
}

impl Flotilla {
    pub fn start(cluster: &Cluster, config: &Path, log: &Path) -> Flotilla {
        let out = std::fs::File::create(log).unwrap();
        let rust_log =
            std::env::var("BENCH_FLOTILLA_LOG").unwrap_or_else(|_| "info,flotilla=debug".into());
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            // Loopback only, on a free port: never in the way of another flotilla's.
            .args([
                "run",
                "--http-address",
                "127.0.0.1:0",
                "--identity",
                "bench",
            ])
            .arg("--config")
            .arg(config)
            .env("KUBECONFIG", &cluster.flotilla_kubeconfig)
            .env("RUST_LOG", rust_log)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("flotilla starts");
        RUNNING.lock().unwrap().push(child.id());
        Flotilla {
            child,
            started,
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_len(&self) -> u64 {
        std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0)
    }

    /// Lines containing `needle` in the log between two byte offsets.
    pub fn count_log(&self, from: u64, to: u64, needle: &str) -> usize {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let (from, to) = (from as usize, (to as usize).min(text.len()));
        if from >= to {
            return 0;
        }
        String::from_utf8_lossy(&text[from..to])
            .lines()
            .filter(|l| l.contains(needle))
            .count()
    }

    /// Panics with the log's tail if flotilla has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!("flotilla exited ({status}); log tail:\n{}", tail.join("\n"));
        }
    }

    /// SIGTERM, as Kubernetes stops a pod, then reap the process.
    pub fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Flotilla {
    fn drop(&mut self) {
        RUNNING.lock().unwrap().retain(|p| *p != self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
