//! A turn of the budget over the watches as a fixture shows them: who is given what, who is
//! queued to be rendered with it.

use super::super::fixture::{CONFIG_MAP, drain, fixture, namespace};
use super::super::worker_view::WorkerView;
use super::super::workflow_watch::{WorkflowTally, Workflows};
use super::*;
use crate::controller::argo_watch::Kind;
use crate::status::{Phase, WorkerStatus, worker_object};
use kube::api::{DynamicObject, ObjectMeta, PartialObjectMeta};

const BUDGET_OF_4: &str = "fleetParallelism: 4\n";

fn worker(name: &str, phase: Phase, share: u32) -> WorkerView {
    let mut worker = worker_object(name, None, super::super::fixture::INSTANCE);
    worker.status = Some(WorkerStatus {
        phase,
        share: Some(share),
        ..WorkerStatus::default()
    });
    WorkerView::from(worker)
}

/// A Workflow in `namespace` for its controller (instanceID: the namespace), waiting to start.
fn workflow(namespace: &str, name: &str) -> PartialObjectMeta<DynamicObject> {
    let label = "workflows.argoproj.io/controller-instanceid";
    PartialObjectMeta {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            uid: Some(format!("{namespace}-{name}")),
            labels: Some([(label.to_string(), namespace.to_string())].into()),
            ..ObjectMeta::default()
        },
        types: None,
        _phantom: Default::default(),
    }
}

#[tokio::test]
async fn a_sleeping_namespace_holds_no_share_and_its_first_workflows_get_one() {
    let mut f = fixture(BUDGET_OF_4, &[("cm.yaml", CONFIG_MAP)], &[], vec![]);
    f.ctx.workflows = Workflows::listed(WorkflowTally::default());
    for name in ["asleep", "idle"] {
        f.shown.namespace(namespace(name, true, false));
    }
    // Both were given 2 while they ran; neither has a live Workflow now, a moment ago (an idle
    // namespace keeps its share a while: its next Workflow usually comes soon). One sleeps.
    f.shown.worker(worker("asleep", Phase::Sleeping, 2));
    f.shown.worker(worker("idle", Phase::Ready, 2));
    let queue = WorkQueue::start();
    turn(&f.ctx, &queue);
    assert_eq!(drain(&queue).await, ["asleep"]);
    assert_eq!(
        f.ctx.budget.share("asleep", Some(2)),
        FLOOR,
        "none held asleep"
    );
    assert_eq!(f.ctx.budget.share("idle", Some(2)), 2, "kept a while awake");

    // Three Workflows in the sleeping namespace (they wake it): they wait, so the idle one's
    // share goes back. What it frees is given once its controller has it: until its status
    // shows the floor applied, its controller may still start 2 at once.
    f.shown.worker(worker("asleep", Phase::Sleeping, FLOOR));
    for i in 0..3 {
        let name = format!("w{i}");
        f.ctx.workflows.tally.apply(&workflow("asleep", &name));
    }
    turn(&f.ctx, &queue);
    assert_eq!(drain(&queue).await, ["asleep", "idle"]);
    let shares = || ["asleep", "idle"].map(|name| f.ctx.budget.share(name, None));
    assert_eq!(shares(), [2, FLOOR]);
    let usage = f.ctx.budget.usage().expect("allocated");
    assert_eq!((usage.budget, usage.waiting, usage.held), (4, 3, 4));
    f.shown.worker(worker("idle", Phase::Ready, FLOOR));
    turn(&f.ctx, &queue);
    assert_eq!(drain(&queue).await, ["asleep"]);
    assert_eq!(
        shares(),
        [3, FLOOR],
        "the woken namespace given all it wants"
    );
    let usage = f.ctx.budget.usage().expect("allocated");
    assert_eq!((usage.waiting, usage.held), (3, 3));
}
