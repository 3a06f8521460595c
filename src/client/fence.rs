//! Fencing: the work client sends a write only while this replica's leadership is certain.
//!
//! Leader election opens the fence until a deadline on the monotonic clock, short of when the
//! Lease could expire for anyone else, and moves it on with every renewal. A replica that
//! cannot renew (its connection hangs, or the process was frozen) finds the fence closed at its
//! next write, however far a reconcile had got: the write fails instead of racing a new leader.
//! Reads pass at any time: a standby keeps its caches warm.
//!
//! A write that went out is abandoned if no answer comes within its timeout, well before a
//! new leader could take over, so that no write of this replica can still be on its way then.
//! Reads have no such limit: watches are long requests.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tower::{BoxError, Layer, Service};

/// Until when writes may go out, as nanoseconds since `base` (`u64::MAX`: for ever).
pub struct Fence {
    base: Instant,
    until: AtomicU64,
}

/// A write refused because this replica does not hold leadership for certain.
#[derive(Debug, thiserror::Error)]
#[error(
    "not sent: this replica is not the leader for certain (its Lease could not be renewed in time)"
)]
pub struct Fenced;

/// A write abandoned unanswered, so that it cannot land after this replica's leadership ends.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {0:?}: abandoned, so that it cannot land after leadership passes on")]
pub struct TimedOut(pub Duration);

impl Fence {
    /// Closed: no write goes out until leader election opens it.
    pub fn closed() -> Fence {
        Fence {
            base: Instant::now(),
            until: AtomicU64::new(0),
        }
    }

    /// Writes may go out until `deadline`.
    pub fn open_until(&self, deadline: Instant) {
        let nanos = deadline.saturating_duration_since(self.base).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX - 1);
        self.until.store(nanos, Ordering::SeqCst);
    }

    /// Without leader election this replica always leads.
    pub fn open_for_ever(&self) {
        self.until.store(u64::MAX, Ordering::SeqCst);
    }

    pub fn close(&self) {
        self.until.store(0, Ordering::SeqCst);
    }

    pub fn is_open(&self) -> bool {
        let until = self.until.load(Ordering::SeqCst);
        until == u64::MAX || (self.base.elapsed().as_nanos() as u64) < until
    }
}

/// Fences writes, and abandons one that is not answered within `timeout`.
pub fn layer(fence: &Arc<Fence>, timeout: Duration) -> FenceLayer {
    FenceLayer {
        fence: Arc::clone(fence),
        timeout,
    }
}

#[derive(Clone)]
pub struct FenceLayer {
    fence: Arc<Fence>,
    timeout: Duration,
}

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;

    fn layer(&self, inner: S) -> FenceService<S> {
        FenceService {
            inner,
            fence: Arc::clone(&self.fence),
            timeout: self.timeout,
        }
    }
}

/// The service behind [`FenceLayer`].
pub struct FenceService<S> {
    inner: S,
    fence: Arc<Fence>,
    timeout: Duration,
}

type Answer<R, E> = Pin<Box<dyn Future<Output = Result<R, E>> + Send>>;

impl<S, B> Service<http::Request<B>> for FenceService<S>
where
    S: Service<http::Request<B>>,
    S::Response: Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Answer<S::Response, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let reads = [http::Method::GET, http::Method::HEAD];
        if reads.contains(request.method()) {
            let answer = self.inner.call(request);
            return Box::pin(async move { answer.await.map_err(Into::into) });
        }
        if !self.fence.is_open() {
            return Box::pin(std::future::ready(Err(Fenced.into())));
        }
        let answer = self.inner.call(request);
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, answer).await {
                Ok(answer) => answer.map_err(Into::into),
                Err(_) => Err(TimedOut(timeout).into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tower::ServiceExt;

    async fn send(fence: &Arc<Fence>, method: http::Method) -> Result<(), BoxError> {
        let ok = tower::service_fn(|_: http::Request<()>| async { Ok::<_, BoxError>(()) });
        let request = http::Request::builder().method(method).body(()).unwrap();
        layer(fence, Duration::from_secs(5))
            .layer(ok)
            .oneshot(request)
            .await
    }

    #[tokio::test]
    async fn writes_pass_only_while_the_fence_is_open_and_reads_always() {
        let fence = Arc::new(Fence::closed());
        assert!(send(&fence, http::Method::GET).await.is_ok());
        let refused = send(&fence, http::Method::PATCH).await.unwrap_err();
        assert!(refused.is::<Fenced>(), "{refused}");
        fence.open_until(Instant::now() + Duration::from_secs(60));
        for method in [
            http::Method::PATCH,
            http::Method::POST,
            http::Method::PUT,
            http::Method::DELETE,
        ] {
            assert!(send(&fence, method).await.is_ok());
        }
        // The deadline passed (as for a process frozen past it): closed by itself.
        fence.open_until(Instant::now());
        assert!(send(&fence, http::Method::DELETE).await.is_err());
        fence.open_for_ever();
        assert!(send(&fence, http::Method::POST).await.is_ok());
        fence.close();
        assert!(send(&fence, http::Method::POST).await.is_err());
        assert!(send(&fence, http::Method::GET).await.is_ok());
    }
}
