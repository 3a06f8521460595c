//! What tests across the crate share: a config with templates, and a scripted API (tower-test)
//! that answers the requests it expects, in order, and fails on any other.

use crate::config::Config;
use crate::render::Renderer;
use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// The config file `text`, its templates directory next to it.
pub fn config(text: &str) -> Config {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    Config::parse(text, &dir.path().join("flotilla.yaml")).unwrap()
}

/// `(file name, source)` templates compiled under `config`.
pub fn renderer(config: &Config, files: &[(&str, &str)]) -> Renderer {
    let sources = files
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    Renderer::new(sources, config).unwrap()
}

/// One expected request and the answer to it.
pub struct Exchange {
    pub method: Method,
    pub path: String,
    /// Must all appear in the query string...
    pub query: &'static [&'static str],
    /// ...and these must not.
    pub not: &'static [&'static str],
    pub status: StatusCode,
    pub answer: Value,
}

pub fn exchange(
    method: Method,
    path: impl Into<String>,
    query: &'static [&'static str],
) -> Exchange {
    Exchange {
        method,
        path: path.into(),
        query,
        not: &[],
        status: StatusCode::OK,
        answer: json!({}),
    }
}

impl Exchange {
    pub fn without(self, not: &'static [&'static str]) -> Exchange {
        Exchange { not, ..self }
    }

    pub fn answer(self, status: StatusCode, answer: Value) -> Exchange {
        Exchange {
            status,
            answer,
            ..self
        }
    }
}

/// A Status the API server answers a failed request with.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
        "code": code, "message": message})
}

/// A client of an API that expects exactly `script`, in order; the task returns the request
/// bodies received once every client is dropped, and panics on a request not in the script,
/// out of its order, or after it.
pub fn serve(script: Vec<Exchange>) -> (Client, JoinHandle<Vec<Value>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = tokio::spawn(async move {
        let mut bodies = Vec::new();
        for expected in script {
            let (request, respond) = handle.next_request().await.unwrap_or_else(|| {
                panic!("no request; expected {} {}", expected.method, expected.path)
            });
            let (method, uri) = (request.method().clone(), request.uri().clone());
            assert_eq!(
                (&method, uri.path()),
                (&expected.method, expected.path.as_str()),
                "unexpected request {method} {uri}"
            );
            let query = uri.query().unwrap_or_default();
            for part in expected.query {
                assert!(
                    query.contains(part),
                    "{method} {uri}: no {part} in the query"
                );
            }
            for part in expected.not {
                assert!(!query.contains(part), "{method} {uri}: {part} in the query");
            }
            let bytes = http_body_util::BodyExt::collect(request.into_body())
                .await
                .unwrap()
                .to_bytes();
            bodies.push(serde_json::from_slice(&bytes).unwrap_or(Value::Null));
            let body = Body::from(serde_json::to_vec(&expected.answer).unwrap());
            respond.send_response(
                Response::builder()
                    .status(expected.status)
                    .body(body)
                    .unwrap(),
            );
        }
        // Once every client is dropped, any further request would show here.
        if let Some((request, _)) = handle.next_request().await {
            panic!("unexpected request {} {}", request.method(), request.uri());
        }
        bodies
    });
    (Client::new(service, "default"), server)
}
