//! flotilla's phase of the bench: a fresh control plane with the fleet's namespaces (opted in)
//! and the reaction's (not yet), the bench's tracker and audit tail, and how a flotilla
//! scenario's row is made (with why a figure is missing, if one is).

use crate::audit::{Actor, AuditTail, Window};
use crate::cluster::Cluster;
use crate::probe::Probe;
use crate::procstat::{Reading, Usage};
use crate::report::Row;
use crate::setup::{Bench, INSTANCE, create_namespaces, flotilla_watches, keys};
use crate::tracker::Tracker;
use flotilla::kinds::Kind;
use flotilla::object::ObjectKey;
use flotilla::render::Renderer;
use std::time::Duration;

pub struct Phase<'a> {
    pub bench: &'a Bench,
    pub cluster: Cluster,
    pub tracker: Tracker,
    pub audit: AuditTail,
    pub fleet: &'a [String],
    pub fleet_keys: Vec<ObjectKey>,
    pub deployments: Vec<ObjectKey>,
    /// How many watches flotilla runs for this fleet: what bounds its LISTs.
    pub watches: usize,
}

impl<'a> Phase<'a> {
    pub async fn start(
        bench: &'a Bench,
        renderer: &Renderer,
        fleet: &'a [String],
        react: &[String],
    ) -> Phase<'a> {
        let (cluster, tracker, audit) = observed(bench, &[fleet], react).await;
        let fleet_keys = keys(renderer, fleet);
        let deployments = fleet_keys
            .iter()
            .filter(|k| k.kind == Kind::Deployment)
            .cloned()
            .collect();
        Phase {
            bench,
            cluster,
            tracker,
            audit,
            fleet,
            watches: flotilla_watches(&fleet_keys),
            fleet_keys,
            deployments,
        }
    }

    /// The row of a flotilla scenario: its usage (read as its window ended), requests and
    /// `notes`, with notes on what is missing.
    pub fn row(
        &self,
        scenario: Scenario,
        used: Reading,
        window: &Window,
        notes: Vec<String>,
    ) -> Row {
        let (cpu, rss) = used;
        let mut notes = notes;
        if let Err(why) = &rss {
            notes.push(format!("NO PEAK RSS: {why}"));
        }
        notes.extend(window.gap_note());
        Row {
            scenario: scenario.name,
            n: self.bench.n,
            objects: scenario.objects,
            seconds: scenario.seconds,
            throughput: scenario.throughput,
            rss_mib: rss.ok(),
            cpu_s: cpu,
            verbs: window.verbs_of(Actor::Flotilla),
            notes,
        }
    }

    /// Ends a scenario's window of `seconds`: who was busy, flotilla's usage, and (a second
    /// later, once the audit log has them) the requests made in it.
    pub async fn finish(
        &mut self,
        probe: &Probe,
        usage: &Usage,
        seconds: f64,
    ) -> (String, Reading, Window) {
        let busy = probe.finish(&self.cluster.admin, seconds).await;
        let used = usage.read();
        tokio::time::sleep(Duration::from_secs(1)).await;
        (busy, used, self.audit.take())
    }

    pub fn down(self) {
        drop(self.tracker);
        self.cluster.down();
    }
}

/// A fresh control plane with the namespaces `opted_in` and `opted_out`, the bench's watches on
/// it, and its audit log followed from a moment after they are all in.
pub async fn observed(
    bench: &Bench,
    opted_in: &[&[String]],
    opted_out: &[String],
) -> (Cluster, Tracker, AuditTail) {
    let cluster = Cluster::fresh(&bench.repo, &bench.work).await;
    for names in opted_in {
        create_namespaces(&cluster.admin, names, true).await;
    }
    create_namespaces(&cluster.admin, opted_out, false).await;
    let tracker = Tracker::start(&cluster.admin, INSTANCE).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let audit = AuditTail::new(cluster.audit_log.clone());
    (cluster, tracker, audit)
}

/// What a row says about its scenario besides usage and requests.
pub struct Scenario {
    pub name: &'static str,
    pub objects: usize,
    pub seconds: f64,
    /// Whether objects/s means anything for this scenario.
    pub throughput: bool,
}
