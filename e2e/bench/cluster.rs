//! The bench's own control plane (e2e/cluster.sh on its own ports and state dir), flotilla's
//! manifests and ServiceAccount token, clients, and flotilla as a child process. Small copies of
//! what e2e/tests/harness.rs does, so the bench runs flotilla exactly as the e2e suite does.

use crate::common::{
    client_for, kubectl, log_tail, spawn_flotilla, terminate, write_service_account_kubeconfig,
};
use crate::procstat;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

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
            send(pid, "-TERM");
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
        // The admission policy for the bench's own selector (manifests/ has the one for the
        // shipped flotilla.yaml): every write of flotilla's token, the baselines' included, is
        // judged by it, as in an install.
        let policy = work.join("admission-policy.yaml");
        let printed = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args([
                "rbac",
                "--admission-policy",
                "--set",
                "argoServer.enabled=true",
            ])
            .arg("--config")
            .arg(work.join("flotilla.yaml"))
            .output()
            .expect("flotilla rbac runs");
        assert!(
            printed.status.success(),
            "flotilla rbac --admission-policy: {}",
            String::from_utf8_lossy(&printed.stderr)
        );
        std::fs::write(&policy, &printed.stdout).unwrap();
        kubectl(
            &admin_kubeconfig,
            &["apply", "-f", policy.to_str().unwrap()],
        );
        let flotilla_kubeconfig = work.join("flotilla.kubeconfig");
        write_service_account_kubeconfig(
            &admin_kubeconfig,
            FLOTILLA_NAMESPACE,
            "flotilla",
            &flotilla_kubeconfig,
        );
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

/// A running `flotilla run` under its ServiceAccount token; killed when dropped.
pub struct Flotilla {
    child: Child,
    /// The flotilla process itself (the child, or under BENCH_FLOTILLA_WRAP the wrapper's
    /// descendant running flotilla's binary), or why it was not found. Looked for when first
    /// needed: not finding it takes a while, which must not fall into a timed scenario.
    process: OnceLock<Result<u32, String>>,
    pub started: Instant,
    /// The same moment by the clock, to set against the API server's and flotilla's own.
    pub started_at: SystemTime,
    pub log: PathBuf,
}

impl Flotilla {
    pub fn start(cluster: &Cluster, config: &Path, log: &Path) -> Flotilla {
        let rust_log =
            std::env::var("BENCH_FLOTILLA_LOG").unwrap_or_else(|_| "info,flotilla=debug".into());
        let (started, started_at) = (Instant::now(), SystemTime::now());
        let child = spawn_flotilla(
            config,
            log,
            "bench",
            &cluster.flotilla_kubeconfig,
            &rust_log,
        );
        RUNNING.lock().unwrap().push(child.id());
        Flotilla {
            child,
            process: OnceLock::new(),
            started,
            started_at,
            log: log.to_path_buf(),
        }
    }

    /// The process whose CPU and RSS are flotilla's.
    pub fn process(&self) -> Result<u32, String> {
        let child = self.child.id();
        let found = self.process.get_or_init(|| {
            let found = find_flotilla(child);
            match &found {
                Ok(pid) if *pid != child => {
                    RUNNING.lock().unwrap().push(*pid);
                    eprintln!(
                        "bench: measuring flotilla's pid {pid}, under its wrapper's pid {child}"
                    )
                }
                Ok(_) => {}
                Err(why) => eprintln!("bench: {why}"),
            }
            found
        });
        found.clone()
    }

    /// Every process of this flotilla, named: the flotilla process and a wrapper if any.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        match self.process() {
            Ok(pid) if pid == self.child.id() => vec![("flotilla", pid)],
            Ok(pid) => vec![("flotilla", pid), ("its wrapper", self.child.id())],
            Err(_) => vec![("flotilla's wrapper", self.child.id())],
        }
    }

    /// Seconds from the process's start to the first log line containing `needle`, by the time
    /// flotilla stamped on it.
    pub fn logged_after(&self, needle: &str) -> Option<f64> {
        let text = strip_ansi(&std::fs::read_to_string(&self.log).ok()?);
        let line = text.lines().find(|l| l.contains(needle))?;
        let at: Timestamp = line.split_whitespace().next()?.parse().ok()?;
        Some(self.seconds_to(at))
    }

    /// Seconds from the process's start to `at` (negative if before it).
    pub fn seconds_to(&self, at: Timestamp) -> f64 {
        let start = Timestamp::try_from(self.started_at).expect("a time after 1970");
        at.duration_since(start).as_secs_f64()
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
            panic!(
                "flotilla exited ({status}); log tail:\n{}",
                log_tail(&self.log, 30)
            );
        }
    }

    /// SIGTERM, as Kubernetes stops a pod, then reap the process. Under a wrapper flotilla
    /// itself is stopped first: a wrapper need not pass the signal on (strace detaches and
    /// exits), and a flotilla left running would keep the Lease from the next one.
    pub fn stop(mut self) {
        if let Some(pid) = self.wrapped() {
            send(pid, "-TERM");
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline && self.runs_flotilla(pid) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        terminate(&mut self.child, Duration::from_secs(15));
    }

    /// The flotilla process when it is not the child (it runs under a wrapper).
    fn wrapped(&self) -> Option<u32> {
        let pid = *self.process.get()?.as_ref().ok()?;
        (pid != self.child.id()).then_some(pid)
    }

    /// Whether `pid` still runs flotilla's binary (and is not a pid since reused).
    fn runs_flotilla(&self, pid: u32) -> bool {
        procstat::running(pid, Path::new(env!("CARGO_BIN_EXE_flotilla"))) == Some(pid)
    }
}

fn send(pid: u32, which: &str) {
    let _ = Command::new("kill")
        .args([which, &pid.to_string()])
        .status();
}

/// The process running flotilla's binary: `child` itself, or (under a wrapper) a descendant,
/// which may take the wrapper a moment to start.
fn find_flotilla(child: u32) -> Result<u32, String> {
    let exe = Path::new(env!("CARGO_BIN_EXE_flotilla"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(pid) = procstat::running(child, exe) {
            return Ok(pid);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no process running {} under pid {child} (BENCH_FLOTILLA_WRAP's wrapper?) \
                 after 10 s: its RSS and CPU are not measured",
                exe.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Removes terminal colour codes (flotilla's text logs have them, also in a file).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Drop for Flotilla {
    fn drop(&mut self) {
        let wrapped = self.wrapped();
        RUNNING
            .lock()
            .unwrap()
            .retain(|p| *p != self.child.id() && Some(*p) != wrapped);
        if let Some(pid) = wrapped.filter(|pid| self.runs_flotilla(*pid)) {
            send(pid, "-KILL");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
