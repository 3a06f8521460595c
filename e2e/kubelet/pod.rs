//! One pod on the node stand-in, from its spec to a process and back: its volumes and env
//! (inputs.rs), its args, the process in a sandbox of its own (sandbox.rs) in a network namespace
//! of its own (netns.rs), Ready once the process answers its probe, restarted with a back-off when
//! it exits, stopped when the pod is deleted.

use super::inputs::{environment, lay_out};
use super::netns::Netns;
use super::place::Place;
use super::sandbox::PodSpec;
use super::spec::{self, Observed};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

/// A program the node runs for pods of `image`: what the image would hold.
#[derive(Clone, Debug)]
pub struct Program {
    pub image: String,
    /// Mounted at /usr/local/bin in the pod, on its PATH.
    pub bin: PathBuf,
    /// The image's entrypoint, for a container without `command`.
    pub entrypoint: Vec<String>,
    /// The image's user and group, for a pod that sets none.
    pub user: (u32, u32),
}

/// How a pod's process is to stop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    Run,
    /// The pod is being deleted: SIGTERM, SIGKILL after this grace, then the deletion confirmed.
    Graceful(Duration),
    /// The pod is gone, or the node stops: at once.
    Now,
}

/// The pod's container log: every process it ran, one after another.
pub fn log_path(dir: &Path) -> PathBuf {
    dir.join("container.log")
}

/// Runs `pod` until `stop` says otherwise.
pub async fn run(place: Place, pod: Pod, program: Program, mut stop: watch::Receiver<Stop>) {
    let mut observed = Observed::default();
    let prepared = match prepare(&place, &pod, &program).await {
        Ok(prepared) => prepared,
        Err(problem) => {
            eprintln!("node: pod {} cannot start: {problem}", pod.name_any());
            observed.waiting = Some(("CreateContainerConfigError".into(), problem));
            report(&place, &pod, &observed).await;
            let how = stopped(&mut stop).await;
            finish(&place, &pod, how).await;
            return;
        }
    };
    let mut backoff = Duration::from_secs(1);
    loop {
        let started = now();
        let mut child = match tokio::process::Command::from(prepared.spec.command(&prepared.log))
            .kill_on_drop(true)
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                observed.waiting = Some(("StartError".into(), e.to_string()));
                report(&place, &pod, &observed).await;
                let how = stopped(&mut stop).await;
                finish(&place, &pod, how).await;
                return;
            }
        };
        observed.running_since = Some(started.clone());
        observed.waiting = None;
        observed.ready = false;
        report(&place, &pod, &observed).await;
        let mut probe = tokio::time::interval(Duration::from_secs(1));
        let exit = loop {
            tokio::select! {
                exit = child.wait() => break exit.ok().and_then(|s| s.code()).unwrap_or(-1),
                _ = probe.tick() => {
                    let ready = match &prepared.health {
                        Some((port, path)) => answers(&prepared.netns, *port, path).await,
                        None => true,
                    };
                    if ready != observed.ready {
                        observed.ready = ready;
                        report(&place, &pod, &observed).await;
                    }
                }
                how = stopped(&mut stop) => {
                    terminate(&mut child, how).await;
                    finish(&place, &pod, how).await;
                    return;
                }
            }
        };
        eprintln!(
            "node: pod {}: the container exited ({exit}); restarting",
            pod.name_any()
        );
        observed.restarts += 1;
        observed.last_exit = Some((exit, started, now()));
        observed.running_since = None;
        observed.ready = false;
        let message = format!(
            "back-off {}s restarting failed container",
            backoff.as_secs()
        );
        observed.waiting = Some(("CrashLoopBackOff".into(), message));
        report(&place, &pod, &observed).await;
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            how = stopped(&mut stop) => {
                finish(&place, &pod, how).await;
                return;
            }
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// Once the node says to stop: how.
async fn stopped(stop: &mut watch::Receiver<Stop>) -> Stop {
    stop.wait_for(|s| *s != Stop::Run)
        .await
        .map_or(Stop::Now, |how| *how)
}

/// What the process needs, made once per pod.
struct Prepared {
    spec: PodSpec,
    netns: Netns,
    health: Option<(u16, String)>,
    log: PathBuf,
}

async fn prepare(place: &Place, pod: &Pod, program: &Program) -> Result<Prepared, String> {
    let spec = pod.spec.clone().unwrap_or_default();
    let [container] = spec.containers.as_slice() else {
        return Err("the node stand-in runs pods of one container".into());
    };
    if spec.init_containers.as_ref().is_some_and(|c| !c.is_empty()) {
        return Err("the node stand-in runs no init containers".into());
    }
    let dir = &place.dir;
    let rootfs = dir.join("rootfs");
    for d in ["etc", "usr/local/bin"] {
        std::fs::create_dir_all(rootfs.join(d)).map_err(|e| e.to_string())?;
    }
    let passwd =
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532::/home/nonroot:/sbin/nologin\n";
    std::fs::write(rootfs.join("etc/passwd"), passwd).map_err(|e| e.to_string())?;

    let mut mounts = vec![(program.bin.clone(), "/usr/local/bin".to_string(), true)];
    for mount in container.volume_mounts.iter().flatten() {
        if mount.sub_path.is_some() || mount.sub_path_expr.is_some() {
            return Err(format!(
                "volumeMount {}: subPath is not supported",
                mount.name
            ));
        }
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| format!("volumeMount {} names no volume", mount.name))?;
        let host = dir.join("volumes").join(&volume.name);
        let read_only = lay_out(place, pod, volume, &host).await? || mount.read_only == Some(true);
        mounts.push((host, mount.mount_path.clone(), read_only));
    }

    let env = environment(place, pod, container).await?;
    let expanded = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter()
            .flatten()
            .map(|a| spec::expand(a, &env))
            .collect()
    };
    let mut argv = expanded(&container.command);
    if argv.is_empty() {
        argv = program.entrypoint.clone();
    }
    argv.extend(expanded(&container.args));
    let context = container.security_context.as_ref();
    let pod_context = spec.security_context.as_ref();
    let uid = context
        .and_then(|c| c.run_as_user)
        .or(pod_context.and_then(|c| c.run_as_user))
        .map_or(program.user.0, |u| u as u32);
    let gid = context
        .and_then(|c| c.run_as_group)
        .or(pod_context.and_then(|c| c.run_as_group))
        .map_or(program.user.1, |g| g as u32);
    let netns = Netns::new(place.api_server).map_err(|e| format!("network namespace: {e}"))?;
    let sandbox = PodSpec {
        rootfs,
        netns: Some(netns.path()),
        mounts,
        uid,
        gid,
        argv,
        env,
    };
    sandbox.make_mount_points();
    Ok(Prepared {
        spec: sandbox,
        netns,
        health: spec::health_check(container)?,
        log: log_path(dir),
    })
}

/// Whether an HTTP GET of `path` on the pod's `port` answers 2xx or 3xx, as an httpGet probe.
async fn answers(netns: &Netns, port: u16, path: &str) -> bool {
    let attempt = async {
        let mut stream = netns.connect(port).await.ok()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.ok()?;
        let code: u16 = std::str::from_utf8(&head[9..12]).ok()?.parse().ok()?;
        Some((200..400).contains(&code))
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}

/// SIGTERM and the pod's grace, then SIGKILL.
async fn terminate(child: &mut tokio::process::Child, how: Stop) {
    if let (Stop::Graceful(grace), Some(pid)) = (how, child.id()) {
        // SAFETY: kill(2) on our own child, which has not been reaped (wait() has not returned).
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
    }
    let _ = child.kill().await;
}

/// After the process stopped: a pod being deleted is deleted for good, as a kubelet confirms it.
pub async fn finish(place: &Place, pod: &Pod, how: Stop) {
    if let Stop::Graceful(_) = how {
        let api: Api<Pod> =
            Api::namespaced(place.client.clone(), &pod.namespace().unwrap_or_default());
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        if let Err(e) = api.delete(&pod.name_any(), &params).await {
            eprintln!("node: pod {}: confirming its deletion: {e}", pod.name_any());
        }
    }
}

/// The pod's status as `observed`, patched as a kubelet does (a pod deleted meanwhile needs none).
async fn report(place: &Place, pod: &Pod, observed: &Observed) {
    let api: Api<Pod> = Api::namespaced(place.client.clone(), &pod.namespace().unwrap_or_default());
    let current = api
        .get_status(&pod.name_any())
        .await
        .unwrap_or_else(|_| pod.clone());
    let patch = spec::status(&current, observed, &now());
    let _ = api
        .patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await;
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
