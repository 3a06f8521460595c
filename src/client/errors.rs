//! Counting the work client's failed requests, every one, in one place: a tower layer under
//! every request flotilla makes with it (reconciles, the rollout, Events, watches), so that no
//! call site has to remember to. kube names each request's verb in its extensions; the count is
//! labelled with the verb as the API server's audit log names it, and the HTTP status.

use crate::client::Fenced;
use crate::telemetry::Metrics;
use http::{Method, Request, Response, StatusCode};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{BoxError, Layer, Service};

pub fn layer(metrics: &Arc<Metrics>) -> CountErrorsLayer {
    CountErrorsLayer {
        metrics: Arc::clone(metrics),
    }
}

#[derive(Clone)]
pub struct CountErrorsLayer {
    metrics: Arc<Metrics>,
}

impl<S> Layer<S> for CountErrorsLayer {
    type Service = CountErrors<S>;

    fn layer(&self, inner: S) -> CountErrors<S> {
        CountErrors {
            inner,
            metrics: Arc::clone(&self.metrics),
        }
    }
}

/// The service behind [`CountErrorsLayer`].
pub struct CountErrors<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type Answer<R> = Pin<Box<dyn Future<Output = Result<R, BoxError>> + Send>>;

impl<S, B, R> Service<Request<B>> for CountErrors<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    R: 'static,
{
    type Response = Response<R>;
    type Error = BoxError;
    type Future = Answer<Response<R>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let verb = verb(&request);
        let metrics = Arc::clone(&self.metrics);
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await.map_err(Into::into);
            match &answer {
                Ok(response) if failed(verb, response.status()) => {
                    metrics.api_error(verb, &response.status().as_u16().to_string());
                }
                Ok(_) => {}
                Err(error) if error.is::<Fenced>() => {
                    metrics.fenced_writes.inc();
                }
                Err(_) => metrics.api_error(verb, "none"),
            }
            answer
        })
    }
}

/// The request's verb as the audit log names it: from the name kube gives the call
/// (`get_metadata`, `patch_subresource`, ...), else from the method (discovery carries none).
fn verb<B>(request: &Request<B>) -> &'static str {
    let named = request.extensions().get::<&'static str>().copied();
    match named.map(|name| name.split('_').next().unwrap_or(name)) {
        Some("get") => "get",
        Some("list") => "list",
        Some("watch") => "watch",
        Some("create") => "create",
        Some("replace") => "update",
        Some("patch") => "patch",
        Some("delete") if named == Some("delete_collection") => "deletecollection",
        Some("delete") => "delete",
        _ => match *request.method() {
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "get",
        },
    }
}

/// Whether a response is a failure. Not: a read of an object that is not there (404), which is
/// how flotilla learns that it is absent; a delete of one already gone (404) or changed since
/// its precondition was taken (409), which flotilla asks for on purpose.
fn failed(verb: &str, status: StatusCode) -> bool {
    let answer = match verb {
        "get" | "list" | "watch" => status == StatusCode::NOT_FOUND,
        "delete" => matches!(status, StatusCode::NOT_FOUND | StatusCode::CONFLICT),
        _ => false,
    };
    (status.is_client_error() || status.is_server_error()) && !answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// Sends `method` named `name` through the layer to a server answering `status` (or failing
    /// with `error`), and returns the metrics' text.
    async fn send(
        name: Option<&'static str>,
        method: Method,
        answer: Result<StatusCode, BoxError>,
        metrics: &Arc<Metrics>,
    ) {
        let server = tower::service_fn(move |_: Request<()>| {
            let answer = match &answer {
                Ok(status) => Ok(Response::builder().status(*status).body(()).unwrap()),
                Err(e) if e.is::<Fenced>() => Err(BoxError::from(Fenced)),
                Err(e) => Err(BoxError::from(e.to_string())),
            };
            async move { answer }
        });
        let mut request = Request::builder().method(method).body(()).unwrap();
        if let Some(name) = name {
            request.extensions_mut().insert(name);
        }
        let _ = layer(metrics).layer(server).oneshot(request).await;
    }

    #[tokio::test]
    async fn every_failed_request_is_counted_by_verb_and_status_and_answers_are_not() {
        let metrics = Arc::new(Metrics::default());
        let status = |code: u16| Ok(StatusCode::from_u16(code).unwrap());
        // (kube's name for the call, method, answer)
        let cases: Vec<(Option<&'static str>, Method, Result<StatusCode, BoxError>)> = vec![
            (Some("patch"), Method::PATCH, status(422)),
            (Some("patch_subresource"), Method::PATCH, status(409)),
            (Some("create"), Method::POST, status(409)),
            (Some("replace"), Method::PUT, status(500)),
            (Some("delete"), Method::DELETE, status(403)),
            (Some("list_metadata"), Method::GET, status(403)),
            (Some("watch"), Method::GET, status(410)),
            (Some("get"), Method::GET, Err("connection refused".into())),
            (Some("create"), Method::POST, Err(Fenced.into())),
            // Answers, not failures:
            (Some("get"), Method::GET, status(404)),
            (None, Method::GET, status(404)),
            (Some("delete"), Method::DELETE, status(404)),
            (Some("delete"), Method::DELETE, status(409)),
            (Some("patch"), Method::PATCH, status(200)),
            (Some("delete_collection"), Method::DELETE, status(200)),
        ];
        for (name, method, answer) in cases {
            send(name, method, answer, &metrics).await;
        }
        let errors = |code: &str, verb: &'static str| {
            let labels = crate::telemetry::ApiErrorLabels {
                code: code.into(),
                verb,
            };
            metrics.api_errors.get_or_create(&labels).get()
        };
        for (code, verb) in [
            ("422", "patch"),
            ("409", "patch"),
            ("409", "create"),
            ("500", "update"),
            ("403", "delete"),
            ("403", "list"),
            ("410", "watch"),
            ("none", "get"),
        ] {
            assert_eq!(errors(code, verb), 1, "{code} {verb}");
        }
        for (code, verb) in [("404", "get"), ("404", "delete"), ("409", "delete")] {
            assert_eq!(errors(code, verb), 0, "{code} {verb} is an answer");
        }
        assert_eq!(metrics.fenced_writes.get(), 1);
        assert_eq!(
            errors("none", "create"),
            0,
            "a fenced write is counted apart"
        );
    }
}
