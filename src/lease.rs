//! Leader election on a coordination.k8s.io/v1 Lease, by client-go's rules, with fencing:
//!
//! - every write is a replace carrying the resourceVersion that was read, so two candidates can
//!   never both win (the API server refuses the second with 409);
//! - another holder's lease is judged expired by this replica's monotonic clock: the time since
//!   its record was last seen to change, never by comparing its renewTime with our wall clock,
//!   so clock skew between replicas does not matter;
//! - each round is time-boxed to what is left of the renew deadline (dropped at the deadline,
//!   its request and connection with it), and the Lease client has no retries, so a hung
//!   connection cannot keep a leader believing it leads;
//! - the leader keeps the work client's fence open only until its last successful renewal plus
//!   the renew deadline (two thirds of the lease), short of when anyone else may take over: a
//!   leader that cannot renew, or a process frozen past that, stops writing by itself.
//!
//! kube-lease-manager (the one such crate on kube 5) judges expiry by the holder's renewTime
//! against the local wall clock and has no fencing, so it is not used.

use crate::client::Fence;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub duration: Duration,
}

impl LeaseConfig {
    /// The leader renews this often...
    fn renew_every(&self) -> Duration {
        self.duration / 5
    }
    /// ...and writes only until this long after its last renewal began: before anyone else may
    /// take over.
    fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
    }
    /// A follower looks this often, and gives one read this long.
    fn retry_every(&self) -> Duration {
        Duration::from_secs(1)
    }
}

/// What a candidate should do with the Lease as it is now.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Ours: renew it.
    Renew,
    /// Free, released or expired: take it.
    Acquire,
    /// Someone else holds a valid lease.
    Follow,
}

/// What a candidate has seen of a Lease another replica holds: the record, and when (by this
/// replica's monotonic clock) it last changed.
#[derive(Debug, Default)]
pub struct Observer {
    seen: Option<(LeaseSpec, Instant)>,
}

impl Observer {
    pub fn step(&mut self, current: Option<&LeaseSpec>, identity: &str, now: Instant) -> Step {
        let Some(spec) = current else {
            self.seen = None;
            return Step::Acquire;
        };
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        if holder == identity {
            return Step::Renew;
        }
        if holder.is_empty() {
            return Step::Acquire;
        }
        let since = match &self.seen {
            Some((seen, since)) if seen == spec => *since,
            _ => {
                // A new record: the holder is alive as of now, whatever its clock says.
                self.seen = Some((spec.clone(), now));
                return Step::Follow;
            }
        };
        let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
        let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
        if now.saturating_duration_since(since) >= duration {
            Step::Acquire
        } else {
            Step::Follow
        }
    }
}

/// The Lease as `identity` writes it when acquiring or renewing.
fn claimed(
    current: Option<&LeaseSpec>,
    config: &LeaseConfig,
    now: Timestamp,
    acquire: bool,
) -> LeaseSpec {
    let transitions = current.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.duration.as_secs().try_into().unwrap_or(i32::MAX)),
        acquire_time: if acquire {
            Some(MicroTime(now))
        } else {
            current.and_then(|s| s.acquire_time.clone())
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if acquire {
            transitions + 1
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// Runs the election until `shutdown` resolves, publishing whether this process leads and
/// keeping `fence` open exactly as long as its leadership is certain. On shutdown a leader
/// closes the fence and releases the Lease, so a standby takes over within a second.
pub async fn run(
    api: Api<Lease>,
    config: LeaseConfig,
    leader: watch::Sender<bool>,
    fence: &Fence,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut observer = Observer::default();
    // When the last successful renewal began: leadership is certain until that plus the deadline.
    let mut renewed: Option<Instant> = None;
    // The Lease as this replica last wrote it, while it holds it.
    let mut held: Option<Lease> = None;
    loop {
        let started = Instant::now();
        let valid_until = renewed.map(|at| at + config.renew_deadline());
        // A round never outlasts the leadership it would extend.
        let budget = valid_until.map_or(config.retry_every(), |until| {
            until.saturating_duration_since(started)
        });
        let attempt = round(&api, &config, &mut observer, &mut held);
        let answer = match tokio::time::timeout(budget, attempt).await {
            Ok(Ok(held)) => Some(held),
            Ok(Err(e)) => {
                tracing::warn!(lease = %config.name, error = %e, "lease update failed");
                None
            }
            Err(_) => {
                tracing::warn!(lease = %config.name, ?budget, "lease update timed out");
                None
            }
        };
        match answer {
            Some(true) => {
                renewed = Some(started);
                fence.open_until(started + config.renew_deadline());
            }
            // Someone else holds it (or changed it under us): step down at once.
            Some(false) => renewed = None,
            // No answer: leading only while that is still certain.
            None if valid_until.is_some_and(|until| Instant::now() < until) => {}
            None => renewed = None,
        }
        if renewed.is_none() {
            fence.close();
        }
        let leads = renewed.is_some();
        if *leader.borrow() != leads {
            tracing::info!(lease = %config.name, identity = %config.identity, leader = leads, "leadership changed");
            let _ = leader.send(leads);
        }
        let wait = until_next_round(&config, renewed, answer == Some(true), Instant::now());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = &mut shutdown => break,
        }
    }
    if renewed.is_some() {
        fence.close();
        let _ = leader.send(false);
        let release = tokio::time::timeout(config.retry_every(), release(&api, &config));
        match release.await {
            Ok(Ok(())) => tracing::info!(lease = %config.name, "lease released"),
            _ => {
                tracing::warn!(lease = %config.name, "could not release the lease; it expires by itself")
            }
        }
    }
}

/// How long to wait before the next round. A renewal is due `renew_every` after the last
/// successful one began, not after it ended: under a saturated API server one round can take
/// seconds, and waiting a full period after it would leave the next round only what remains of
/// the deadline. After a failed round a leader tries again within a second, until its deadline.
fn until_next_round(
    config: &LeaseConfig,
    renewed: Option<Instant>,
    just_renewed: bool,
    now: Instant,
) -> Duration {
    match renewed {
        Some(at) if just_renewed => (at + config.renew_every()).saturating_duration_since(now),
        Some(at) => config
            .retry_every()
            .min((at + config.renew_deadline()).saturating_duration_since(now)),
        None => config.retry_every(),
    }
}

/// One round: renew the Lease this replica holds as it last wrote it, in one request (as
/// client-go's leader election does); otherwise, or if someone wrote it since (a conflict on
/// its resourceVersion), read it and acquire or renew it if we may. Returns whether we hold it.
async fn round(
    api: &Api<Lease>,
    config: &LeaseConfig,
    observer: &mut Observer,
    held: &mut Option<Lease>,
) -> kube::Result<bool> {
    let now = Timestamp::now();
    if let Some(ours) = held.take() {
        let mut next = ours.clone();
        next.spec = Some(claimed(ours.spec.as_ref(), config, now, false));
        match api
            .replace(&config.name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                *held = Some(written);
                return Ok(true);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    let Some(current) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(claimed(None, config, now, true)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(written) => {
                *held = Some(written);
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let acquire = match observer.step(current.spec.as_ref(), &config.identity, Instant::now()) {
        Step::Follow => return Ok(false),
        Step::Acquire => true,
        Step::Renew => false,
    };
    let mut next = current.clone();
    next.spec = Some(claimed(current.spec.as_ref(), config, now, acquire));
    // `current` carries its resourceVersion: a concurrent writer makes this a 409, not a tie.
    match api
        .replace(&config.name, &PostParams::default(), &next)
        .await
    {
        Ok(written) => {
            *held = Some(written);
            Ok(true)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

async fn release(api: &Api<Lease>, config: &LeaseConfig) -> kube::Result<()> {
    let current = api.get(&config.name).await?;
    if current
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        != Some(config.identity.as_str())
    {
        return Ok(());
    }
    let mut next = current.clone();
    next.spec = Some(LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(Timestamp::now())),
        ..current.spec.unwrap_or_default()
    });
    api.replace(&config.name, &PostParams::default(), &next)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests;
