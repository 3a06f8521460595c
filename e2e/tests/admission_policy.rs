//! The admission policy (`flotilla rbac --admission-policy`) in the suite. `manifests/` installs
//! the one generated for flotilla.yaml's selector, but each test runs its own instance with its
//! own selector, all as flotilla's ServiceAccount: the suite removes the installed policy, and a
//! test that needs one installs the policy generated for its own fleet, removed when it ends.

use crate::harness::{Fleet, env, kubectl};

/// The policy's and its binding's name (`flotilla::admission::POLICY`).
const NAME: &str = flotilla::admission::POLICY;

/// Removes the policy and its binding, if installed.
pub fn remove() {
    remove_as(&env().admin_kubeconfig);
}

/// [`remove`] with the admin's kubeconfig at `admin` (while the suite's set-up runs).
pub fn remove_as(admin: &std::path::Path) {
    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
    ] {
        kubectl(admin, &["delete", kind, NAME, "--ignore-not-found"]);
    }
}

/// The policy generated for a fleet's config, installed until dropped.
pub struct Installed;

impl Installed {
    /// Installs what `flotilla rbac --admission-policy` prints for `fleet` (argo-server on too,
    /// as `make manifests` generates it).
    pub fn for_fleet(fleet: &Fleet) -> Installed {
        let (code, yaml) = fleet.cli(&[
            "rbac",
            "--admission-policy",
            "--set",
            "argoServer.enabled=true",
        ]);
        assert_eq!(code, 0, "flotilla rbac --admission-policy");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("admission-policy.yaml");
        std::fs::write(&path, yaml).unwrap();
        kubectl(
            &env().admin_kubeconfig,
            &["apply", "-f", path.to_str().unwrap()],
        );
        Installed
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        remove();
    }
}
