//! A leader whose writes the API server sheds with 429 (an admission webhook, shed.rs) loses
//! its Lease, which it renews under the same identity, to a standby of another ServiceAccount.
//! Once the 429s stop, none of the writes it had in flight lands: the work client resends
//! nothing, and the fence stops the rest.

use crate::audit::received;
use crate::harness::*;
use crate::shed::Shed;
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

#[tokio::test]
async fn a_leader_shed_with_429s_writes_nothing_after_the_handover() {
    let client = admin().await;
    // Writes are waiting and in flight when the 429s begin.
    let busy = busy_leader(&client, "handover", 6, 8).await;
    let (fleet, leader, standby, audit) = (&busy.fleet, &busy.leader, &busy.standby, &busy.audit);
    let shed = Shed::start(FLOTILLA_USER).await;
    shed.set(true);
    eventually_within(
        Duration::from_secs(60),
        "the standby to take over",
        || async { standby.leads().await.then_some(()) },
    )
    .await;
    let refused = audit
        .requests(FLOTILLA_USER, None)
        .iter()
        .filter(|e| e["responseStatus"]["code"] == 429)
        .count();
    assert!(refused > 0, "the API server answered the leader no 429");
    shed.set(false);
    let freed = Timestamp::now();
    // kube's retries went on for minutes after a 429 (5 ms doubling, 15 times); the old leader's
    // Lease reads, once a second, served again, show the window holds what came after: 45 of
    // them cover the retries a request shed with 429 could still have had.
    eventually_within(
        Duration::from_secs(120),
        "the old leader's requests served again",
        || async {
            let served = audit
                .requests(FLOTILLA_USER, Some(&format!("/leases/{}", fleet.instance)))
                .iter()
                .filter(|e| e["verb"] == "get" && e["responseStatus"]["code"] == 200)
                .filter(|e| received(e).is_some_and(|at| at > freed))
                .count();
            (served >= 45).then_some(())
        },
    )
    .await;
    assert!(
        !leader.leads().await,
        "the old leader must know it does not lead"
    );
    assert!(standby.leads().await, "the standby must still lead");
    for name in &busy.names {
        fleet.wait_stamped(&client, name).await;
    }

    // When the standby took the Lease, and every write of the old leader that landed after.
    let taken = audit
        .lease_taken(STANDBY_USER, &fleet.instance)
        .expect("the standby's takeover is logged");
    let landed: Vec<String> = audit
        .requests(FLOTILLA_USER, None)
        .into_iter()
        .filter(|e| crate::audit::is_write(e) && e["objectRef"]["resource"] != "leases")
        .filter(|e| {
            e["responseStatus"]["code"]
                .as_u64()
                .is_some_and(|c| c < 300)
        })
        .filter(|e| received(e).is_some_and(|at| at >= taken))
        .map(|e| {
            format!(
                "{} {} {}",
                e["verb"], e["requestURI"], e["responseStatus"]["code"]
            )
        })
        .collect();
    let before = audit.writes(FLOTILLA_USER).len();
    assert!(
        before > 0,
        "the old leader was not writing when the 429s began"
    );
    assert!(
        landed.is_empty(),
        "the old leader's writes landed while the standby led: {landed:#?}"
    );
    delete_namespaces(&client, &busy.names).await;
}
