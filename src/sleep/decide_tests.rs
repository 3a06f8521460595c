use super::*;

const NOW: &str = "2026-12-04T12:00:00Z";

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn policy() -> Policy {
    Policy {
        after: Duration::from_secs(900),
        wake_ahead: Duration::from_secs(30),
        housekeeping: Duration::from_secs(3600),
    }
}

/// CronWorkflow `nightly` on `schedule`, for a case's closure to hold.
fn cron(schedule: &str) -> &'static [CronEntry] {
    Box::leak(Box::new([CronEntry {
        name: "nightly".into(),
        schedules: vec![schedule.into()],
        timezone: String::new(),
    }]))
}

/// An awake controller idle for an hour, proven long ago, with nothing scheduled: it sleeps.
fn idle<'a>(policy: &'a Policy, crons: &'a [CronEntry]) -> Inputs<'a> {
    Inputs {
        policy,
        opt_out: None,
        asleep_since: None,
        running: Ok(0),
        idle_since: at("2026-12-04T11:00:00Z"),
        crons: Ok(crons),
        changed: false,
        proven_at: Some(at("2026-12-04T10:00:00Z")),
        now: at(NOW),
    }
}

fn awake(cause: Cause, until: Option<&str>) -> Verdict {
    Verdict::Awake {
        cause,
        until: until.map(at),
    }
}

fn asleep(since: &str, wake: &str, cause: Cause) -> Verdict {
    Verdict::Asleep {
        since: at(since),
        wake: Wake {
            at: at(wake),
            cause,
        },
    }
}

#[test]
fn when_an_awake_controller_sleeps() {
    let policy = policy();
    let none: [CronEntry; 0] = [];
    let soon = cron("10 12 * * *");
    let later = cron("0 13 * * *");
    let every = cron("@every 5m");
    type Case<'a> = (&'a str, Box<dyn Fn(&mut Inputs<'a>)>, Verdict);
    let cases: Vec<Case> = vec![
        (
            "idle past afterSeconds, proven, nothing due: asleep until housekeeping",
            Box::new(|_| {}),
            asleep(NOW, "2026-12-04T13:00:00Z", Cause::Housekeeping),
        ),
        (
            "a live Workflow",
            Box::new(|i| i.running = Ok(2)),
            awake(Cause::Workflows(2), None),
        ),
        (
            "Workflows not seen",
            Box::new(|i| i.running = Err("the Workflows are not listed yet".into())),
            awake(Cause::Unseen("the Workflows are not listed yet".into()), None),
        ),
        (
            "idle for less than afterSeconds: until then",
            Box::new(|i| i.idle_since = at("2026-12-04T11:50:00Z")),
            awake(
                Cause::Idle(at("2026-12-04T11:50:00Z")),
                Some("2026-12-04T12:05:00Z"),
            ),
        ),
        (
            "something to apply",
            Box::new(|i| i.changed = true),
            awake(Cause::Change, None),
        ),
        (
            "not available: not proven",
            Box::new(|i| i.proven_at = None),
            awake(Cause::Proving, None),
        ),
        (
            "soaking: until proven",
            Box::new(|i| i.proven_at = Some(at("2026-12-04T12:01:00Z"))),
            awake(Cause::Proving, Some("2026-12-04T12:01:00Z")),
        ),
        (
            "opted out",
            Box::new(|i| i.opt_out = Some("false")),
            awake(Cause::OptedOut, None),
        ),
        (
            "an opt-out value that means nothing",
            Box::new(|i| i.opt_out = Some("no")),
            awake(Cause::UnknownOptOut("no".into()), None),
        ),
        (
            "opted in explicitly",
            Box::new(|i| i.opt_out = Some(" true ")),
            asleep(NOW, "2026-12-04T13:00:00Z", Cause::Housekeeping),
        ),
        (
            "a run within afterSeconds: awake through it",
            Box::new(move |i| i.crons = Ok(soon)),
            awake(
                Cause::CronWorkflow {
                    name: "nightly".into(),
                    at: at("2026-12-04T12:10:00Z"),
                },
                Some("2026-12-04T12:10:30Z"),
            ),
        ),
        (
            "a run later: asleep until wakeAheadSeconds before it",
            Box::new(move |i| i.crons = Ok(later)),
            asleep(
                NOW,
                "2026-12-04T12:59:30Z",
                Cause::CronWorkflow {
                    name: "nightly".into(),
                    at: at("2026-12-04T13:00:00Z"),
                },
            ),
        ),
        (
            "a schedule that cannot be foreseen",
            Box::new(move |i| i.crons = Ok(every)),
            awake(
                Cause::Unseen(
                    "CronWorkflow nightly's schedule \"@every 5m\": @every counts from its controller's start, which sleeping would move".into(),
                ),
                None,
            ),
        ),
        (
            "CronWorkflows not seen",
            Box::new(|i| i.crons = Err("cannot list CronWorkflows: forbidden".into())),
            awake(
                Cause::Unseen("cannot list CronWorkflows: forbidden".into()),
                None,
            ),
        ),
    ];
    for (name, change, want) in cases {
        let mut inputs = idle(&policy, &none);
        change(&mut inputs);
        assert_eq!(decide(&inputs), want, "{name}");
    }
}

#[test]
fn when_a_sleeping_controller_wakes() {
    let policy = policy();
    let none: [CronEntry; 0] = [];
    let due = cron("0 12 * * *");
    let just_run = cron("59 11 * * *");
    let ahead = cron("0 12 * * *");
    let since = "2026-12-04T11:30:00Z";
    type Case<'a> = (&'a str, Box<dyn Fn(&mut Inputs<'a>)>, Verdict);
    let cases: Vec<Case> = vec![
        (
            "nothing to do: stays asleep, whatever the idle time and proof say",
            Box::new(|i| {
                i.idle_since = at(NOW);
                i.proven_at = None;
            }),
            asleep(since, "2026-12-04T12:30:00Z", Cause::Housekeeping),
        ),
        (
            "a Workflow",
            Box::new(|i| i.running = Ok(1)),
            awake(Cause::Workflows(1), None),
        ),
        (
            "a change to apply",
            Box::new(|i| i.changed = true),
            awake(Cause::Change, None),
        ),
        (
            "housekeeping is due",
            Box::new(|i| i.asleep_since = Some(at("2026-12-04T11:00:00Z"))),
            awake(Cause::Housekeeping, None),
        ),
        (
            "a run at the wake-ahead: wakes, awake until as long after it",
            Box::new(move |i| {
                i.crons = Ok(due);
                i.now = at("2026-12-04T11:59:30Z");
            }),
            awake(
                Cause::CronWorkflow {
                    name: "nightly".into(),
                    at: at("2026-12-04T12:00:00Z"),
                },
                Some("2026-12-04T12:00:30Z"),
            ),
        ),
        (
            "a run that was a few seconds ago still counts",
            Box::new(move |i| {
                i.crons = Ok(just_run);
                i.now = at("2026-12-04T11:59:10Z");
            }),
            awake(
                Cause::CronWorkflow {
                    name: "nightly".into(),
                    at: at("2026-12-04T11:59:00Z"),
                },
                Some("2026-12-04T11:59:30Z"),
            ),
        ),
        (
            "a run beyond the wake-ahead: asleep until then",
            Box::new(move |i| {
                i.crons = Ok(ahead);
                i.now = at("2026-12-04T11:59:00Z");
            }),
            asleep(
                since,
                "2026-12-04T11:59:30Z",
                Cause::CronWorkflow {
                    name: "nightly".into(),
                    at: at("2026-12-04T12:00:00Z"),
                },
            ),
        ),
        (
            "opted out while asleep",
            Box::new(|i| i.opt_out = Some("false")),
            awake(Cause::OptedOut, None),
        ),
    ];
    for (name, change, want) in cases {
        let mut inputs = idle(&policy, &none);
        inputs.asleep_since = Some(at(since));
        change(&mut inputs);
        assert_eq!(decide(&inputs), want, "{name}");
    }
}

#[test]
fn the_verdict_says_when_to_look_again() {
    let wake = Wake {
        at: at(NOW),
        cause: Cause::Housekeeping,
    };
    let asleep = Verdict::Asleep {
        since: at("2026-12-04T11:00:00Z"),
        wake,
    };
    assert_eq!(asleep.next_change(), Some(at(NOW)));
    assert!(asleep.asleep());
    let awake = awake(Cause::Workflows(1), None);
    assert_eq!(awake.next_change(), None);
    assert!(!awake.asleep());
}
