//! What Argo's workflow-controllers cost, read from outside them: their processes (found by
//! their executable and `--managed-namespace` flag in /proc), the requests each one's
//! ServiceAccount made (the API server's audit log), and the watches open on the API server (its
//! own `apiserver_longrunning_requests` gauge).

use crate::common::cpu_seconds;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The controller process of each namespace, by the flag it was started with.
pub fn processes(bin: &Path) -> BTreeMap<String, u32> {
    let mut found = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        // In the node stand-in's sandbox the build is mounted at the pod's /usr/local/bin, so the
        // host sees the exe under the pod's root: <pod dir>/rootfs/usr/local/bin.
        let ours = exe.file_name().is_some_and(|n| n == "workflow-controller")
            && (exe.starts_with(bin) || exe.ends_with("usr/local/bin/workflow-controller"));
        if !ours {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let namespace = cmdline
            .split(|b| *b == 0)
            .filter_map(|a| std::str::from_utf8(a).ok())
            .find_map(|a| a.strip_prefix("--managed-namespace="))
            .map(str::to_string);
        if let Some(namespace) = namespace {
            found.insert(namespace, pid);
        }
    }
    found
}

/// Resident memory of `pid` now, in MiB.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// CPU seconds of each of `pids` so far.
pub fn cpu(pids: &BTreeMap<String, u32>) -> BTreeMap<String, f64> {
    pids.iter()
        .filter_map(|(ns, pid)| Some((ns.clone(), cpu_seconds(*pid)?)))
        .collect()
}

/// Watches open on the API server now, by its own gauge.
pub async fn watches_open(client: &kube::Client) -> Option<f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).ok()?;
    let text = client.request_text(request).await.ok()?;
    let open: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Some(open)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    stage: String,
    verb: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    username: String,
}

/// The requests of the controllers' ServiceAccounts (`system:serviceaccount:<ns>:argo`) in the
/// audit log from one mark to the next: per namespace, per verb. A watch counts when it starts.
pub struct Requests {
    path: PathBuf,
    offset: u64,
}

impl Requests {
    /// From the log's current end.
    pub fn mark(path: &Path) -> Requests {
        let offset = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        Requests {
            path: path.to_path_buf(),
            offset,
        }
    }

    /// What was logged since the mark, or why it cannot be told (the log rotated or shrank).
    pub fn since(&self) -> Result<BTreeMap<String, BTreeMap<String, u64>>, String> {
        let mut file = std::fs::File::open(&self.path).map_err(|e| e.to_string())?;
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        if len < self.offset {
            return Err("the audit log rotated in the window".into());
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| e.to_string())?;
        let mut counts: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for line in text.lines() {
            let Ok(entry) = serde_json::from_str::<Entry>(line) else {
                continue;
            };
            let counted = match entry.verb.as_str() {
                "watch" => entry.stage == "ResponseStarted",
                _ => entry.stage == "ResponseComplete",
            };
            let namespace = entry
                .user
                .username
                .strip_prefix("system:serviceaccount:")
                .and_then(|rest| rest.strip_suffix(":argo"));
            if let (true, Some(namespace)) = (counted, namespace) {
                *counts
                    .entry(namespace.to_string())
                    .or_default()
                    .entry(entry.verb)
                    .or_default() += 1;
            }
        }
        Ok(counts)
    }
}

/// The p-th percentile (0-100) of `values`, nearest rank.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
