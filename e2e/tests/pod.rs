//! flotilla's image run the way a kubelet runs the Deployment's pod, without a container
//! runtime (there is no kubelet here): the image unpacked with umoci; its root filesystem
//! read-only; the pod's volumes laid out as the kubelet lays out a ConfigMap (files behind
//! `..data` symlinks) and bind-mounted where the Deployment mounts them; the ServiceAccount's
//! token, namespace and the cluster's CA where kube-rs's in-cluster config reads them; the image's
//! entrypoint with the Deployment's args and env; the securityContext's user. The mounts live in
//! a mount namespace of their own (`unshare --mount`), so none is left on the host, whatever
//! happens to the test. The network is the host's, so the API server on 127.0.0.1 is reachable and
//! the pod's port is 127.0.0.1's.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use crate::kubelet::sandbox::{PodSpec, SERVICE_ACCOUNT_DIR, write_volume};

/// The OCI layout `make image` writes: `<cargo target dir>/image`, tagged with the crate version.
pub struct Image {
    pub layout: PathBuf,
    pub tag: String,
}

impl Image {
    pub fn built() -> Image {
        // The test binary's flotilla is <target dir>/debug/flotilla.
        let target = Path::new(env!("CARGO_BIN_EXE_flotilla"))
            .ancestors()
            .nth(2)
            .unwrap()
            .to_path_buf();
        let image = Image {
            layout: target.join("image"),
            tag: env!("CARGO_PKG_VERSION").to_string(),
        };
        assert!(
            image.layout.join("index.json").exists(),
            "no image in {}: run `make image` (make test does)",
            image.layout.display()
        );
        image
    }

    /// `oci:<layout>:<tag>`, as umoci and skopeo name it.
    pub fn reference(&self) -> String {
        format!("{}:{}", self.layout.display(), self.tag)
    }

    /// A blob of the layout, parsed as JSON.
    pub fn blob(&self, digest: &str) -> serde_json::Value {
        let hex = digest.strip_prefix("sha256:").unwrap();
        let path = self.layout.join("blobs/sha256").join(hex);
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// The digest of the tagged manifest: what a registry reports after a push.
    pub fn digest(&self) -> String {
        let index = read_json(&self.layout.join("index.json"));
        let tagged = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == self.tag.as_str())
            .unwrap_or_else(|| panic!("no tag {} in {index}", self.tag));
        tagged["digest"].as_str().unwrap().to_string()
    }

    /// The manifest attached to the image with an artifactType of `artifact_type`
    /// (image/sbom.sh's SBOM), by its digest: listed in index.json, its subject the image.
    pub fn referrer(&self, artifact_type: &str) -> (String, serde_json::Value) {
        let index = read_json(&self.layout.join("index.json"));
        let listed = index["manifests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["artifactType"] == artifact_type)
            .unwrap_or_else(|| panic!("no {artifact_type} in {index}: run `make image`"));
        let digest = listed["digest"].as_str().unwrap().to_string();
        let manifest = self.blob(&digest);
        (digest, manifest)
    }

    /// The image config (`config.Labels`, `config.User`, `config.Entrypoint`, ...).
    pub fn config(&self) -> serde_json::Value {
        let manifest = self.blob(&self.digest());
        self.blob(manifest["config"]["digest"].as_str().unwrap())
    }

    /// The image's root filesystem, unpacked into `bundle` (umoci unpack, as root, so owners are
    /// kept). Returns the rootfs.
    pub fn unpack(&self, bundle: &Path) -> PathBuf {
        run(Command::new("umoci")
            .args(["unpack", "--image", &self.reference()])
            .arg(bundle));
        bundle.join("rootfs")
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs `cmd`, panicking with its stderr if it fails; returns stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The Deployment of manifests/ and its one container.
pub fn deployment(repo: &Path) -> (Deployment, Container) {
    let text = std::fs::read_to_string(repo.join("manifests/deployment.yaml")).unwrap();
    let deployment: Deployment = serde_saphyr::from_str(&text).unwrap();
    let pod = deployment.spec.template.spec.clone().unwrap();
    assert_eq!(pod.containers.len(), 1, "flotilla's pod has one container");
    let container = pod.containers[0].clone();
    (deployment, container)
}

/// The container port named `name` (a probe's `port: http`).
pub fn container_port(container: &Container, name: &str) -> i32 {
    container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no container port named {name}"))
        .container_port
}

/// One entry of a root filesystem, with everything a write would change.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
    /// sha256 of a file's content, a symlink's target, empty for a directory.
    pub content: String,
}

/// Every path under `root` (not following symlinks), with its metadata and content hash.
pub fn manifest(root: &Path) -> BTreeMap<String, Entry> {
    let mut entries = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let content = if meta.is_dir() {
            for child in std::fs::read_dir(&path).unwrap() {
                pending.push(child.unwrap().path());
            }
            String::new()
        } else if meta.file_type().is_symlink() {
            std::fs::read_link(&path).unwrap().display().to_string()
        } else {
            format!("{:x}", Sha256::digest(std::fs::read(&path).unwrap()))
        };
        let name = format!("/{}", path.strip_prefix(root).unwrap().display());
        entries.insert(
            name,
            Entry {
                mode: meta.mode(),
                uid: meta.uid(),
                gid: meta.gid(),
                mtime: meta.mtime(),
                content,
            },
        );
    }
    entries
}

/// What differs between two manifests, one line per path.
pub fn changes(before: &BTreeMap<String, Entry>, after: &BTreeMap<String, Entry>) -> Vec<String> {
    let mut changed = Vec::new();
    for (path, entry) in after {
        match before.get(path) {
            None => changed.push(format!("added {path}")),
            Some(old) if old != entry => {
                changed.push(format!("changed {path}: {old:?} -> {entry:?}"))
            }
            Some(_) => {}
        }
    }
    changed.extend(
        before
            .keys()
            .filter(|p| !after.contains_key(*p))
            .map(|p| format!("removed {p}")),
    );
    changed
}
