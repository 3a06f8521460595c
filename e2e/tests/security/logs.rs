//! flotilla's logs: structured (one JSON object a line), with no token and no object bodies,
//! and still naming what it did.

use super::helpers::*;
use crate::harness::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub(super) async fn logs_are_structured_and_carry_no_token_and_no_object_bodies() {
    let client = admin().await;
    let fleet = Fleet::new("sec-logs");
    let ns = "sec-logs-a";
    let log = tempfile::NamedTempFile::new()
        .unwrap()
        .into_temp_path()
        .keep()
        .unwrap();
    let running = Logged::start(&fleet, &log);
    stamped_repaired_and_failed_to_render(&fleet, &client, ns, &running).await;
    let text = running.stop().await;

    every_line_is_structured(&text);
    no_token_and_no_object_bodies(&text);
    // And it did log what it did, with the objects named.
    for said in [
        "created",
        "drift repaired",
        "RenderFailed",
        "Deployment sec-logs-a/workflow-controller",
    ] {
        assert!(text.contains(said), "the log lacks {said:?}");
    }
    let _ = std::fs::remove_file(&log);
    delete_namespaces(&client, &[ns]).await;
}

/// A running `flotilla run` with JSON logs at debug level, written to a file; killed when
/// dropped.
struct Logged(std::process::Child, PathBuf);

impl Logged {
    fn start(fleet: &Fleet, log: &Path) -> Logged {
        let out = std::fs::File::create(log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["run", "--log-format", "json", "--config"])
            .arg(fleet.config_file())
            .env("KUBECONFIG", &env().flotilla_kubeconfig)
            .env("RUST_LOG", "debug")
            .env("FLOTILLA_HTTP_ADDRESS", "127.0.0.1:0")
            .env("POD_NAME", "sec-logs-a")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Logged(child, log.to_path_buf())
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }

    /// SIGTERM; the log as it stands 2 s later.
    async fn stop(self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.logs()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ns` opted in and stamped, then drift repaired, and a render failure: the log lines of every
/// path that names objects, each waited for in the log.
async fn stamped_repaired_and_failed_to_render(
    fleet: &Fleet,
    client: &kube::Client,
    ns: &str,
    running: &Logged,
) {
    fleet.namespace(client, ns, true).await;
    wait_count(fleet, client, ns, FULL_SET).await;
    tamper_image(client, ns, "someone/else:1").await;
    eventually_within(LONG, "drift repaired in the log", || async {
        running.logs().contains("drift repaired").then_some(())
    })
    .await;
    let bad = serde_json::json!({"metadata": {"annotations": {"override.flotilla.dev/parallelism": "lots"}}});
    patch_namespace(client, ns, bad).await.unwrap();
    wait_render_failed(client, ns).await;
    eventually_within(LONG, "the render failure in the log", || async {
        running.logs().contains("is not an integer").then_some(())
    })
    .await;
}

/// More than 20 lines, each a JSON object with a level, a timestamp and fields.
fn every_line_is_structured(text: &str) {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() > 20, "a debug log has more to say:\n{text}");
    for line in &lines {
        let entry: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            entry["level"].is_string() && entry["timestamp"].is_string(),
            "{line}"
        );
        assert!(entry["fields"].is_object(), "{line}");
    }
}

/// Neither flotilla's token nor its signature part, nor texts that only appear inside the
/// stamped objects.
fn no_token_and_no_object_bodies(text: &str) {
    let token = kubeconfig_token(&env().flotilla_kubeconfig);
    assert!(
        !text.contains(&token),
        "the ServiceAccount token is in the log"
    );
    // A part of the token is no better (e.g. a JWT's signature).
    let signature = token.rsplit('.').next().unwrap();
    assert!(
        !text.contains(signature),
        "a part of the token is in the log"
    );
    // No object bodies: texts that only appear inside the stamped objects.
    for body in [
        "secondsAfterCompletion",   // the ConfigMap's workflowDefaults
        "LEADER_ELECTION_IDENTITY", // the Deployment's env
        "workflowtaskresults",      // the Roles' rules
        "readOnlyRootFilesystem",   // the Deployment's securityContext
        "managedFields",
    ] {
        assert!(
            !text.contains(body),
            "an object body ({body}) is in the log"
        );
    }
}
