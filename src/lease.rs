//! Leader election on a coordination.k8s.io/v1 Lease, client-go style: every write is a replace
//! carrying the resourceVersion that was read, so two candidates can never both win (the API
//! server rejects the second with 409). Only the leader writes; a standby keeps its caches warm
//! and polls the Lease every second, so it takes over as soon as the Lease is released (on
//! SIGTERM) or expires (the leader died).

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::Duration;
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
    /// ...and steps down if it could not renew for this long, before anyone may take over.
    fn renew_deadline(&self) -> Duration {
        self.duration * 2 / 3
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

pub fn step(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Step {
    let Some(spec) = spec else {
        return Step::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Step::Renew;
    }
    if holder.is_empty() {
        return Step::Acquire;
    }
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    let expired = spec
        .renew_time
        .as_ref()
        .is_none_or(|renewed| renewed.0.as_second() + duration < now.as_second());
    if expired { Step::Acquire } else { Step::Follow }
}

/// The Lease as `identity` writes it when acquiring or renewing; `release` empties it.
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

/// Runs the election until `shutdown` resolves, publishing whether this process leads.
/// On shutdown a leader releases the Lease, so a standby takes over within a second.
pub async fn run(
    api: Api<Lease>,
    config: LeaseConfig,
    leader: watch::Sender<bool>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last_renewed: Option<std::time::Instant> = None;
    loop {
        let is_leader = match try_once(&api, &config).await {
            Ok(held) => {
                if held {
                    last_renewed = Some(std::time::Instant::now());
                }
                held
            }
            Err(e) => {
                tracing::warn!(lease = %config.name, error = %e, "lease update failed");
                // Keep leading only while the lease we hold cannot have expired for others.
                last_renewed.is_some_and(|t| t.elapsed() < config.renew_deadline())
            }
        };
        if !is_leader {
            last_renewed = None;
        }
        if *leader.borrow() != is_leader {
            tracing::info!(lease = %config.name, identity = %config.identity, leader = is_leader, "leadership changed");
            let _ = leader.send(is_leader);
        }
        let wait = if is_leader {
            config.renew_every()
        } else {
            Duration::from_secs(1)
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = &mut shutdown => break,
        }
    }
    if *leader.borrow() {
        let _ = leader.send(false);
        match release(&api, &config).await {
            Ok(()) => tracing::info!(lease = %config.name, "lease released"),
            Err(e) => {
                tracing::warn!(lease = %config.name, error = %e, "could not release the lease; it expires by itself")
            }
        }
    }
}

/// One round: read the Lease, and acquire or renew it if we may. Returns whether we hold it.
async fn try_once(api: &Api<Lease>, config: &LeaseConfig) -> kube::Result<bool> {
    let now = Timestamp::now();
    let Some(current) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(claimed(None, config, now, true)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let acquire = match step(current.spec.as_ref(), &config.identity, now) {
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
        Ok(_) => Ok(true),
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
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            lease_duration_seconds: Some(duration),
            ..LeaseSpec::default()
        }
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn decides_who_may_write() {
        assert_eq!(step(None, "a", at(100)), Step::Acquire);
        assert_eq!(
            step(Some(&spec(Some("a"), 95, 10)), "a", at(100)),
            Step::Renew
        );
        assert_eq!(
            step(Some(&spec(Some("b"), 95, 10)), "a", at(100)),
            Step::Follow
        );
        assert_eq!(
            step(Some(&spec(Some("b"), 85, 10)), "a", at(100)),
            Step::Acquire,
            "expired"
        );
        assert_eq!(
            step(Some(&spec(None, 99, 1)), "a", at(100)),
            Step::Acquire,
            "released"
        );
        assert_eq!(
            step(Some(&spec(Some(""), 99, 10)), "a", at(100)),
            Step::Acquire,
            "released"
        );
        let never_renewed = LeaseSpec {
            holder_identity: Some("b".into()),
            ..LeaseSpec::default()
        };
        assert_eq!(step(Some(&never_renewed), "a", at(100)), Step::Acquire);
    }

    #[test]
    fn claims_count_transitions_and_keep_the_acquire_time_on_renewal() {
        let config = LeaseConfig {
            name: "l".into(),
            identity: "a".into(),
            duration: Duration::from_secs(10),
        };
        let first = claimed(None, &config, at(100), true);
        assert_eq!(first.lease_transitions, Some(1));
        assert_eq!(first.lease_duration_seconds, Some(10));
        let renewed = claimed(Some(&first), &config, at(102), false);
        assert_eq!(renewed.acquire_time, first.acquire_time);
        assert_eq!(renewed.renew_time, Some(MicroTime(at(102))));
        assert_eq!(renewed.lease_transitions, Some(1));
        // Taken over from another holder: one more transition, a new acquire time.
        let other = LeaseConfig {
            identity: "b".into(),
            ..config.clone()
        };
        let taken = claimed(Some(&renewed), &other, at(120), true);
        assert_eq!(taken.lease_transitions, Some(2));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(120))));
        assert_eq!(taken.holder_identity.as_deref(), Some("b"));
        assert!(
            config.renew_every() < config.renew_deadline()
                && config.renew_deadline() < config.duration
        );
    }
}
