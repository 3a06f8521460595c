use super::*;

#[test]
fn endpoints_answer_as_documented() {
    let metrics = Metrics::default();
    assert_eq!(metrics.respond("/healthz").status(), StatusCode::OK);
    assert_eq!(
        metrics.respond("/readyz").status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    metrics.set_ready();
    assert_eq!(metrics.respond("/readyz").status(), StatusCode::OK);
    assert_eq!(metrics.respond("/nope").status(), StatusCode::NOT_FOUND);
}

#[test]
fn metrics_use_the_usual_names() {
    let metrics = Metrics::default();
    metrics
        .reconciles
        .get_or_create(&ResultLabel { result: "ok" })
        .inc();
    metrics
        .objects
        .get_or_create(&ActionLabel { action: "created" })
        .inc_by(9);
    metrics.is_leader.set(1);
    metrics.reconcile_duration.observe(0.02);
    let text = metrics.encode();
    for line in [
        "flotilla_reconciles_total{result=\"ok\"} 1",
        "flotilla_objects_total{action=\"created\"} 9",
        "flotilla_is_leader 1",
        "flotilla_reconcile_duration_seconds_count 1",
        "flotilla_managed_namespaces 0",
    ] {
        assert!(text.contains(line), "{line} missing in:\n{text}");
    }
}

#[test]
fn build_info_names_the_version_and_commit() {
    let text = Metrics::default().encode();
    let line = format!(
        "flotilla_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("FLOTILLA_GIT_COMMIT")
    );
    assert!(text.contains(&line), "{line} missing in:\n{text}");
    assert!(text.contains("# TYPE flotilla_build_info gauge"), "{text}");
}

#[test]
fn alerts_and_dashboard_query_only_metrics_flotilla_serves() {
    let metrics = Metrics::default();
    // A family shows in /metrics from its first sample on: one in each.
    let result = ResultLabel { result: "ok" };
    metrics.reconciles.get_or_create(&result).inc();
    let action = ActionLabel { action: "created" };
    metrics.objects.get_or_create(&action).inc();
    let error = ApiErrorLabels {
        code: "500".into(),
        verb: "get",
    };
    metrics.api_errors.get_or_create(&error).inc();
    let fleet = crate::rollout::fleet::FleetStatus::default();
    let counts = crate::rollout::Counts::default();
    metrics.fleet.record(&fleet, &counts, []);
    let text = metrics.encode();
    // The check can fail: a text that serves nothing misses every queried metric.
    assert!(queries::missing("").contains_key("flotilla_is_leader"));
    let missing = queries::missing(&text);
    assert!(
        missing.is_empty(),
        "queried by monitoring/ but not served: {missing:?}\n{text}"
    );
}

#[test]
fn process_memory_is_served_under_its_usual_name() {
    let text = Metrics::default().encode();
    let line = text
        .lines()
        .find(|l| l.starts_with("process_resident_memory_bytes "))
        .unwrap_or_else(|| panic!("no process_resident_memory_bytes in:\n{text}"));
    let bytes: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    // A test process holds at least a megabyte and far less than a terabyte.
    assert!((1e6..1e12).contains(&bytes), "{line}");
}

#[test]
fn the_fleet_gauges_say_what_the_leader_wrote_and_vanish_when_it_stops_leading() {
    use crate::rollout::Counts;
    use crate::rollout::fleet::FleetStatus;
    use crate::status::Phase;
    let metrics = Metrics::default();
    let status = FleetStatus {
        phase: crate::rollout::Phase::Failed,
        stable_revision: 3,
        target_revision: 4,
        reap_held: 12,
        ..FleetStatus::default()
    };
    let counts = Counts {
        total: 40,
        updated: 7,
        ready: 5,
        failed: 2,
        unavailable: 2,
        asleep: 0,
    };
    let phases = [
        Phase::Ready,
        Phase::Degraded,
        Phase::Ready,
        Phase::ApplyFailed,
    ];
    metrics.fleet.record(&status, &counts, phases);
    let text = metrics.encode();
    for line in [
        "flotilla_namespaces{phase=\"Ready\"} 2",
        "flotilla_namespaces{phase=\"Degraded\"} 1",
        "flotilla_namespaces{phase=\"ApplyFailed\"} 1",
        "flotilla_namespaces{phase=\"Conflict\"} 0",
        "flotilla_rollout_phase{phase=\"Failed\"} 1",
        "flotilla_rollout_phase{phase=\"Progressing\"} 0",
        "flotilla_rollout_namespaces{state=\"total\"} 40",
        "flotilla_rollout_namespaces{state=\"updated\"} 7",
        "flotilla_rollout_namespaces{state=\"ready\"} 5",
        "flotilla_rollout_namespaces{state=\"failed\"} 2",
        "flotilla_rollout_revision{revision=\"target\"} 4",
        "flotilla_rollout_revision{revision=\"stable\"} 3",
        "flotilla_rollout_reap_held 12",
    ] {
        assert!(text.contains(line), "{line} missing in:\n{text}");
    }
    metrics.fleet.clear();
    let text = metrics.encode();
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("flotilla_namespaces") || l.starts_with("flotilla_rollout_"))
        .collect();
    assert!(samples.is_empty(), "{samples:?}");
}

use std::sync::atomic::AtomicUsize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server on a loopback port of its own, with `limits`.
async fn server(limits: Limits) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let listener = &listener;
        let accept = move || async move {
            let (stream, peer) = listener.accept().await?;
            Ok((stream, Some(peer.ip())))
        };
        serve_with(accept, Arc::new(Metrics::default()), limits).await;
    });
    address
}

/// Sends a GET of `path` on `stream` and reads the answer's first line, if one comes within
/// `within`.
async fn get(stream: &mut TcpStream, path: &str, within: Duration) -> Option<String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: flotilla\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0; 1024];
    let n = tokio::time::timeout(within, stream.read(&mut answer))
        .await
        .ok()?
        .unwrap();
    let text = String::from_utf8_lossy(&answer[..n]).to_string();
    text.lines().next().map(str::to_string)
}

#[tokio::test]
async fn a_client_that_sends_nothing_is_disconnected_after_the_header_timeout() {
    let timeout = Duration::from_millis(300);
    let address = server(Limits {
        connections: 4,
        header_timeout: timeout,
        ..LIMITS
    })
    .await;
    let opened = std::time::Instant::now();
    let mut silent = TcpStream::connect(address).await.unwrap();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buffer)).await;
    let waited = opened.elapsed();
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "still open after {waited:?}: {read:?}"
    );
    assert!(
        waited >= timeout - Duration::from_millis(50),
        "closed after {waited:?}"
    );
    // The server still answers.
    let mut client = TcpStream::connect(address).await.unwrap();
    let status = get(&mut client, "/healthz", Duration::from_secs(2)).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_until_a_slot_frees() {
    let address = server(Limits {
        connections: 2,
        header_timeout: Duration::from_secs(30),
        ..LIMITS
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut client = TcpStream::connect(address).await.unwrap();
        // Served: each holds a slot from now on (keep-alive).
        let status = get(&mut client, "/healthz", Duration::from_secs(2)).await;
        assert_eq!(status.as_deref(), Some("HTTP/1.1 200 OK"));
        held.push(client);
    }
    // The third connects (the listen backlog takes it) but is not served...
    let mut third = TcpStream::connect(address).await.unwrap();
    let status = get(&mut third, "/healthz", Duration::from_millis(500)).await;
    assert_eq!(status, None, "served beyond the limit");
    // ...until one of the others ends: then its request is answered.
    drop(held.pop());
    let mut answer = vec![0; 1024];
    let n = tokio::time::timeout(Duration::from_secs(2), third.read(&mut answer))
        .await
        .expect("answered once a slot freed")
        .unwrap();
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn accept_errors_are_retried_with_backoff_not_in_a_busy_loop() {
    let calls = Arc::new(AtomicUsize::new(0));
    let (mut client, server_side) = tokio::io::duplex(4096);
    let mut connection = Some(server_side);
    let accept = {
        let calls = Arc::clone(&calls);
        move || {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            let next = match n {
                // EMFILE: too many open files.
                0..10 => Some(Err(std::io::Error::from_raw_os_error(24))),
                10 => connection.take().map(|c| Ok((c, None))),
                _ => None,
            };
            async move {
                tokio::task::yield_now().await;
                match next {
                    Some(result) => result,
                    // A server that spins is stopped here, after 1000 calls, so that
                    // the test can tell.
                    None if n < 1000 => Err(std::io::Error::from_raw_os_error(24)),
                    None => std::future::pending().await,
                }
            }
        }
    };
    let started = tokio::time::Instant::now();
    tokio::spawn(serve_with(accept, Arc::new(Metrics::default()), LIMITS));
    // Ten failures, then a connection: it is served.
    client
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: flotilla\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0; 1024];
    let n = client.read(&mut answer).await.unwrap();
    assert!(answer[..n].starts_with(b"HTTP/1.1 200 OK"));
    // 5 ms doubling, at most 1 s: 5+10+...+640, then 1 s twice.
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(3_270)..Duration::from_millis(3_400)).contains(&waited),
        "{waited:?}"
    );
    // After it, failures again, paced: in a minute at most ~70 tries, not 1000.
    tokio::time::sleep(Duration::from_secs(60)).await;
    let tries = calls.load(Ordering::Relaxed);
    assert!((60..=80).contains(&tries), "{tries} accepts in a minute");
}

/// A client at `from` (a loopback address) that pipelines `GET /metrics` and never reads the
/// answers, with a small receive buffer so that the server soon cannot write any more.
async fn pipelining(address: std::net::SocketAddr, from: &str) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    let requests = "GET /metrics HTTP/1.1\r\nHost: flotilla\r\n\r\n".repeat(3000);
    // Not awaited to the end: once the server stops reading, this write blocks too.
    let _ = tokio::time::timeout(
        Duration::from_millis(500),
        stream.write_all(requests.as_bytes()),
    )
    .await;
    stream
}

async fn probe(address: std::net::SocketAddr, from: &str) -> Option<String> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    get(&mut stream, "/healthz", Duration::from_secs(2)).await
}

#[tokio::test]
async fn a_client_that_pipelines_and_never_reads_cannot_hold_every_slot() {
    let address = server(Limits {
        connections: 4,
        per_client: 2,
        header_timeout: Duration::from_secs(30),
        lifetime: Duration::from_secs(60),
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pipelining(address, "127.0.0.1").await);
    }
    // Another client (the kubelet's probe) is still answered.
    let status = probe(address, "127.0.0.2").await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 200 OK"));
}

#[tokio::test]
async fn a_connection_is_closed_after_its_lifetime_whatever_it_does() {
    let address = server(Limits {
        connections: 1,
        per_client: 1,
        header_timeout: Duration::from_secs(30),
        lifetime: Duration::from_millis(500),
    })
    .await;
    let _held = pipelining(address, "127.0.0.1").await;
    // The one slot is held until the lifetime is up; then the next client is served.
    let status = probe(address, "127.0.0.2").await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 200 OK"));
}
