//! No split brain: a leader frozen past its lease writes nothing once it wakes, and clock skew
//! between replicas neither lets a standby take over from a live leader nor makes it wait past
//! the lease's expiry. The replicas run as two ServiceAccounts, so the audit log tells them
//! apart.

use crate::harness::*;
use k8s_openapi::jiff::Timestamp;
use std::time::{Duration, Instant};

async fn wait_leads(replica: &Flotilla, what: &str, within: Duration) -> Duration {
    let started = Instant::now();
    eventually_within(within, what, || async {
        replica.leads().await.then_some(())
    })
    .await;
    started.elapsed()
}

#[tokio::test]
async fn a_leader_frozen_past_its_lease_writes_nothing_once_it_wakes() {
    let client = admin().await;
    // When the leader freezes, it is in the middle of stamping namespaces, with writes waiting
    // for the rate limit.
    let Busy {
        fleet,
        names,
        leader,
        standby,
        audit,
        dir: _dir,
    } = busy_leader(&client, "frozen", 4, 6).await;
    leader.signal("STOP");
    let takeover = wait_leads(
        &standby,
        "the standby to take over",
        Duration::from_secs(20),
    )
    .await;
    println!("leader frozen mid-work: the standby leads after {takeover:?}");
    leader.signal("CONT");
    // Its reconciles resume where they stopped, its throttled writes come due, its watches
    // deliver what the new leader did, its Lease round runs late: all that once made it write.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(standby.leads().await, "the standby must still lead");
    assert!(
        !leader.leads().await,
        "the old leader must know it does not lead"
    );
    for name in &names {
        fleet.wait_stamped(&client, name).await;
    }

    // Every write the old leader made after the new one took the Lease: none. The window holds
    // both replicas' requests: the new leader's takeover, the old one's Lease reads after waking.
    let lease = &fleet.instance;
    let taken = audit
        .lease_taken(STANDBY_USER, lease)
        .expect("the standby's takeover is logged");
    let woke = audit.lease_reads(FLOTILLA_USER, lease);
    assert!(woke > 0, "no Lease read by the old leader after it woke");
    let late: Vec<String> = audit
        .requests(FLOTILLA_USER, None)
        .into_iter()
        .filter(|e| crate::audit::is_write(e) && e["objectRef"]["resource"] != "leases")
        .filter(|e| {
            let at: Option<Timestamp> = e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok());
            at.is_some_and(|at| at >= taken)
        })
        .map(|e| {
            format!(
                "{} {} {}",
                e["verb"], e["requestURI"], e["responseStatus"]["code"]
            )
        })
        .collect();
    let before = audit.writes(FLOTILLA_USER).len() - late.len();
    println!(
        "old leader: {before} writes before the takeover, {} after it; {woke} Lease reads after waking",
        late.len()
    );
    assert!(before > 0, "the old leader was not writing when it froze");
    assert!(
        late.is_empty(),
        "the old leader wrote while the standby led: {late:#?}"
    );
    // Nor did it win the Lease back.
    assert_eq!(
        audit
            .lease_taken(FLOTILLA_USER, lease)
            .filter(|t| *t > taken),
        None
    );
    delete_namespaces(&client, &names).await;
}

#[tokio::test]
async fn clock_skew_neither_steals_a_live_lease_nor_waits_past_its_expiry() {
    let client = admin().await;
    let fleet = Fleet::new("skew").with(
        "leaderElection",
        serde_json::json!({"leaseDurationSeconds": 10}),
    );
    let dir = tempfile::tempdir().unwrap();
    let standby_config = standby_kubeconfig(dir.path());
    let ns = "skew-a";
    fleet.namespace(&client, ns, true).await;
    let leader = fleet.start_as("leader", &env().flotilla_kubeconfig);
    wait_leads(
        &leader,
        "the first replica to lead",
        Duration::from_secs(30),
    )
    .await;
    fleet.wait_stamped(&client, ns).await;

    // A standby 30 s ahead sees the leader's renewTime as long past, yet it is renewed all the
    // time: it must not take over.
    let ahead = fleet.start_with_clock("ahead", &standby_config, "+30s");
    ahead.wait_log("caches synced").await;
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(15) {
        assert!(
            !ahead.leads().await,
            "a standby 30 s ahead took a live lease"
        );
        assert!(leader.leads().await, "the leader lost its lease");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    ahead.stop();

    // A standby 30 s behind sees the leader's renewTime as 30 s in the future: it must still
    // take over once the lease expires, not 30 s later.
    let behind = fleet.start_with_clock("behind", &standby_config, "-30s");
    behind.wait_log("caches synced").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    leader.kill();
    let takeover = wait_leads(
        &behind,
        "the standby behind to take over",
        Duration::from_secs(30),
    )
    .await;
    println!("standby 30 s behind took over {takeover:?} after the leader was killed");
    assert!(takeover <= Duration::from_secs(15), "{takeover:?}");
    delete_namespaces(&client, &[ns]).await;
}
