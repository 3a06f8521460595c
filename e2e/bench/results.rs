//! The end of a run: the table, the ratios, the targets and a one-line summary, printed and
//! saved in the work dir.

use crate::baselines::{LIMIT, LIMIT_ROLLOUT, LIMIT_VIEW, SCRIPT};
use crate::converge::{Listed, lists_target};
use crate::probe::DISTURBED;
use crate::progressive::Progressive;
use crate::reaction::Reaction;
use crate::report::{self, Row, Target};
use crate::setup::Bench;
use crate::steady::Steady;
use std::time::Duration;

/// What the targets are judged on beyond the rows.
pub struct Findings {
    pub steady: Steady,
    pub reaction: Reaction,
    /// flotilla's LISTs in the scenarios that converge, and how many watches it runs.
    pub listed: Vec<Listed>,
    pub watches: usize,
    pub progressive: Progressive,
    pub workflows: crate::workflows::Counted,
}

/// The rollout to the whole fleet at once before revisions and rollouts, `rollout/limit
/// rollout`, by N: (N, ratio, commit). Judged at the nearest N, with room for run-to-run noise.
const ROLLOUT_BEFORE_REVISIONS: [(usize, f64, &str); 2] =
    [(500, 1.52, "78bd6a6"), (2000, 1.21, "bbd79b4")];
const NOISE: f64 = 1.1;

pub fn print(bench: &Bench, rows: &[Row], findings: &Findings, took: Duration) {
    let row = |name: &str| rows.iter().find(|r| r.scenario == name);
    let seconds = |name: &str| row(name).map_or(f64::NAN, |r| r.seconds);
    let cold = row("flotilla cold converge").expect("cold converge ran");
    let n = bench.n;
    let vs_limit = cold.seconds / seconds(LIMIT);
    let vs_view = cold.seconds / seconds(LIMIT_VIEW);
    let vs_script = seconds(SCRIPT) / cold.seconds;
    let flotilla_rows: Vec<&Row> = rows
        .iter()
        .filter(|r| r.scenario.starts_with("flotilla"))
        .collect();
    let peak_rss = flotilla_rows
        .iter()
        .filter_map(|r| r.rss_mib)
        .fold(f64::NAN, f64::max);
    let no_rss: Vec<&str> = flotilla_rows
        .iter()
        .filter(|r| r.rss_mib.is_none())
        .map(|r| r.scenario)
        .collect();
    let at = |target: usize| {
        if n == target {
            String::new()
        } else {
            format!(" (target is for N={target}; this run N={n})")
        }
    };
    let rollout_ratio = seconds("flotilla rollout") / seconds(LIMIT_ROLLOUT);
    let (before_n, before, commit) = ROLLOUT_BEFORE_REVISIONS
        .into_iter()
        .min_by_key(|(at_n, _, _)| at_n.abs_diff(n))
        .unwrap_or(ROLLOUT_BEFORE_REVISIONS[1]);
    let mut out = String::new();
    out.push_str(&format!(
        "\n== flotilla fleet bench, N={n} ({} objects per namespace), {:.0} s in all\n\n",
        cold.objects / n.max(1),
        took.as_secs_f64()
    ));
    out.push_str(&report::table(rows));
    out.push_str(&format!(
        "\nratios: cold/limit = {vs_limit:.2}x, cold/(limit + fleet view) = {vs_view:.2}x, burst/limit = {:.2}x, rollout/limit rollout = {:.2}x, \
         script/cold = {vs_script:.1}x (script extrapolated from {} namespaces)\n",
        seconds("flotilla burst") / seconds(LIMIT),
        rollout_ratio,
        bench.script_sample
    ));
    let targets = [
        // The limit is a client creating exactly the objects flotilla creates: the stamped ones
        // and the fleet view (NamespaceWorker with its status, one Event).
        Target {
            what: "cold converge <= 1.3x the limit (same objects)".into(),
            pass: vs_view <= 1.3,
            detail: format!(
                "{vs_view:.2}x; {vs_limit:.2}x the bare client (stamped objects only){}",
                at(2000)
            ),
        },
        Target {
            what: ">= 10x faster than the script baseline".into(),
            pass: vs_script >= 10.0,
            detail: format!("{vs_script:.1}x"),
        },
        findings.steady.target(),
        findings.reaction.target(&at(1000)),
        lists_target(&findings.listed, findings.watches),
        Target {
            what: "rollout at maxUnavailable 100% no slower than before revisions".into(),
            pass: rollout_ratio <= before * NOISE,
            detail: format!(
                "rollout/limit rollout = {rollout_ratio:.2}x; {before:.2}x at {commit} (N={before_n}), passes up to {:.2}x{}",
                before * NOISE,
                at(before_n)
            ),
        },
        findings.progressive.target(),
        findings.workflows.target(),
        Target {
            what: "flotilla peak RSS <= 100 MiB".into(),
            pass: no_rss.is_empty() && peak_rss <= 100.0,
            detail: if no_rss.is_empty() {
                format!("{peak_rss:.1} MiB{}", at(2000))
            } else if no_rss.len() < flotilla_rows.len() {
                format!(
                    "NO READING in: {} (see their notes); {peak_rss:.1} MiB in the others",
                    no_rss.join(", ")
                )
            } else {
                "NO READING in any scenario (see their notes)".into()
            },
        },
    ];
    let disturbed: Vec<&str> = rows
        .iter()
        .filter(|r| r.notes.iter().any(|n| n.contains(DISTURBED)))
        .map(|r| r.scenario)
        .collect();
    if !disturbed.is_empty() {
        out.push_str(&format!(
            "\nWARNING: other processes on this machine took over 10% of its CPU during: {}. \
             Those timings (and ratios built on them) are not clean; run again on an idle machine.\n",
            disturbed.join(", ")
        ));
    }
    out.push_str("\ntargets:\n");
    out.push_str(&report::targets(&targets));
    let Reaction { p50, p99 } = findings.reaction;
    out.push_str(&format!(
        "\nbench N={n}: cold {:.1} s ({vs_limit:.2}x limit, {vs_view:.2}x limit + fleet view, \
         {vs_script:.1}x faster than script), \
         reaction p50 {:.0} ms p99 {:.0} ms, steady-state writes {}, peak RSS {peak_rss:.0} MiB\n",
        cold.seconds,
        p50 * 1000.0,
        p99 * 1000.0,
        findings.steady.writes,
    ));
    print!("{out}");
    let file = bench.work.join(format!("results-N{n}.txt"));
    let _ = std::fs::write(&file, &out);
    eprintln!(
        "bench: results also in {}; flotilla logs in {}",
        file.display(),
        bench.work.display()
    );
}
