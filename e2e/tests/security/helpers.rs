//! What the security tests share: running the binary to its exit, waiting for a
//! NamespaceWorker or a stamped set, the [`Untouched`] snapshot, and RBAC object builders.

use crate::harness::*;
use flotilla::status::{NamespaceWorker, Phase};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams, ResourceExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Generous: other engineers run heavy jobs on the same two cores.
pub(super) const LONG: Duration = Duration::from_secs(180);

/// How many objects the repository's templates stamp for a namespace.
pub(super) const FULL_SET: usize = 9;

/// Runs the flotilla binary to its exit (killed after 60 s): (exit code, stdout, stderr).
pub(super) fn flotilla_exit(args: &[&str], kubeconfig: &Path) -> (Option<i32>, String, String) {
    let limit = Duration::from_secs(60);
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("FLOTILLA_HTTP_ADDRESS", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (code, read(&out), read(&err))
}

// ---- Waiting for flotilla. ----

pub(super) fn workers(client: &kube::Client) -> Api<NamespaceWorker> {
    Api::all(client.clone())
}

pub(super) async fn wait_worker(
    client: &kube::Client,
    namespace: &str,
    what: &str,
    test: impl Fn(&NamespaceWorker) -> bool,
) -> NamespaceWorker {
    eventually_within(
        LONG,
        &format!("NamespaceWorker {namespace}: {what}"),
        || async {
            let worker = workers(client).get_opt(namespace).await.ok()??;
            worker.status.as_ref()?;
            test(&worker).then_some(worker)
        },
    )
    .await
}

pub(super) async fn wait_render_failed(client: &kube::Client, namespace: &str) -> String {
    let worker = wait_worker(client, namespace, "RenderFailed", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase == Phase::RenderFailed)
    })
    .await;
    worker.status.unwrap().message
}

pub(super) async fn wait_rendered(client: &kube::Client, namespace: &str) {
    wait_worker(client, namespace, "rendered", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| !matches!(s.phase, Phase::RenderFailed))
    })
    .await;
}

/// Waits until `fleet` has stamped exactly `want` objects for `namespace`.
pub(super) async fn wait_count(
    fleet: &Fleet,
    client: &kube::Client,
    namespace: &str,
    want: usize,
) -> Vec<DynamicObject> {
    eventually_within(
        LONG,
        &format!("{want} objects stamped for {namespace}"),
        || async {
            let have = fleet.stamped_for(client, namespace).await;
            (have.len() == want).then_some(have)
        },
    )
    .await
}

/// Waits until the [`FULL_SET`] is stamped for `namespace` and settled ([`wait_count`]), and
/// its NamespaceWorker shows no render failure.
pub(super) async fn wait_full_set(fleet: &Fleet, client: &kube::Client, namespace: &str) {
    wait_count(fleet, client, namespace, FULL_SET).await;
    wait_rendered(client, namespace).await;
}

// ---- "Nothing changed". ----

/// (kind, namespace, name, version) of every object, sorted: the resourceVersion, except for
/// Deployments, whose status the controller-manager keeps writing: their generation (which only
/// a change of the spec bumps). Writes that touch only metadata show in the audit log instead.
pub(super) fn versions(objects: &[DynamicObject]) -> Vec<(String, String, String, String)> {
    let mut v: Vec<_> = objects
        .iter()
        .map(|o| {
            let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let version = if kind == "Deployment" {
                format!("generation {:?}", o.metadata.generation)
            } else {
                o.resource_version().unwrap_or_default()
            };
            (
                kind,
                o.namespace().unwrap_or_default(),
                o.name_any(),
                version,
            )
        })
        .collect();
    v.sort();
    v
}

/// What flotilla must leave as it is in a namespace: the versions of what it stamped there as
/// of now, and from now on an audit window of the writes it makes there.
pub(super) struct Untouched {
    namespace: String,
    pub(super) versions: Vec<(String, String, String, String)>,
    audit: AuditWindow,
}

pub(super) async fn untouched(fleet: &Fleet, client: &kube::Client, namespace: &str) -> Untouched {
    Untouched {
        namespace: namespace.to_string(),
        versions: versions(&fleet.stamped_for(client, namespace).await),
        audit: AuditWindow::open(),
    }
}

impl Untouched {
    /// Asserts that nothing flotilla stamped there changed and that it wrote nothing there
    /// since; and, so that "nothing" is not for lack of data, that the audit window holds this
    /// fleet's leader Lease renewals (a running flotilla renews every 2 s).
    pub(super) async fn assert_kept(&self, fleet: &Fleet, client: &kube::Client) {
        let ns = &self.namespace;
        let now = versions(&fleet.stamped_for(client, ns).await);
        assert_eq!(self.versions, now, "{ns}: a stamped object changed");
        // A window can be shorter than one renewal period: wait for the next renewal.
        eventually_within(
            Duration::from_secs(10),
            &format!(
                "{ns}: a Lease renewal of {} in the audit window",
                fleet.instance
            ),
            || async {
                (self.audit.lease_writes(FLOTILLA_USER, &fleet.instance) > 0).then_some(())
            },
        )
        .await;
        assert_eq!(
            self.audit.writes_in(FLOTILLA_USER, ns),
            0,
            "flotilla wrote in {ns}"
        );
    }
}

// ---- Acting as someone: Namespaces, RBAC objects, refusals. ----

/// A merge patch of Namespace `name`, as `client`.
pub(super) async fn patch_namespace(
    client: &kube::Client,
    name: &str,
    patch: serde_json::Value,
) -> kube::Result<Namespace> {
    Api::<Namespace>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
}

/// Asserts that the API server refused `result` as Forbidden (403), not for any other reason.
#[track_caller]
pub(super) fn assert_forbidden<T: std::fmt::Debug>(what: &str, result: kube::Result<T>) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            assert_eq!(status.reason, "Forbidden", "{what}: {status:?}");
        }
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

/// Creates `object` in `namespace` as `client`, which must be allowed to.
pub(super) async fn create_in<K>(client: &kube::Client, namespace: &str, object: &K)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), object)
        .await
        .unwrap();
}

pub(super) fn meta(name: &str) -> kube::core::ObjectMeta {
    kube::core::ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

pub(super) fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
    PolicyRule {
        api_groups: strings(groups),
        resources: strings(resources),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub(super) fn account(name: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(name),
        ..Default::default()
    }
}

pub(super) fn role(name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(name),
        rules: Some(rules),
    }
}

pub(super) fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
    }
}

pub(super) fn service_account_subject(namespace: &str, name: &str) -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".into(),
        name: name.into(),
        namespace: Some(namespace.into()),
        ..Default::default()
    }]
}

/// RoleBinding `name` of `role` (a `kind`, Role or ClusterRole, and its name) to ServiceAccount
/// `account` (a namespace and a name).
pub(super) fn binding(
    name: &str,
    (kind, role): (&str, &str),
    (namespace, account): (&str, &str),
) -> RoleBinding {
    RoleBinding {
        metadata: meta(name),
        role_ref: role_ref(kind, role),
        subjects: Some(service_account_subject(namespace, account)),
    }
}
