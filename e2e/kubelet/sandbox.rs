//! A container without a container runtime: a root filesystem made read-only, the pod's volumes
//! bind-mounted where the container mounts them, `/proc` and the usual devices, the process
//! chrooted into it as the pod's user. The mounts live in a mount namespace of their own
//! (`unshare --mount`), so none is left on the host, whatever happens to the test; with a
//! network namespace, the process sees only that namespace's network.

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Where a pod's ServiceAccount volume is mounted, and in-cluster clients read their credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Writes `files` into `dir` as the kubelet writes a ConfigMap, Secret or projected volume:
/// the files in a timestamped directory, `..data` pointing at it, each name a symlink into
/// `..data`. Readable by the pod's user, as the volume's default mode 0644 makes them.
pub fn write_volume(dir: &Path, files: &BTreeMap<String, Vec<u8>>) {
    let data = dir.join("..2026_01_01_00_00_00.000000000");
    std::fs::create_dir_all(&data).unwrap();
    for (name, content) in files {
        let file = data.join(name);
        std::fs::write(&file, content).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
    symlink(data.file_name().unwrap(), dir.join("..data")).unwrap();
    for d in [dir, &data] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A pod's worth of set-up: what is mounted where, who runs what.
pub struct PodSpec {
    pub rootfs: PathBuf,
    /// A network namespace to run in (a path `nsenter --net` takes); the host's if none.
    pub netns: Option<PathBuf>,
    /// (host directory, path in the pod, read-only)
    pub mounts: Vec<(PathBuf, String, bool)>,
    pub uid: u32,
    pub gid: u32,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
}

/// Single-quoted for sh; the test's own paths never hold a quote.
fn quoted(path: &Path) -> String {
    let text = path.display().to_string();
    assert!(!text.contains('\''), "{text}");
    format!("'{text}'")
}

impl PodSpec {
    /// The directories the runtime mounts over, made in the rootfs before the pod starts (a
    /// container runtime makes them too); take a rootfs manifest after this.
    pub fn make_mount_points(&self) {
        for target in ["/proc", "/dev"]
            .into_iter()
            .chain(self.mounts.iter().map(|(_, t, _)| t.as_str()))
        {
            std::fs::create_dir_all(self.rootfs.join(target.trim_start_matches('/'))).unwrap();
        }
    }

    /// Starts the pod's process; stdout and stderr go to `log` (outside the pod).
    pub fn start(&self, log: &Path) -> Child {
        self.command(log).spawn().expect("unshare starts")
    }

    /// The command that starts the pod's process, for a caller that spawns it its own way.
    pub fn command(&self, log: &Path) -> Command {
        let root = &self.rootfs;
        let mut script = vec![
            "set -e".to_string(),
            // The root read-only, as readOnlyRootFilesystem makes it.
            format!("mount --bind {0} {0}", quoted(root)),
            format!("mount -o remount,bind,ro {}", quoted(root)),
            format!("mount -t proc proc {}", quoted(&root.join("proc"))),
            // The devices every container gets.
            format!(
                "mount -t tmpfs -o nosuid,mode=0755 tmpfs {}",
                quoted(&root.join("dev"))
            ),
        ];
        for device in ["null", "zero", "full", "random", "urandom", "tty"] {
            let target = quoted(&root.join("dev").join(device));
            script.push(format!("touch {target}"));
            script.push(format!("mount --bind /dev/{device} {target}"));
        }
        for (source, target, read_only) in &self.mounts {
            let target = quoted(&root.join(target.trim_start_matches('/')));
            script.push(format!("mount --bind {} {target}", quoted(source)));
            if *read_only {
                script.push(format!("mount -o remount,bind,ro {target}"));
            }
        }
        script.push(format!(
            "exec chroot --userspec={}:{} {} \"$@\"",
            self.uid,
            self.gid,
            quoted(root)
        ));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut command = match &self.netns {
            Some(netns) => {
                let mut nsenter = Command::new("nsenter");
                nsenter
                    .arg(format!("--net={}", netns.display()))
                    .arg("--")
                    .arg("unshare");
                nsenter
            }
            None => Command::new("unshare"),
        };
        command
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg(script.join("\n"))
            .arg("sh")
            .args(&self.argv)
            // Only what the kubelet would set: no KUBECONFIG, no HOME.
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        command
    }
}
