//! The script baseline: what admins do without flotilla, `flotilla render | kubectl apply
//! --server-side`, one namespace after the other. Run on a sample and extrapolated to N.

use crate::audit::{Actor, AuditTail};
use crate::cluster::Cluster;
use crate::probe::{Probe, wait_idle};
use crate::report::Row;
use crate::setup::{Bench, LABEL};
use crate::{common, procstat};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub const SCRIPT: &str = "script (render|kubectl)";

pub async fn run(
    bench: &Bench,
    (cluster, config_path): (&Cluster, &Path),
    names: &[String],
    per_namespace: usize,
    audit: &mut AuditTail,
) -> Row {
    let cache = bench.work.join("kubectl-cache");
    let kubeconfig = cluster.admin_kubeconfig.to_str().unwrap();
    let cache = cache.to_str().unwrap();
    // An admin's discovery cache is warm; so is this one before the clock starts.
    common::kubectl(
        &cluster.admin_kubeconfig,
        &["--cache-dir", cache, "api-resources"],
    );
    let script = r#"set -euo pipefail
"$0" render --config "$1" --namespace "$2" --label "$3" |
  kubectl --kubeconfig "$4" --cache-dir "$5" apply --server-side -f - >/dev/null"#;
    let idle = wait_idle(bench.idle_max, None).await;
    audit.take();
    let probe = Probe::start(&cluster.admin).await;
    let me = std::process::id();
    let cpu0 = procstat::children_cpu_seconds(me).unwrap_or(0.0);
    let t0 = Instant::now();
    for ns in names {
        let status = Command::new("bash")
            .args(["-c", script, env!("CARGO_BIN_EXE_flotilla")])
            .arg(config_path)
            .args([ns, &format!("{LABEL}=on"), kubeconfig, cache])
            .status()
            .expect("bash runs");
        assert!(status.success(), "script baseline failed for {ns}");
    }
    let sample_seconds = t0.elapsed().as_secs_f64();
    let cp = probe.finish(&cluster.admin, sample_seconds).await;
    let cpu = procstat::children_cpu_seconds(me).map(|c| c - cpu0);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = audit.take();
    let per_ns = sample_seconds / names.len() as f64;
    let scale = bench.n as f64 / names.len() as f64;
    let verbs: BTreeMap<String, u64> = window
        .verbs_of(Actor::Kubectl)
        .into_iter()
        .map(|(v, n)| (v, (n as f64 * scale).round() as u64))
        .collect();
    Row {
        scenario: SCRIPT,
        n: bench.n,
        objects: per_namespace * bench.n,
        seconds: per_ns * bench.n as f64,
        throughput: true,
        rss_mib: None,
        cpu_s: cpu.map(|c| c * scale),
        verbs,
        notes: vec![
            format!(
                "EXTRAPOLATED: measured {} namespaces in {sample_seconds:.1} s ({:.0} ms each), x{scale:.1} \
                 to N={}; CPU s and requests likewise scaled (kubectl + flotilla render processes)",
                names.len(),
                per_ns * 1000.0,
                bench.n
            ),
            format!("{idle}{cp}"),
        ]
        .into_iter()
        .chain(window.gap_note())
        .collect(),
    }
}
