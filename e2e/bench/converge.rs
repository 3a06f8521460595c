//! flotilla's scenarios that converge a fleet, each timed until the bench's watches show it
//! done: the cold converge (a fresh flotilla, the fleet with nothing stamped), the rollout (a
//! restart with new values) and the burst (N new opted-in namespaces while it runs). Each also
//! counts flotilla's LISTs, which come only from its watches (re)listing, so must not grow with N.

use crate::audit::{Actor, Lists, Window};
use crate::cluster::Flotilla;
use crate::phase::{Phase, Scenario};
use crate::probe::{Probe, wait_idle};
use crate::procstat::{Reading, Usage};
use crate::report::{Row, Target};
use crate::setup::{SETUP_CONCURRENCY, create_namespaces, keys, names, verify};
use flotilla::render::Renderer;
use std::path::Path;
use std::time::{Duration, Instant};

/// How often the bench checks a fleet-wide condition while a scenario runs.
const EVERY: Duration = Duration::from_millis(50);

/// flotilla's LIST requests in one scenario.
pub struct Listed {
    scenario: &'static str,
    lists: Lists,
    gap: Option<String>,
}

impl Listed {
    fn of(scenario: &'static str, window: &Window) -> Listed {
        Listed {
            scenario,
            lists: window.lists_of(Actor::Flotilla).0,
            gap: window.gap.clone(),
        }
    }

    fn within(&self, bound: usize) -> bool {
        self.gap.is_none() && self.lists.started as usize <= bound && self.lists.namespaced == 0
    }
}

/// Each watch lists when it starts and relists when its resume fails (410 Gone): a couple of
/// times per watch in a scenario, whatever N is. A list per namespace would be N more.
const LISTS_PER_WATCH: usize = 2;

/// The target: in each scenario, at most `LISTS_PER_WATCH` LISTs (first pages) per watch, and
/// none of one namespace's objects.
pub fn lists_target(listed: &[Listed], watches: usize) -> Target {
    let bound = LISTS_PER_WATCH * watches;
    let each: Vec<String> = listed
        .iter()
        .map(|l| {
            let name = l.scenario.trim_start_matches("flotilla ");
            let mut said = format!("{name} {} (+{} pages)", l.lists.started, l.lists.pages);
            if l.lists.namespaced > 0 {
                said.push_str(&format!(", {} of one namespace", l.lists.namespaced));
            }
            if let Some(gap) = &l.gap {
                said.push_str(&format!(", AUDIT LOG INCOMPLETE: {gap}"));
            }
            said
        })
        .collect();
    Target {
        what: format!("flotilla's LISTs <= {LISTS_PER_WATCH} per watch, any N"),
        pass: listed.iter().all(|l| l.within(bound)),
        detail: format!(
            "at most {bound} per scenario ({watches} watches): {}",
            each.join(", ")
        ),
    }
}

/// A fresh flotilla, nothing stamped yet: from its start until every namespace has its objects
/// and its fleet view (NamespaceWorker status at the revision and the `Applied` Event), which
/// is what the "limit + fleet view" baseline writes too.
pub async fn cold(
    phase: &mut Phase<'_>,
    config: &Path,
    renderer: &Renderer,
) -> (Row, Flotilla, Listed, Startup) {
    eprintln!("bench: cold converge");
    let (bench, what) = (phase.bench, "cold converge");
    let idle = wait_idle(bench.idle_max, None).await;
    let started = start(phase, what, (config, "flotilla-1.log"), None).await;
    let Started {
        flotilla, probe, ..
    } = &started;
    let revision = renderer.revision();
    let (tracker, timeout) = (&phase.tracker, bench.timeout);
    let t_workers = tracker
        .wait_view(what, timeout, EVERY, phase.fleet, revision, false)
        .await;
    let t_view = tracker
        .wait_view(what, timeout, EVERY, phase.fleet, revision, true)
        .await;
    let seconds = (t_view - flotilla.started).as_secs_f64();
    let (cp, used, window) = phase.finish(probe, &started.usage, seconds).await;
    let keys = &phase.fleet_keys;
    let (found, _) = verify(&phase.cluster.admin, keys, None).await;
    assert_eq!(found, keys.len(), "cold converge: objects missing");
    let since = |t: Instant| (t - flotilla.started).as_secs_f64();
    let startup = Startup::of(flotilla, &window);
    let notes = vec![
        format!(
            "from process start until every namespace's objects and fleet view exist ({seconds:.3} s): \
             all Deployments (applied last) at {:.3} s, all {} objects at {:.3} s, every NamespaceWorker's \
             status at the revision at {:.3} s, every 'Applied' Event at {seconds:.3} s; \
             start-up: {}",
            since(started.deployments),
            keys.len(),
            since(started.all),
            since(t_workers),
            startup.describe()
        ),
        format!(
            "verified by LIST: {found}/{}; requests counted until 1 s after convergence; {idle}{cp}",
            keys.len()
        ),
    ];
    let (row, listed) = converged(
        phase,
        ("flotilla cold converge", keys.len(), seconds),
        used,
        &window,
        notes,
    );
    (row, started.flotilla, listed, startup)
}

/// How long a new flotilla took to its first write (to anything but its Lease) and to "initial
/// sync complete" (every namespace looked at once), from its process's start.
#[derive(Clone, Copy)]
pub struct Startup {
    pub first_write: Option<f64>,
    pub initial_sync: Option<f64>,
}

impl Startup {
    pub fn of(flotilla: &Flotilla, window: &Window) -> Startup {
        Startup {
            first_write: window.first_write.map(|t| flotilla.seconds_to(t)),
            initial_sync: flotilla.logged_after("initial sync complete"),
        }
    }

    pub fn describe(&self) -> String {
        let at = |s: Option<f64>, none: &str| s.map_or(none.to_string(), |s| format!("{s:.1} s"));
        format!(
            "first write (not its Lease) {}, 'initial sync complete' logged {} after process start",
            at(self.first_write, "none"),
            at(self.initial_sync, "not yet")
        )
    }
}

/// A new value in the controllers' ConfigMap: flotilla reads its config at start, so it is
/// restarted with it. Timed from the new process's start until every object is at the new
/// revision, as the limit rollout is.
pub async fn rollout(
    phase: &mut Phase<'_>,
    flotilla: Flotilla,
    (config, renderer): (&Path, &Renderer),
    change: &str,
) -> (Row, Flotilla, Listed) {
    eprintln!("bench: rollout");
    let (bench, what) = (phase.bench, "rollout");
    let idle = wait_idle(bench.idle_max, Some(&flotilla)).await;
    flotilla.stop();
    let revision = Some(renderer.revision());
    let started = start(phase, what, (config, "flotilla-2.log"), revision).await;
    let seconds = (started.all - started.flotilla.started).as_secs_f64();
    let (cp, used, window) = phase.finish(&started.probe, &started.usage, seconds).await;
    let keys = &phase.fleet_keys;
    let (found, _) = verify(&phase.cluster.admin, keys, None).await;
    assert_eq!(found, keys.len(), "rollout: objects missing");
    let per_namespace = keys.len() / bench.n.max(1);
    let notes = vec![
        format!(
            "restart with {change}: from process start until every object is at the new revision \
             ({seconds:.3} s; the revision annotation changes on all {per_namespace} objects per namespace, \
             the value on its ConfigMap; no pod is replaced); every Deployment at it at {:.3} s",
            (started.deployments - started.flotilla.started).as_secs_f64()
        ),
        format!(
            "verified by LIST: {found}/{} objects exist; {idle}{cp}",
            keys.len()
        ),
    ];
    let (row, listed) = converged(
        phase,
        ("flotilla rollout", keys.len(), seconds),
        used,
        &window,
        notes,
    );
    (row, started.flotilla, listed)
}

/// N new namespaces, opted in at creation, while flotilla runs a fleet of N: from the first
/// create until all their objects exist.
pub async fn burst(
    phase: &mut Phase<'_>,
    flotilla: &mut Flotilla,
    renderer: &Renderer,
) -> (Row, Listed) {
    eprintln!("bench: burst");
    let (bench, n) = (phase.bench, phase.bench.n);
    let burst = names("burst", n);
    let burst_keys = keys(renderer, &burst);
    let idle = wait_idle(bench.idle_max, Some(flotilla)).await;
    phase.audit.take();
    let usage = Usage::start(flotilla.process());
    let mut probe = Probe::start(&phase.cluster.admin).await;
    probe.flotilla(flotilla, false);
    let t0 = Instant::now();
    create_namespaces(&phase.cluster.admin, &burst, true).await;
    let created = t0.elapsed().as_secs_f64();
    let t_all = phase
        .tracker
        .wait_all("burst", bench.timeout, EVERY, &burst_keys, None)
        .await;
    let seconds = (t_all - t0).as_secs_f64();
    let (cp, used, window) = phase.finish(&probe, &usage, seconds).await;
    flotilla.assert_running();
    let (found, _) = verify(&phase.cluster.admin, &burst_keys, None).await;
    let notes = vec![format!(
        "{n} new namespaces created opted-in ({SETUP_CONCURRENCY} at once, all created after {created:.1} s) \
         while flotilla ran a fleet of {n}; from the first create until all {} objects exist; \
         verified by LIST: {found}/{}; {idle}{cp}",
        burst_keys.len(),
        burst_keys.len()
    )];
    converged(
        phase,
        ("flotilla burst", burst_keys.len(), seconds),
        used,
        &window,
        notes,
    )
}

/// The row of a scenario that converged `objects` in `seconds`, and its LISTs.
fn converged(
    phase: &Phase<'_>,
    (name, objects, seconds): (&'static str, usize, f64),
    used: Reading,
    window: &Window,
    mut notes: Vec<String>,
) -> (Row, Listed) {
    let (lists, described) = window.lists_of(Actor::Flotilla);
    notes.push(format!(
        "LISTs by flotilla: {} lists, {} further pages, {} of one namespace; by resource \
         (lists(+pages)): {described}",
        lists.started, lists.pages, lists.namespaced
    ));
    let scenario = Scenario {
        name,
        objects,
        seconds,
        throughput: true,
    };
    (
        phase.row(scenario, used, window, notes),
        Listed::of(name, window),
    )
}

/// A flotilla just started, and when the bench saw it converge the fleet.
struct Started {
    flotilla: Flotilla,
    probe: Probe,
    usage: Usage,
    /// When every Deployment, and every object, was seen (at the revision, if one was given).
    deployments: Instant,
    all: Instant,
}

/// Starts a flotilla with `config` (logging to `log` in the work dir), with a probe and the
/// audit window from just before, and waits until it has stamped every Deployment, then every
/// object, at `revision` (any, if `None`).
async fn start(
    phase: &mut Phase<'_>,
    what: &str,
    (config, log): (&Path, &str),
    revision: Option<&str>,
) -> Started {
    phase.audit.take();
    let mut probe = Probe::start(&phase.cluster.admin).await;
    let log = phase.bench.work.join(log);
    let mut flotilla = Flotilla::start(&phase.cluster, config, &log);
    let (tracker, timeout) = (&phase.tracker, phase.bench.timeout);
    let deployments = tracker
        .wait_all(what, timeout, EVERY, &phase.deployments, revision)
        .await;
    flotilla.assert_running();
    let all = tracker
        .wait_all(what, timeout, EVERY, &phase.fleet_keys, revision)
        .await;
    // Counted from the process's start: looked for only now, as that may take a while.
    probe.flotilla(&flotilla, true);
    let usage = Usage::since_start(flotilla.process());
    Started {
        flotilla,
        probe,
        usage,
        deployments,
        all,
    }
}
