//! The API server's audit log (Metadata level), read as a window from a moment on: who made
//! which request, attributable to one identity, unlike the server's counters.
//!
//! A count of requests can only prove "none" if the log was read and covers the window, so a
//! window panics when the log is missing or shorter than when it opened: a comparison can never
//! come out 0 == 0 for lack of data. The window keeps the file it opened, so a rotation (the API
//! server renames the full log and starts a new one) loses nothing: the old file is read to its
//! end, then the new one. Tests still add a positive control (a request that must be in the
//! window) where they assert that something is absent.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The username flotilla's ServiceAccount token authenticates as.
pub const FLOTILLA_USER: &str = "system:serviceaccount:flotilla-system:flotilla";

fn log_path() -> PathBuf {
    let state = std::env::var("FLOTILLA_E2E_DIR").unwrap_or_else(|_| "/tmp/flotilla-e2e".into());
    PathBuf::from(state).join("audit.log")
}

/// The requests completed from the moment the window opened.
pub struct AuditWindow {
    /// The log as it was when the window opened, kept open across a rotation.
    opened: std::fs::File,
    inode: u64,
    start: u64,
}

impl AuditWindow {
    pub fn open() -> AuditWindow {
        let path = log_path();
        let opened = std::fs::File::open(&path)
            .unwrap_or_else(|e| panic!("the audit log {}: {e}", path.display()));
        let meta = opened.metadata().unwrap();
        AuditWindow {
            opened,
            inode: meta.ino(),
            start: meta.len(),
        }
    }

    /// Everything logged since the window opened.
    fn text(&self) -> String {
        let path = log_path();
        let mut file = self.opened.try_clone().unwrap();
        let len = file.metadata().unwrap().len();
        assert!(
            len >= self.start,
            "the audit log {} was truncated since the window opened: its counts would be wrong",
            path.display()
        );
        file.seek(SeekFrom::Start(self.start)).unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        let current = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("the audit log {}: {e}", path.display()));
        if current.ino() != self.inode {
            // Rotated: the rest is in the new file.
            text.push_str(&std::fs::read_to_string(&path).unwrap());
        }
        text
    }

    /// Completed requests by anyone in the window.
    pub fn all_requests(&self) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .collect()
    }

    /// Completed requests by `username` in the window (only lines mentioning `needle`, if given:
    /// much quicker than parsing every line).
    pub fn requests(&self, username: &str, needle: Option<&str>) -> Vec<serde_json::Value> {
        self.text()
            .lines()
            .filter(|line| needle.is_none_or(|n| line.contains(n)))
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|e| e["stage"] == "ResponseComplete" && e["user"]["username"] == username)
            .collect()
    }

    /// Whether the log holds a request, anyone's, received at `moment` or later: the window
    /// covers what was received before it (requests are logged as they complete).
    pub fn reaches(&self, moment: k8s_openapi::jiff::Timestamp) -> bool {
        self.text().lines().rev().any(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|e| e["requestReceivedTimestamp"].as_str()?.parse().ok())
                .is_some_and(|received: k8s_openapi::jiff::Timestamp| received >= moment)
        })
    }

    /// Write requests (create, update, patch, delete) by `username`, as "verb URI". Renewals of
    /// the leader Lease are left out: holding a lease is writing to it.
    pub fn writes(&self, username: &str) -> Vec<String> {
        self.requests(username, None)
            .iter()
            .filter(|e| is_write(e) && e["objectRef"]["resource"] != "leases")
            .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
            .collect()
    }

    /// Write requests `username` made on objects in `namespace`.
    pub fn writes_in(&self, username: &str, namespace: &str) -> usize {
        self.requests(username, Some(namespace))
            .iter()
            .filter(|e| is_write(e) && e["objectRef"]["namespace"] == namespace)
            .count()
    }

    /// Reads of the leader Lease `name` by `username`: what every replica does, leader or not,
    /// so they show that the window holds its requests at all.
    pub fn lease_reads(&self, username: &str, name: &str) -> usize {
        self.requests(username, Some(&format!("/leases/{name}")))
            .iter()
            .filter(|e| e["verb"] == "get")
            .count()
    }

    /// When the first successful write of the Lease `name` by `username` was received.
    pub fn lease_taken(&self, username: &str, name: &str) -> Option<k8s_openapi::jiff::Timestamp> {
        self.requests(username, Some(&format!("/leases/{name}")))
            .iter()
            .filter(|e| is_write(e) && e["responseStatus"]["code"] == 200)
            .filter_map(received)
            .min()
    }

    /// Writes (renewals, acquisitions) of the leader Lease `name` by `username`.
    pub fn lease_writes(&self, username: &str, name: &str) -> usize {
        self.requests(username, Some(&format!("/leases/{name}")))
            .iter()
            .filter(|e| is_write(e))
            .count()
    }
}

pub fn is_write(entry: &serde_json::Value) -> bool {
    matches!(
        entry["verb"].as_str(),
        Some("create" | "update" | "patch" | "delete" | "deletecollection")
    )
}

/// When `entry` was received by the API server.
pub fn received(entry: &serde_json::Value) -> Option<k8s_openapi::jiff::Timestamp> {
    entry["requestReceivedTimestamp"].as_str()?.parse().ok()
}
