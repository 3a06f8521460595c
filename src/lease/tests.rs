use super::*;
use http::{Request, Response};
use kube::client::Body;

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
fn a_lease_of_ours_is_renewed_and_a_free_one_taken() {
    let now = Instant::now();
    let mut observer = Observer::default();
    assert_eq!(observer.step(None, "a", now), Step::Acquire);
    assert_eq!(
        observer.step(Some(&spec(Some("a"), 95, 10)), "a", now),
        Step::Renew
    );
    assert_eq!(
        observer.step(Some(&spec(None, 99, 1)), "a", now),
        Step::Acquire,
        "released"
    );
    assert_eq!(
        observer.step(Some(&spec(Some(""), 99, 10)), "a", now),
        Step::Acquire,
        "released"
    );
}

#[test]
fn another_holder_expires_by_our_clock_since_its_record_last_changed() {
    let t0 = Instant::now();
    let secs = Duration::from_secs;
    let mut observer = Observer::default();
    let held = spec(Some("b"), 100, 10);
    // First seen: alive as of now, whatever its renewTime says.
    assert_eq!(observer.step(Some(&held), "a", t0), Step::Follow);
    assert_eq!(observer.step(Some(&held), "a", t0 + secs(9)), Step::Follow);
    // Renewed at 8 s: the ten seconds start again from when we saw it.
    let renewed = spec(Some("b"), 108, 10);
    assert_eq!(
        observer.step(Some(&renewed), "a", t0 + secs(9)),
        Step::Follow
    );
    assert_eq!(
        observer.step(Some(&renewed), "a", t0 + secs(18)),
        Step::Follow
    );
    assert_eq!(
        observer.step(Some(&renewed), "a", t0 + secs(19)),
        Step::Acquire
    );
}

#[test]
fn clock_skew_between_replicas_changes_nothing() {
    let t0 = Instant::now();
    let mut observer = Observer::default();
    // The holder's clock is an hour behind ours: its renewTime looks long expired.
    let behind = spec(Some("b"), Timestamp::now().as_second() - 3600, 10);
    assert_eq!(observer.step(Some(&behind), "a", t0), Step::Follow);
    assert_eq!(
        observer.step(Some(&behind), "a", t0 + Duration::from_secs(5)),
        Step::Follow
    );
    // An hour ahead: its renewTime looks valid for an hour, but it stopped renewing.
    let mut observer = Observer::default();
    let ahead = spec(Some("b"), Timestamp::now().as_second() + 3600, 10);
    assert_eq!(observer.step(Some(&ahead), "a", t0), Step::Follow);
    assert_eq!(
        observer.step(Some(&ahead), "a", t0 + Duration::from_secs(10)),
        Step::Acquire
    );
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
        config.renew_every() < config.renew_deadline() && config.renew_deadline() < config.duration
    );
}

/// A leader whose API stops answering (a hung connection) stops leading and closes the fence
/// within the renew deadline, before the lease could expire for anyone else.
#[tokio::test]
async fn a_leader_that_cannot_renew_stops_writing_before_its_lease_expires() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "flotilla-system");
    let config = LeaseConfig {
        name: "fleet".into(),
        identity: "a".into(),
        duration: Duration::from_secs(3),
    };
    let (leader_tx, mut leader) = watch::channel(false);
    let fence = std::sync::Arc::new(Fence::closed());
    let election = tokio::spawn({
        let (fence, config) = (std::sync::Arc::clone(&fence), config.clone());
        async move {
            let api = Api::namespaced(client, "flotilla-system");
            run(api, config, leader_tx, &fence, std::future::pending()).await;
        }
    });
    // No Lease yet: it is created, and this replica leads.
    let (request, respond) = handle.next_request().await.unwrap();
    assert_eq!(request.method(), http::Method::GET);
    let not_found = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "reason": "NotFound", "code": 404, "message": "leases \"fleet\" not found"});
    respond.send_response(
        Response::builder()
            .status(404)
            .body(Body::from(serde_json::to_vec(&not_found).unwrap()))
            .unwrap(),
    );
    let (request, respond) = handle.next_request().await.unwrap();
    assert_eq!(request.method(), http::Method::POST);
    let created = serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleet", "namespace": "flotilla-system", "resourceVersion": "1"}});
    respond.send_response(Response::new(Body::from(
        serde_json::to_vec(&created).unwrap(),
    )));
    let leading_since = Instant::now();
    leader.wait_for(|leads| *leads).await.unwrap();
    assert!(fence.is_open());
    // From here on, nothing answers: every renewal hangs.
    let stepped_down =
        tokio::time::timeout(config.duration, leader.wait_for(|leads| !*leads)).await;
    let after = leading_since.elapsed();
    assert!(
        stepped_down.is_ok(),
        "still leading after the lease duration"
    );
    assert!(!fence.is_open(), "the fence must be closed");
    assert!(
        after < config.duration,
        "stepped down after {after:?}: a standby may have taken over already"
    );
    election.abort();
    drop(handle);
}

#[test]
fn a_renewal_is_due_a_period_after_the_last_one_began_however_long_that_took() {
    let config = LeaseConfig {
        name: "fleet".into(),
        identity: "a".into(),
        duration: Duration::from_secs(15),
    };
    let began = Instant::now();
    let after = |seconds: f64| began + Duration::from_secs_f64(seconds);
    // A quick renewal: the next one a period (3 s) after it began.
    let quick = until_next_round(&config, Some(began), true, after(0.1));
    assert_eq!(quick, Duration::from_secs_f64(2.9));
    // A renewal that took 4.5 s: the next is overdue, so at once, with 5.5 s of the deadline
    // left (waiting a period after it ended would have left 2.5 s).
    assert_eq!(
        until_next_round(&config, Some(began), true, after(4.5)),
        Duration::ZERO
    );
    // A failed round while still leading: again within a second, never past the deadline.
    let retry = until_next_round(&config, Some(began), false, after(4.5));
    assert_eq!(retry, Duration::from_secs(1));
    let last = until_next_round(&config, Some(began), false, after(9.6));
    assert!(last <= Duration::from_secs_f64(0.4) + Duration::from_millis(1));
    assert_eq!(
        until_next_round(&config, None, false, after(1.0)),
        Duration::from_secs(1)
    );
}

fn lease_json(holder: &str, version: &str) -> Response<Body> {
    let lease = serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "fleet", "namespace": "flotilla-system", "resourceVersion": version},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
            "renewTime": "2026-12-01T10:00:00.000000Z"}});
    Response::new(Body::from(serde_json::to_vec(&lease).unwrap()))
}

/// The holder renews with one write of the Lease as it last wrote it; when someone wrote it
/// since (a conflict on its resourceVersion), it reads the Lease and follows what it says.
#[tokio::test]
async fn the_holder_renews_in_one_request_and_reads_only_after_a_conflict() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "flotilla-system");
    let api: Api<Lease> = Api::namespaced(client, "flotilla-system");
    let config = LeaseConfig {
        name: "fleet".into(),
        identity: "a".into(),
        duration: Duration::from_secs(15),
    };
    let mut observer = Observer::default();
    let mut held = None;
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        // Round 1: read (ours), renew.
        let (request, respond) = handle.next_request().await.unwrap();
        seen.push(request.method().clone());
        respond.send_response(lease_json("a", "10"));
        let (request, respond) = handle.next_request().await.unwrap();
        seen.push(request.method().clone());
        respond.send_response(lease_json("a", "11"));
        // Round 2: one write, at the version written last.
        let (request, respond) = handle.next_request().await.unwrap();
        seen.push(request.method().clone());
        let body = request.into_body().collect_bytes().await.unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(sent["metadata"]["resourceVersion"], "11");
        respond.send_response(lease_json("a", "12"));
        // Round 3: someone else wrote it; the write conflicts, the read shows their claim.
        let (request, respond) = handle.next_request().await.unwrap();
        seen.push(request.method().clone());
        let conflict = serde_json::json!({"kind": "Status", "apiVersion": "v1",
            "status": "Failure", "reason": "Conflict", "code": 409, "message": "conflict"});
        respond.send_response(
            Response::builder()
                .status(409)
                .body(Body::from(serde_json::to_vec(&conflict).unwrap()))
                .unwrap(),
        );
        let (request, respond) = handle.next_request().await.unwrap();
        seen.push(request.method().clone());
        respond.send_response(lease_json("b", "13"));
        seen
    });
    assert!(
        round(&api, &config, &mut observer, &mut held)
            .await
            .unwrap()
    );
    assert!(
        round(&api, &config, &mut observer, &mut held)
            .await
            .unwrap()
    );
    assert!(
        !round(&api, &config, &mut observer, &mut held)
            .await
            .unwrap()
    );
    assert!(held.is_none(), "a follower holds nothing");
    use http::Method;
    assert_eq!(
        server.await.unwrap(),
        [
            Method::GET,
            Method::PUT,
            Method::PUT,
            Method::PUT,
            Method::GET
        ]
    );
}
