//! The work client as `connect` builds it, against a scripted API server on a loopback port.
//! Not a tower-test mock: kube adds its retry layer inside its own stack, under every layer
//! flotilla adds, so only requests that go through that stack show whether a write is resent.

use super::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::net::TcpListener;

/// What the stand-in API server does with the next request.
enum Answer {
    /// This status, with a ConfigMap (200) or a Status (others) as the body, after `delay`;
    /// `close` closes the fence first, as a lost Lease would while the request is in flight.
    Status {
        code: u16,
        delay: Duration,
        close: bool,
    },
    /// Never answers.
    Hang,
}

fn status(code: u16) -> Answer {
    Answer::Status {
        code,
        delay: Duration::ZERO,
        close: false,
    }
}

/// The requests the stand-in received, as `METHOD path`.
type Seen = Arc<Mutex<Vec<String>>>;

async fn api_server(answers: Vec<Answer>, fence: Arc<Fence>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
    let recorded = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (seen, answers, fence) = (
                Arc::clone(&recorded),
                Arc::clone(&answers),
                Arc::clone(&fence),
            );
            let service = hyper::service::service_fn(
                move |request: Request<hyper::body::Incoming>| {
                    let line = format!("{} {}", request.method(), request.uri().path());
                    seen.lock().unwrap().push(line);
                    let answer = answers.lock().unwrap().pop_front().unwrap_or(Answer::Hang);
                    let fence = Arc::clone(&fence);
                    async move {
                        let (code, delay, close) = match answer {
                            Answer::Status { code, delay, close } => (code, delay, close),
                            Answer::Hang => std::future::pending().await,
                        };
                        if close {
                            fence.close();
                        }
                        tokio::time::sleep(delay).await;
                        let body = if code == 200 {
                            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "a"}})
                        } else {
                            serde_json::json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code, "reason": "TooManyRequests", "message": "scripted"})
                        };
                        let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
                        *response.status_mut() = http::StatusCode::from_u16(code).unwrap();
                        response.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, std::convert::Infallible>(response)
                    }
                },
            );
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    });
    (url, seen)
}

/// flotilla's config with a lease of `seconds` (the write timeout is a sixth of it).
fn config(seconds: u64) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    let text = format!("leaderElection:\n  leaseDurationSeconds: {seconds}\n");
    Config::parse(&text, &dir.path().join("flotilla.yaml")).unwrap()
}

async fn work(url: &str, fence: &Arc<Fence>, seconds: u64) -> kube::Client {
    let kubeconfig = kube::Config::new(url.parse().unwrap());
    work_client(
        kubeconfig,
        fence,
        &config(seconds),
        &Arc::new(Metrics::default()),
    )
    .unwrap()
}

async fn apply(client: &kube::Client) -> kube::Result<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "a");
    let body =
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    api.patch("x", &PatchParams::apply("flotilla"), &Patch::Apply(body))
        .await
}

#[tokio::test]
async fn a_write_refused_for_load_is_not_resent_once_the_fence_closed() {
    for code in [429, 503, 504] {
        let fence = Arc::new(Fence::closed());
        fence.open_for_ever();
        // The Lease is lost while the write is in flight; the API server then sheds it.
        let refused = Answer::Status {
            code,
            delay: Duration::ZERO,
            close: true,
        };
        let (url, seen) = api_server(vec![refused, status(200)], Arc::clone(&fence)).await;
        let client = work(&url, &fence, 10).await;
        let answer = tokio::time::timeout(Duration::from_secs(10), apply(&client))
            .await
            .expect("answered, not retried for minutes");
        assert!(
            matches!(&answer, Err(kube::Error::Api(s)) if s.code == code),
            "{code}: {answer:?}"
        );
        assert_eq!(
            *seen.lock().unwrap(),
            ["PATCH /api/v1/namespaces/a/configmaps/x"],
            "{code}"
        );
    }
}

#[tokio::test]
async fn a_write_left_unanswered_is_abandoned_within_its_timeout() {
    let fence = Arc::new(Fence::closed());
    fence.open_for_ever();
    let (url, seen) = api_server(vec![Answer::Hang], Arc::clone(&fence)).await;
    // A lease of 3 s: the fence's margin is 1 s, the write timeout 0.5 s.
    let client = work(&url, &fence, 3).await;
    let answer = tokio::time::timeout(Duration::from_secs(5), apply(&client))
        .await
        .expect("abandoned, not waited on for ever");
    match answer {
        Err(kube::Error::Service(e)) => assert!(e.is::<TimedOut>(), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn reads_pass_unfenced_and_may_take_longer_than_a_write() {
    let fence = Arc::new(Fence::closed());
    let slow = Answer::Status {
        code: 200,
        delay: Duration::from_secs(1),
        close: false,
    };
    let (url, seen) = api_server(vec![slow], Arc::clone(&fence)).await;
    let client = work(&url, &fence, 3).await;
    let api: Api<ConfigMap> = Api::namespaced(client, "a");
    let read = tokio::time::timeout(Duration::from_secs(5), api.get("x")).await;
    assert!(matches!(read, Ok(Ok(_))), "{read:?}");
    assert_eq!(
        *seen.lock().unwrap(),
        ["GET /api/v1/namespaces/a/configmaps/x"]
    );
}
