//! The API server's own request counter, `apiserver_request_total` from `/metrics`.

pub use crate::common::STAMPED_AND_NAMESPACES;
use kube::Client;
use std::collections::BTreeMap;

/// Write requests by verb (POST/PUT/PATCH/DELETE); `resources` filters, `None` counts all.
pub async fn writes(client: &Client, resources: Option<&[&str]>) -> BTreeMap<String, u64> {
    apiserver_writes(client, |resource| {
        resources.is_none_or(|resources| resources.contains(&resource))
    })
    .await
}

/// Write requests by verb to every resource but `excluded`.
pub async fn writes_except(client: &Client, excluded: &[&str]) -> BTreeMap<String, u64> {
    apiserver_writes(client, |resource| !excluded.contains(&resource)).await
}

pub fn delta(
    after: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(verb, n)| (verb.clone(), n - before.get(verb).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

pub fn total(counts: &BTreeMap<String, u64>) -> u64 {
    counts.values().sum()
}

/// Sums and counts of the API server's latency histograms, to see where a request's time goes.
#[derive(Default, Clone)]
pub struct Latencies {
    /// (histogram, grouping label value) -> (sum of seconds, count).
    series: BTreeMap<(&'static str, String), (f64, f64)>,
}

const WATCH_EVENTS: &str = "apiserver_watch_events_total";
/// The verbs of `apiserver_request_total` and `apiserver_request_duration_seconds` that write
/// (a server-side apply counts as APPLY).
const WRITE_VERBS: [&str; 5] = ["POST", "PUT", "PATCH", "APPLY", "DELETE"];

/// A label that must have a given value.
type LabelFilter = Option<(&'static str, &'static str)>;

/// (histogram, the label to group by, a label filter)
const HISTOGRAMS: [(&str, &str, LabelFilter); 3] = [
    // Whole requests, by verb.
    ("apiserver_request_duration_seconds", "verb", None),
    // The API server's calls to etcd, by operation.
    ("etcd_request_duration_seconds", "operation", None),
    // Time spent queued by API Priority and Fairness, by priority level.
    (
        "apiserver_flowcontrol_request_wait_duration_seconds",
        "priority_level",
        Some(("execute", "true")),
    ),
];

impl Latencies {
    pub async fn read(client: &Client) -> Latencies {
        let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let text = client.request_text(request).await.unwrap_or_default();
        let mut series = BTreeMap::new();
        for line in text.lines() {
            // Every event sent to a watcher, each kind's counted: what one write costs beyond
            // itself, once for each watch it matches.
            if let Some(rest) = line.strip_prefix("apiserver_watch_events_total{") {
                let n: f64 = rest
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                let entry: &mut (f64, f64) =
                    series.entry((WATCH_EVENTS, String::new())).or_default();
                entry.1 += n;
                continue;
            }
            for (name, group, filter) in HISTOGRAMS {
                let (is_sum, rest) = if let Some(rest) = line.strip_prefix(name) {
                    if let Some(r) = rest.strip_prefix("_sum{") {
                        (true, r)
                    } else if let Some(r) = rest.strip_prefix("_count{") {
                        (false, r)
                    } else {
                        continue;
                    }
                } else {
                    continue;
                };
                if let Some((key, want)) = filter
                    && label(rest, key) != Some(want)
                {
                    continue;
                }
                let Some(value) = label(rest, group) else {
                    continue;
                };
                let n: f64 = rest
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                let entry: &mut (f64, f64) = series.entry((name, value.to_string())).or_default();
                if is_sum {
                    entry.0 += n;
                } else {
                    entry.1 += n;
                }
            }
        }
        Latencies { series }
    }

    /// "GET 1.2 ms x900, PATCH 30 ms x4500" for one histogram, between two snapshots.
    fn describe(&self, before: &Latencies, name: &str, min_count: f64) -> String {
        let parts: Vec<String> = self
            .series
            .iter()
            .filter(|((n, _), _)| *n == name)
            .filter_map(|(key, (sum, count))| {
                let (sum0, count0) = before.series.get(key).copied().unwrap_or_default();
                let (sum, count) = (sum - sum0, count - count0);
                (count >= min_count)
                    .then(|| format!("{} {:.1} ms x{count:.0}", key.1, 1000.0 * sum / count))
            })
            .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(", ")
        }
    }

    /// Counts of a series between `before` and this snapshot.
    fn count_since(&self, before: &Latencies, key: &(&'static str, String)) -> f64 {
        let count = |l: &Latencies| l.series.get(key).map_or(0.0, |(_, n)| *n);
        count(self) - count(before)
    }

    /// "watch events sent: 90000, 2.5 a write" between `before` and this snapshot.
    fn watch_events(&self, before: &Latencies) -> String {
        let events = self.count_since(before, &(WATCH_EVENTS, String::new()));
        let writes: f64 = WRITE_VERBS
            .iter()
            .map(|verb| {
                let key = ("apiserver_request_duration_seconds", verb.to_string());
                self.count_since(before, &key)
            })
            .sum();
        if writes < 1.0 {
            return format!("watch events sent: {events:.0}");
        }
        format!(
            "watch events sent: {events:.0}, {:.2} a write ({writes:.0} writes)",
            events / writes
        )
    }

    /// Mean latencies between `before` and this snapshot (series with at least 10 requests),
    /// and the watch events the API server sent meanwhile.
    pub fn since(&self, before: &Latencies) -> String {
        format!(
            "API server mean latency by verb: {}; its etcd calls: {}; APF queue wait: {}; {}",
            self.describe(before, "apiserver_request_duration_seconds", 10.0),
            self.describe(before, "etcd_request_duration_seconds", 10.0),
            self.describe(
                before,
                "apiserver_flowcontrol_request_wait_duration_seconds",
                10.0
            ),
            self.watch_events(before),
        )
    }
}

/// Write requests the API server has served, by verb, for the
/// resources `counted` accepts: its own `apiserver_request_total` counter from `/metrics`.
/// Panics if the counter cannot be read: a count of 0 must mean no writes, not no data.
pub async fn apiserver_writes(
    client: &Client,
    counted: impl Fn(&str) -> bool,
) -> BTreeMap<String, u64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client
        .request_text(request)
        .await
        .unwrap_or_else(|e| panic!("the API server's /metrics: {e}"));
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .collect();
    assert!(
        !samples.is_empty(),
        "the API server's /metrics has no apiserver_request_total"
    );
    let mut by_verb = BTreeMap::new();
    for line in samples {
        let Some(verb) = label(line, "verb").filter(|v| WRITE_VERBS.contains(v)) else {
            continue;
        };
        if !counted(label(line, "resource").unwrap_or("")) {
            continue;
        }
        let n = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no value in {line:?}"));
        *by_verb.entry(verb.to_string()).or_insert(0) += n as u64;
    }
    by_verb
}

/// The value of label `name` in a Prometheus sample line.
pub fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}
