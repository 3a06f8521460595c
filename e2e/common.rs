//! What the e2e suite (`e2e/tests`) and the fleet bench (`e2e/bench`) both need, included by each
//! with `#[path]`: kubectl, kubeconfigs for ServiceAccounts, clients, flotilla processes and the
//! API server's own write counters, a process's CPU time.

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

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

/// The API server on the host's loopback, from a kubeconfig's `https://127.0.0.1:PORT`.
pub fn api_server_address(kubeconfig: &Path) -> std::net::SocketAddr {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
    let server = kubeconfig.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server
        .clone()
        .unwrap();
    let address = server.trim_start_matches("https://").trim_end_matches('/');
    address
        .parse()
        .unwrap_or_else(|_| panic!("the API server at {server} is not an IP and port"))
}

/// Writes to `path` a kubeconfig like `admin`'s, authenticating as ServiceAccount
/// `namespace/account` (which must exist) with a token from the TokenRequest API, as clusters mint
/// them (no token Secrets since Kubernetes 1.24).
pub fn write_service_account_kubeconfig(admin: &Path, namespace: &str, account: &str, path: &Path) {
    // Longer than any test or bench run.
    let request = [
        "--namespace",
        namespace,
        "create",
        "token",
        account,
        "--duration=48h",
    ];
    let token = kubectl(admin, &request).trim().to_string();
    let mut kubeconfig = Kubeconfig::read_from(admin).unwrap();
    for user in &mut kubeconfig.auth_infos {
        if let Some(auth) = user.auth_info.as_mut() {
            auth.token = Some(token.clone().into());
        }
    }
    std::fs::write(path, serde_json::to_string(&kubeconfig).unwrap()).unwrap();
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Starts `flotilla run` with `config` as `kubeconfig`'s user, logging to `log`; its admin
/// endpoints on a free loopback port, never in the way of another flotilla's.
pub fn spawn_flotilla(
    config: &Path,
    log: &Path,
    identity: &str,
    kubeconfig: &Path,
    rust_log: &str,
) -> Child {
    flotilla_command(config, log, identity, kubeconfig, rust_log)
        .spawn()
        .expect("flotilla starts")
}

/// The command [`spawn_flotilla`] runs, for a caller to add to (say, a faked clock).
pub fn flotilla_command(
    config: &Path,
    log: &Path,
    identity: &str,
    kubeconfig: &Path,
    rust_log: &str,
) -> Command {
    let out = std::fs::File::create(log).unwrap();
    // BENCH_FLOTILLA_WRAP: a command to run flotilla under, for a profile (heaptrack, perf).
    let mut cmd = match std::env::var_os("BENCH_FLOTILLA_WRAP") {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg(env!("CARGO_BIN_EXE_flotilla"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_flotilla")),
    };
    cmd.args([
        "run",
        "--http-address",
        "127.0.0.1:0",
        "--identity",
        identity,
    ])
    .arg("--config")
    .arg(config)
    .env("KUBECONFIG", kubeconfig)
    .env("RUST_LOG", rust_log)
    .stdin(Stdio::null())
    .stdout(out.try_clone().unwrap())
    .stderr(out);
    cmd
}

/// SIGTERM, as Kubernetes stops a pod; waits up to `within` for the process to exit.
pub fn terminate(child: &mut Child, within: Duration) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last `n` lines of a log file, for a failure message.
pub fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(n).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// The resources flotilla stamps, and namespaces: where a steady state must show no writes.
pub const STAMPED_AND_NAMESPACES: [&str; 7] = [
    "namespaces",
    "serviceaccounts",
    "configmaps",
    "roles",
    "rolebindings",
    "services",
    "deployments",
];

/// Clock ticks per second (`getconf CLK_TCK`, 100 on Linux in practice).
pub fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The fields of /proc/PID/stat after the command name, which may contain spaces.
pub fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    // Field 3 (state) is a letter; keep positions by mapping it to 0.
    Some(rest.split(' ').map(|f| f.parse().unwrap_or(0)).collect())
}

/// utime + stime of the process itself, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let f = stat_fields(pid)?;
    // utime, stime are fields 14 and 15 of stat; `rest` starts at field 3.
    Some((f[11] + f[12]) as f64 / ticks_per_second())
}
