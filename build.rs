//! Records the git commit flotilla is built from (`FLOTILLA_GIT_COMMIT`), for `flotilla
//! --version`, the start-up log line, the `flotilla_build_info` metric and the image's revision
//! label. Outside a git checkout (a source tarball) it is `unknown`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FLOTILLA_GIT_COMMIT={commit}");
    // Run again when HEAD moves: HEAD itself (a checkout, a detached commit) and the branch it
    // names (a commit on it). A path that does not exist would make every build run this again,
    // so a branch kept only in packed-refs is watched through packed-refs and the directory its
    // loose ref appears in on the next commit.
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(loose) = git(&["rev-parse", "--git-path", &branch])
    {
        if Path::new(&loose).exists() {
            watched.push(Some(loose));
        } else {
            watched.push(Path::new(&loose).parent().map(|d| d.display().to_string()));
            watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
        }
    }
    for path in watched.into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
