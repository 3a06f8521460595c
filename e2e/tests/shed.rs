//! An admission webhook that answers 429 to every write of one user while shedding, as an
//! overloaded API server would: the stand-in for load that falls on one replica. (API Priority
//! and Fairness cannot do it: a priority level with no seats still runs a request whenever
//! none of the level's is running, so a leader's Lease renewals would pass.) It serves HTTPS on
//! a loopback port with a certificate made by `openssl`; the API server reaches it there.

use crate::harness::{env, kubectl};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

const NAME: &str = "e2e-shed";

/// The webhook, registered with the API server until dropped.
pub struct Shed {
    shedding: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl Shed {
    /// Registers a webhook refusing every write of `username` with 429 while [`Shed::set`]
    /// says so (from the start, it does not).
    pub async fn start(username: &str) -> Shed {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = std::process::Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .unwrap();
        assert!(made.status.success(), "openssl: {made:?}");
        let pem = std::fs::read(&cert).unwrap();
        let bundle = std::process::Command::new("openssl")
            .args(["base64", "-A", "-in"])
            .arg(&cert)
            .output()
            .unwrap();
        let bundle = String::from_utf8(bundle.stdout).unwrap();
        let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(&pem).unwrap()],
            PrivateKeyDer::from_pem_file(&key).unwrap(),
        )
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shedding = Arc::new(AtomicBool::new(false));
        let shed = Arc::clone(&shedding);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, shed) = (acceptor.clone(), Arc::clone(&shed));
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        review(request, shed.load(Ordering::SeqCst))
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        let config = dir.path().join("webhook.yaml");
        std::fs::write(&config, registration(port, &bundle, username)).unwrap();
        kubectl(
            &env().admin_kubeconfig,
            &["apply", "-f", config.to_str().unwrap()],
        );
        Shed {
            shedding,
            _dir: dir,
        }
    }

    /// Sheds the user's writes from now on, or stops.
    pub fn set(&self, shedding: bool) {
        self.shedding.store(shedding, Ordering::SeqCst);
    }
}

impl Drop for Shed {
    fn drop(&mut self) {
        kubectl(
            &env().admin_kubeconfig,
            &[
                "delete",
                "validatingwebhookconfiguration",
                NAME,
                "--ignore-not-found",
            ],
        );
    }
}

/// The answer to one AdmissionReview: allowed, or refused with 429.
async fn review(
    request: Request<hyper::body::Incoming>,
    shedding: bool,
) -> Result<Response<Full<bytes::Bytes>>, hyper::Error> {
    let body = request.into_body().collect().await?.to_bytes();
    let review: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut response = serde_json::json!({"uid": review["request"]["uid"], "allowed": !shedding});
    if shedding {
        response["status"] = serde_json::json!({"code": 429, "reason": "TooManyRequests",
            "message": "shed by the e2e suite's webhook"});
    }
    let answer = serde_json::json!({"apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview", "response": response});
    let mut response = Response::new(Full::new(answer.to_string().into()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// The webhook's registration; `bundle` is its certificate, base64-encoded.
fn registration(port: u16, bundle: &str, username: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: {NAME}}}
webhooks:
  - name: shed.e2e.flotilla.dev
    clientConfig: {{url: "https://127.0.0.1:{port}/", caBundle: "{bundle}"}}
    rules:
      - {{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE, DELETE], resources: ["*/*"], scope: "*"}}
    matchConditions:
      - {{name: the-user, expression: 'request.userInfo.username == "{username}"'}}
    sideEffects: None
    admissionReviewVersions: [v1]
    failurePolicy: Fail
    timeoutSeconds: 5
"#
    )
}
