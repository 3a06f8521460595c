//! The results table, the ratios, the one-line summary and the targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub struct Row {
    pub scenario: &'static str,
    pub n: usize,
    /// Objects the scenario stamped (or, for steady state, kept).
    pub objects: usize,
    pub seconds: f64,
    /// Whether objects/s means anything for this scenario.
    pub throughput: bool,
    pub rss_mib: Option<f64>,
    pub cpu_s: Option<f64>,
    /// Completed requests by verb, from the audit log.
    pub verbs: BTreeMap<String, u64>,
    pub notes: Vec<String>,
}

/// Adds a scenario's row to the table, and says how it went as soon as it is known.
pub fn record(rows: &mut Vec<Row>, row: Row) {
    eprintln!("bench: {}: {:.3} s", row.scenario, row.seconds);
    rows.push(row);
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

pub fn verbs(verbs: &BTreeMap<String, u64>) -> String {
    if verbs.is_empty() {
        return "none".into();
    }
    verbs
        .iter()
        .map(|(v, n)| format!("{v}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26} {:>5} {:>9} {:>10} {:>13} {:>7}  requests by verb (audit log)",
        "scenario", "N", "seconds", "objects/s", "peak RSS MiB", "CPU s"
    );
    for row in rows {
        let rate = if row.throughput && row.seconds > 0.0 {
            format!("{:.0}", row.objects as f64 / row.seconds)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{:<26} {:>5} {:>9.3} {:>10} {:>13} {:>7}  {}",
            row.scenario,
            row.n,
            row.seconds,
            rate,
            opt(row.rss_mib, 1),
            opt(row.cpu_s, 2),
            verbs(&row.verbs)
        );
    }
    let _ = writeln!(out);
    for row in rows {
        for note in &row.notes {
            let _ = writeln!(out, "  {}: {note}", row.scenario);
        }
    }
    out
}

/// Each row's requests divided by its N: what one namespace costs, by verb.
pub fn per_namespace(rows: &[Row]) -> String {
    let mut out = String::from("\nrequests per namespace (audit log, by verb / N):\n");
    for row in rows.iter().filter(|r| !r.verbs.is_empty()) {
        let each: Vec<String> = row
            .verbs
            .iter()
            .map(|(v, n)| format!("{v}={:.2}", *n as f64 / row.n.max(1) as f64))
            .collect();
        let _ = writeln!(out, "  {:<26} {}", row.scenario, each.join(" "));
    }
    out
}

pub struct Target {
    pub what: String,
    pub pass: bool,
    pub detail: String,
}

pub fn targets(targets: &[Target]) -> String {
    let mut out = String::new();
    for t in targets {
        let verdict = if t.pass { "PASS" } else { "MISS" };
        let _ = writeln!(out, "  {verdict}  {:<48} {}", t.what, t.detail);
    }
    out
}
