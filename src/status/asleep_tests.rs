//! A sleeping controller's status: the phase, the `Asleep` condition, and what is kept of its
//! last time awake.

use super::*;
use crate::sleep::{Cause, Policy, Verdict, Wake};

/// The Deployment at zero replicas, as its controller reports it.
fn scaled_down() -> Option<Health> {
    availability(&json!({
        "metadata": {"generation": 2},
        "spec": {"replicas": 0},
        "status": {"observedGeneration": 2},
    }))
}

fn asleep(since: i64) -> Verdict {
    Verdict::Asleep {
        since: at(since),
        wake: Wake {
            at: at(since + 3600),
            cause: Cause::Housekeeping,
        },
    }
}

fn awake(cause: Cause) -> Verdict {
    Verdict::Awake { cause, until: None }
}

#[test]
fn sleeping_keeps_what_its_controller_showed_awake_and_says_until_when() {
    let objects = rendered();
    let policy = Policy::default();
    let up = deployment(Some(1), 1);
    let idle = awake(Cause::Idle(at(0)));
    let seen = |health, verdict, t| Observation {
        sleep: Some((verdict, &policy)),
        ..observe(Ok(&objects), &[], health, at(t))
    };
    let (ready, _) = compute(None, &seen(up.as_ref(), &idle, 0));
    assert_eq!(ready.phase, Phase::Ready);
    let c = condition(&ready, "Asleep");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "Awake"),
        "{c:?}"
    );
    assert!(c.message.contains("900s"), "{}", c.message);

    let down = scaled_down();
    let slept = asleep(1000);
    let (sleeping, recheck) = compute(Some(&ready), &seen(down.as_ref(), &slept, 1000));
    assert_eq!((sleeping.phase, recheck), (Phase::Sleeping, None));
    assert_eq!(sleeping.ready, "0/0");
    assert_eq!(
        condition(&sleeping, "Available"),
        condition(&ready, "Available"),
        "a controller scaled to zero is not proven again, nor unavailable"
    );
    let c = condition(&sleeping, "Asleep");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Idle"));
    assert_eq!(c.last_transition_time, at(1000).to_string());
    assert!(
        c.message.contains(&at(4600).to_string()) && c.message.contains("housekeeping"),
        "{}",
        c.message
    );
    assert!(
        sleeping
            .message
            .starts_with(&format!("asleep since {}", at(1000))),
        "{}",
        sleeping.message
    );
    let (again, _) = compute(Some(&sleeping), &seen(down.as_ref(), &slept, 2000));
    assert_eq!(again, sleeping, "nothing new while it sleeps: no write");

    let woken = awake(Cause::Workflows(1));
    let rolling = deployment(Some(1), 0);
    let (waking, _) = compute(Some(&sleeping), &seen(rolling.as_ref(), &woken, 2100));
    assert_eq!(waking.phase, Phase::Progressing);
    let c = condition(&waking, "Asleep");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
        ("False", "Workflows", "woke for a Workflow to run")
    );
    assert_eq!(condition(&waking, "Available").status, "False");
    // What woke it stands while it works, whatever it works on next.
    let busier = awake(Cause::Workflows(3));
    let (working, _) = compute(Some(&waking), &seen(up.as_ref(), &busier, 2110));
    assert_eq!(condition(&working, "Asleep"), condition(&waking, "Asleep"));
    assert_eq!(working.phase, Phase::Ready);
}

#[test]
fn what_keeps_a_controller_awake_is_said_as_it_goes() {
    let objects = rendered();
    let policy = Policy::default();
    let up = deployment(Some(1), 1);
    let seen = |verdict, t| Observation {
        sleep: Some((verdict, &policy)),
        ..observe(Ok(&objects), &[], up.as_ref(), at(t))
    };
    let out = awake(Cause::OptedOut);
    let (opted_out, _) = compute(None, &seen(&out, 0));
    let c = condition(&opted_out, "Asleep");
    assert_eq!(c.reason, "OptedOut");
    assert!(c.message.contains("override.flotilla.dev/sleep=false"));
    let unseen = awake(Cause::Unseen("flotilla cannot list Workflows: 403".into()));
    let (blind, _) = compute(Some(&opted_out), &seen(&unseen, 10));
    let c = condition(&blind, "Asleep");
    assert_eq!(c.reason, "Unseen");
    assert_eq!(c.last_transition_time, at(0).to_string());
    // Back in sight: it says so, rather than keeping the old reason.
    let idle = awake(Cause::Idle(at(0)));
    let (back, _) = compute(Some(&blind), &seen(&idle, 20));
    assert_eq!(condition(&back, "Asleep").reason, "Awake");
}

#[test]
fn a_failure_outranks_sleep_and_a_failed_render_keeps_the_condition() {
    let objects = rendered();
    let policy = Policy::default();
    let down = scaled_down();
    let slept = asleep(0);
    let seen = Observation {
        sleep: Some((&slept, &policy)),
        ..observe(Ok(&objects), &[], down.as_ref(), at(0))
    };
    let (sleeping, _) = compute(None, &seen);
    let refused = Observation {
        refused: Some("403: forbidden"),
        server_error: false,
        revision_unavailable: false,
        ..seen
    };
    let (failed, _) = compute(Some(&sleeping), &refused);
    assert_eq!(failed.phase, Phase::ApplyFailed);
    let broken = observe(Err("bad template".into()), &[], None, at(10));
    let (render_failed, _) = compute(Some(&sleeping), &broken);
    assert_eq!(render_failed.phase, Phase::RenderFailed);
    assert_eq!(
        condition(&render_failed, "Asleep"),
        condition(&sleeping, "Asleep")
    );
    // Sleep off in the config: no condition.
    let (off, _) = compute(Some(&sleeping), &observe(Ok(&objects), &[], None, at(20)));
    assert!(off.conditions.iter().all(|c| c.type_ != "Asleep"));
}

#[test]
fn since_when_asleep_and_when_proven() {
    let status = |conditions: Vec<Condition>, revision_since: &str| WorkerStatus {
        conditions,
        revision_since: revision_since.into(),
        ..WorkerStatus::default()
    };
    let c = |type_: &str, status: &str, t: i64| Condition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: at(t).to_string(),
        ..Condition::default()
    };
    let soak = Duration::from_secs(60);
    let asleep = status(vec![c("Asleep", "True", 50)], "");
    assert_eq!(asleep_since(Some(&asleep)), Some(at(50)));
    assert_eq!(
        asleep_since(Some(&status(vec![c("Asleep", "False", 50)], ""))),
        None
    );
    assert_eq!(asleep_since(None), None);
    let cases = [
        (
            status(vec![c("Available", "True", 100)], &at(10).to_string()),
            Some(at(160)),
        ),
        (
            status(vec![c("Available", "True", 100)], &at(130).to_string()),
            Some(at(190)),
        ),
        (
            status(vec![c("Available", "False", 100)], &at(10).to_string()),
            None,
        ),
        (status(vec![], &at(10).to_string()), None),
    ];
    for (status, want) in cases {
        assert_eq!(proven_at(Some(&status), soak), want, "{status:?}");
    }
}
