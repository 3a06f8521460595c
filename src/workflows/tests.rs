use super::*;
use std::collections::BTreeMap;

fn workflow(namespace: &str, uid: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(format!("wf-{uid}")),
        namespace: Some(namespace.into()),
        uid: Some(uid.into()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

fn labelled(namespace: &str, uid: &str, id: &str) -> ObjectMeta {
    workflow(namespace, uid, &[(INSTANCE_ID_LABEL, id)])
}

fn counts(pairs: &[(Option<&str>, u32)]) -> Counts {
    Counts {
        by_label: pairs
            .iter()
            .map(|(l, n)| (l.map(str::to_string), *n))
            .collect(),
    }
}

#[test]
fn a_controller_ignores_what_does_not_carry_its_id() {
    let seen = counts(&[(None, 2), (Some("team-a"), 3), (Some("other"), 1)]);
    let cases = [
        (Some("team-a"), 3),
        (Some("other"), 5),
        (Some("nobody"), 6),
        // Without an instanceID only unlabelled Workflows are taken.
        (None, 4),
    ];
    for (instance_id, ignored) in cases {
        assert_eq!(seen.ignored(instance_id), ignored, "{instance_id:?}");
    }
    assert_eq!(Counts::default().ignored(Some("team-a")), 0);
    let taken = [(Some("team-a"), 3), (Some("other"), 1), (None, 2)];
    for (instance_id, n) in taken {
        assert_eq!(seen.taken(instance_id), n, "{instance_id:?}");
    }
}

#[test]
fn each_change_reports_its_namespace_only_when_counts_change() {
    let mut tally = Tally::default();
    assert_eq!(tally.apply(&workflow("a", "1", &[])), Some("a".to_string()));
    // A status update: same label, nothing to tell.
    assert_eq!(tally.apply(&workflow("a", "1", &[])), None);
    assert_eq!(tally.counts("a"), counts(&[(None, 1)]));
    // The fix: the label added moves it to the other count.
    assert_eq!(tally.apply(&labelled("a", "1", "a")), Some("a".into()));
    assert_eq!(tally.counts("a"), counts(&[(Some("a"), 1)]));
    assert_eq!(tally.apply(&labelled("b", "2", "x")), Some("b".into()));
    assert_eq!(tally.counts("a"), counts(&[(Some("a"), 1)]));
    // Completed: no longer counted, as if gone.
    let done = workflow(
        "a",
        "1",
        &[(INSTANCE_ID_LABEL, "a"), (COMPLETED_LABEL, "true")],
    );
    assert_eq!(tally.apply(&done), Some("a".into()));
    assert_eq!(tally.counts("a"), Counts::default());
    assert_eq!(tally.delete(&done), None);
    assert_eq!(tally.delete(&labelled("b", "2", "x")), Some("b".into()));
    assert_eq!(tally.live(), 0);
    // Nothing is kept for a namespace without live Workflows.
    assert!(tally.namespaces.is_empty());
}

#[test]
fn many_workflows_share_their_label_counts() {
    let mut tally = Tally::default();
    for i in 0..100 {
        let meta = if i % 10 == 0 {
            workflow("a", &i.to_string(), &[])
        } else {
            labelled("a", &i.to_string(), "a")
        };
        tally.apply(&meta);
    }
    assert_eq!(tally.counts("a").ignored(Some("a")), 10);
    assert_eq!(tally.counts("a").ignored(None), 90);
    assert_eq!(tally.ignored("a", Some("a")), 10);
    assert_eq!(tally.ignored("a", None), 90);
    assert_eq!(tally.ignored("b", None), 0);
    assert_eq!(tally.live(), 100);
}

#[test]
fn a_relist_replaces_the_counts_and_names_what_changed() {
    let mut tally = Tally::default();
    tally.apply(&workflow("a", "1", &[]));
    tally.apply(&labelled("b", "2", "b"));
    tally.apply(&labelled("c", "3", "c"));
    tally.relist_started();
    // Until the list is complete, the old counts answer.
    tally.relisted(&labelled("a", "1", "a"));
    assert_eq!(tally.counts("a"), counts(&[(None, 1)]));
    tally.relisted(&labelled("b", "2", "b"));
    tally.relisted(&workflow("d", "4", &[]));
    // `c` was deleted while the watch was down, `a` labelled, `d` created.
    assert_eq!(tally.relist_done(), vec!["a", "c", "d"]);
    assert_eq!(tally.counts("a"), counts(&[(Some("a"), 1)]));
    assert_eq!(tally.counts("c"), Counts::default());
    assert_eq!(tally.counts("d"), counts(&[(None, 1)]));
    assert_eq!(tally.relist_done(), Vec::<String>::new());
}

#[test]
fn a_workflow_without_namespace_or_identity_is_left_out() {
    let mut tally = Tally::default();
    let mut meta = workflow("a", "1", &[]);
    meta.namespace = None;
    assert_eq!(tally.apply(&meta), None);
    let mut meta = workflow("a", "1", &[]);
    (meta.uid, meta.name) = (None, None);
    assert_eq!(tally.apply(&meta), None);
    assert_eq!(tally.live(), 0);
}

#[test]
fn running_workflows_are_counted_by_the_controller_that_runs_them_and_tell_no_news() {
    let mut tally = Tally::default();
    let phase = |uid: &str, id: &str, phase: &str| {
        workflow("a", uid, &[(INSTANCE_ID_LABEL, id), (PHASE_LABEL, phase)])
    };
    assert_eq!(tally.apply(&labelled("a", "1", "a")), Some("a".into()));
    assert_eq!(tally.running("a", Some("a")), 0);
    // Running is no news for the namespace's status: only the budget reads it.
    assert_eq!(tally.apply(&phase("1", "a", "Running")), None);
    tally.apply(&phase("2", "a", "Pending"));
    tally.apply(&phase("3", "other", "Running"));
    assert_eq!(
        (
            tally.running("a", Some("a")),
            tally.running("a", Some("other"))
        ),
        (1, 1)
    );
    let done = workflow(
        "a",
        "1",
        &[
            (INSTANCE_ID_LABEL, "a"),
            (PHASE_LABEL, "Succeeded"),
            (COMPLETED_LABEL, "true"),
        ],
    );
    tally.apply(&done);
    assert_eq!(tally.running("a", Some("a")), 0);
    tally.relist_started();
    tally.relisted(&phase("2", "a", "Running"));
    tally.relist_done();
    assert_eq!(tally.running("a", Some("a")), 1);
    assert_eq!(tally.active().collect::<Vec<_>>(), vec!["a"]);
}
