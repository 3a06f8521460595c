//! The work client's rate limit: a token bucket (governor), as client-go's QPS and burst, or
//! none (`apiQps: 0`, the default: the API server's Priority and Fairness protects itself, and
//! flotilla's `concurrency` bounds what it asks at once).

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tower::{Layer, Service};

/// A tower layer that admits a request once the token bucket has a token for it.
#[derive(Clone)]
pub struct ThrottleLayer {
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
}

pub struct Throttle<S> {
    inner: S,
    /// None: every request passes at once.
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    /// Waiting for the next token.
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was taken for the next call.
    admitted: bool,
}

impl Throttle<()> {
    /// `qps` a second with bursts of `burst` (a burst of zero is taken as one: the config
    /// refuses it); no limit at all for a `qps` of zero.
    pub fn layer(qps: u32, burst: u32) -> ThrottleLayer {
        let at_least_one = |n: u32| NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
        let limiter = NonZeroU32::new(qps).map(|qps| {
            let quota = Quota::per_second(qps).allow_burst(at_least_one(burst));
            Arc::new(RateLimiter::direct(quota))
        });
        ThrottleLayer { limiter }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle {
            inner,
            limiter: self.limiter.clone(),
            wait: None,
            admitted: false,
        }
    }
}

impl<S, R> Service<R> for Throttle<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.admitted {
            let Some(limiter) = &self.limiter else {
                self.admitted = true;
                break;
            };
            if let Some(wait) = self.wait.as_mut() {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
                continue;
            }
            match limiter.check() {
                Ok(()) => self.admitted = true,
                Err(not_until) => {
                    let delay = not_until.wait_time_from(DefaultClock::default().now());
                    self.wait = Some(Box::pin(tokio::time::sleep(delay)));
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.admitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_burst_passes_at_once_and_the_next_request_waits_for_a_token() {
        let echo = tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n) });
        // One token a second: after the burst, the next one is a second away.
        let mut service = Throttle::layer(1, 3).layer(echo);
        for n in 0..3 {
            let ready = tokio::time::timeout(Duration::from_millis(100), service.ready()).await;
            let answer = ready
                .expect("within the burst")
                .unwrap()
                .call(n)
                .await
                .unwrap();
            assert_eq!(answer, n);
        }
        let over = tokio::time::timeout(Duration::from_millis(300), service.ready()).await;
        assert!(over.is_err(), "the fourth request must wait for a token");
        let later = tokio::time::timeout(Duration::from_secs(2), service.ready()).await;
        assert!(later.is_ok(), "a token comes after a second");
    }

    #[tokio::test]
    async fn at_zero_qps_nothing_waits() {
        let echo = tower::service_fn(|n: u32| async move { Ok::<_, std::convert::Infallible>(n) });
        let mut service = Throttle::layer(0, 1).layer(echo);
        for n in 0..1000 {
            let ready = tokio::time::timeout(Duration::from_millis(100), service.ready()).await;
            let answer = ready.expect("no limit").unwrap().call(n).await.unwrap();
            assert_eq!(answer, n);
        }
    }
}
