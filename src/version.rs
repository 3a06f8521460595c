//! What this binary is: the crate version and the git commit it was built from (see build.rs).

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The full hash of the commit built, or `unknown` outside a git checkout.
pub const COMMIT: &str = env!("FLOTILLA_GIT_COMMIT");

/// What `flotilla --version` prints after the name.
pub const VERSION_AND_COMMIT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FLOTILLA_GIT_COMMIT"),
    ")"
);

#[cfg(test)]
mod tests {
    use super::*;

    /// The commit is the checkout's HEAD at test time: fails if build.rs did not run again after
    /// a commit (a stale commit in a new binary).
    #[test]
    fn the_commit_is_the_checkouts_head() {
        let head = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|out| out.status.success());
        match head {
            Some(out) => assert_eq!(COMMIT, String::from_utf8_lossy(&out.stdout).trim()),
            None => assert_eq!(COMMIT, "unknown"),
        }
        assert_eq!(VERSION_AND_COMMIT, format!("{VERSION} (commit {COMMIT})"));
    }
}
