//! `kubectl flotilla`: the binary linked as kubectl-flotilla and kubectl_complete-flotilla on the
//! PATH, run and completed by the real kubectl (no cluster needed).

use std::path::Path;
use std::process::Command;

/// `kubectl args` with a PATH that holds the two links to this build's binary first.
fn kubectl(links: &Path, args: &[&str]) -> (bool, String, String) {
    let path = format!(
        "{}:{}",
        links.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("kubectl")
        .args(args)
        .env("PATH", path)
        .output()
        .expect("kubectl on PATH");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn links() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["kubectl-flotilla", "kubectl_complete-flotilla"] {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_flotilla"), dir.path().join(name)).unwrap();
    }
    dir
}

#[test]
fn kubectl_runs_the_binary_as_its_flotilla_plugin() {
    let links = links();
    let (ok, out, err) = kubectl(links.path(), &["flotilla", "rollout", "status", "--help"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("Usage: kubectl flotilla rollout status"),
        "{out}"
    );
    let (ok, out, _) = kubectl(links.path(), &["flotilla", "--version"]);
    assert!(ok);
    assert!(
        out.starts_with(&format!("flotilla {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    // A mistake is told in kubectl's words.
    let (ok, _, err) = kubectl(links.path(), &["flotilla", "rollout", "sttus"]);
    assert!(!ok);
    assert!(err.contains("Usage: kubectl flotilla rollout"), "{err}");
}

#[test]
fn kubectl_completes_the_plugins_subcommands_and_flags() {
    let links = links();
    // `kubectl __complete` is what kubectl's shell completion scripts call.
    let (ok, out, err) = kubectl(links.path(), &["__complete", "flotilla", "rollout", ""]);
    assert!(ok, "{err}");
    let names: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(
        names,
        ["status", "pause", "resume", "undo", "history", ":4"],
        "{out}"
    );
    let (_, out, _) = kubectl(
        links.path(),
        &["__complete", "flotilla", "rollout", "status", "--w"],
    );
    assert!(out.starts_with("--watch\t"), "{out}");
}
