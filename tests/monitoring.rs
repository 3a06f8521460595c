//! monitoring/: the alerts pass `promtool check rules` and their cases `promtool test rules`
//! (promtool from e2e/tools.sh), every alert has a case that fires and one that stays silent,
//! and a runbook in docs/operations.md. That they query only what /metrics serves is a unit
//! test (src/telemetry/tests.rs) and an e2e one against a live scrape.

mod tools;

use serde_json::Value;
use std::collections::BTreeSet;
use tools::{repo, run};

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn alerts() -> Vec<Value> {
    yaml("monitoring/alerts.yaml")["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[test]
fn promtool_checks_the_rules_and_passes_their_tests() {
    let checked = run("promtool", &["check", "rules", "monitoring/alerts.yaml"]);
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", alerts().len())),
        "{checked}"
    );
    let tested = run(
        "promtool",
        &["test", "rules", "monitoring/alerts.test.yaml"],
    );
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn every_alert_has_a_case_that_fires_and_one_that_stays_silent() {
    let tests = yaml("monitoring/alerts.test.yaml");
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for case in tests["tests"].as_array().unwrap() {
        for check in case["alert_rule_test"].as_array().into_iter().flatten() {
            let name = check["alertname"].as_str().unwrap().to_string();
            let expected = check["exp_alerts"].as_array().map_or(0, Vec::len);
            if expected > 0 {
                &mut fires
            } else {
                &mut silent
            }
            .insert(name);
        }
    }
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        assert!(fires.contains(name), "no case in which {name} fires");
        assert!(
            silent.contains(name),
            "no case in which {name} stays silent"
        );
    }
}

#[test]
fn every_alert_links_its_runbook_in_docs_operations() {
    let doc = std::fs::read_to_string(repo().join("docs/operations.md")).unwrap();
    // GitHub's anchors: a heading lowercased.
    let anchors: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        let url = alert["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let anchor = url
            .strip_prefix("docs/operations.md#")
            .unwrap_or_else(|| panic!("{name}'s runbook_url is not in docs/operations.md: {url}"));
        assert_eq!(anchor, name.to_lowercase(), "{name}'s runbook_url");
        assert!(
            anchors.contains(anchor),
            "docs/operations.md has no ### {name}"
        );
    }
}

#[test]
fn the_dashboard_queries_prometheus_through_its_datasource_variable() {
    let text = std::fs::read_to_string(repo().join("monitoring/dashboard.json")).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let ids: BTreeSet<_> = panels.iter().map(|p| p["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids are unique");
    for panel in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(
            panel["datasource"]["uid"], "${datasource}",
            "{}",
            panel["title"]
        );
        assert!(panel["targets"].as_array().is_some_and(|t| !t.is_empty()));
    }
}
