//! Every metric monitoring/'s alerts and dashboard query is one a running flotilla's /metrics
//! really serves: a live scrape of a leader that has stamped one namespace and been refused by
//! another (a quota: ApplyFailed, and a failed request counted), so that every family has shown
//! its first sample.

use crate::failures::forbid_config_maps;
use crate::harness::*;
use crate::queries;

#[tokio::test]
async fn every_metric_the_alerts_and_the_dashboard_query_is_served() {
    let client = admin().await;
    let fleet = Fleet::new("metrics");
    forget_revisions(&client, &fleet.instance).await;
    fleet.namespace(&client, "metrics-a", true).await;
    fleet.namespace(&client, "metrics-b", false).await;
    forbid_config_maps(&client, "metrics-b").await;
    fleet.set_opt_in(&client, "metrics-b", Some("on")).await;
    let flotilla = fleet.start();
    fleet.wait_stamped(&client, "metrics-a").await;
    let text = eventually("the leader to count an ApplyFailed namespace", || async {
        let text = flotilla.metrics().await;
        let failed = sample_sum(&text, "flotilla_namespaces{phase=\"ApplyFailed\"}");
        (failed == Some(1.0)).then_some(text)
    })
    .await;
    assert_eq!(sample_sum(&text, "flotilla_is_leader"), Some(1.0));
    let missing = queries::missing(&text);
    assert!(
        missing.is_empty(),
        "queried by monitoring/ but not served: {missing:?}\n{text}"
    );
    flotilla.stop();
    delete_namespaces(&client, &["metrics-a", "metrics-b"]).await;
}
