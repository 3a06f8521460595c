//! The metrics monitoring/'s alerts and dashboard query, read from their PromQL with a PromQL
//! parser, and the metrics a `/metrics` text serves. Shared by the unit test against the
//! registry's own text and the e2e test against a live scrape (e2e/tests/monitoring.rs).

use promql_parser::parser::{self, Expr};
use std::collections::{BTreeMap, BTreeSet};

pub const ALERTS: &str = include_str!("../../monitoring/alerts.yaml");
pub const DASHBOARD: &str = include_str!("../../monitoring/dashboard.json");

/// Grafana's variables as a query sees them once Grafana has put them in.
const GRAFANA_VARIABLES: [(&str, &str); 2] = [("$__rate_interval", "5m"), ("$namespace", ".*")];

/// Every metric name queried, with where (an alert's or a panel's name) for the failure message.
pub fn queried() -> BTreeMap<String, BTreeSet<String>> {
    let mut found = BTreeMap::new();
    let alerts: serde_json::Value =
        serde_saphyr::from_str(ALERTS).expect("monitoring/alerts.yaml is YAML");
    for rule in alerts["groups"]
        .as_array()
        .expect("monitoring/alerts.yaml has groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
    {
        let name = format!("alert {}", rule["alert"].as_str().unwrap_or("?"));
        let expr = rule["expr"].as_str().expect("every rule has an expr");
        add(&mut found, &name, expr);
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(DASHBOARD).expect("monitoring/dashboard.json is JSON");
    let panels = dashboard["panels"]
        .as_array()
        .expect("the dashboard has panels");
    for panel in panels {
        let name = format!("panel {}", panel["title"].as_str().unwrap_or("?"));
        for target in panel["targets"].as_array().into_iter().flatten() {
            let mut expr = target["expr"]
                .as_str()
                .expect("a target has an expr")
                .to_string();
            for (variable, value) in GRAFANA_VARIABLES {
                expr = expr.replace(variable, value);
            }
            add(&mut found, &name, &expr);
        }
    }
    // The variables' own queries, `label_values(metric, label)`.
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(query) = variable["query"]["query"].as_str() {
            let metric = query
                .strip_prefix("label_values(")
                .and_then(|rest| rest.split(',').next())
                .unwrap_or_else(|| panic!("unexpected variable query {query}"));
            let name = format!("variable {}", variable["name"].as_str().unwrap_or("?"));
            found
                .entry(metric.trim().to_string())
                .or_insert_with(BTreeSet::new)
                .insert(name);
        }
    }
    found
}

fn add(found: &mut BTreeMap<String, BTreeSet<String>>, place: &str, expr: &str) {
    let parsed = parser::parse(expr).unwrap_or_else(|e| panic!("{place}: {expr}: {e}"));
    let mut names = BTreeSet::new();
    metric_names(&parsed, &mut names);
    assert!(!names.is_empty(), "{place} queries no metric: {expr}");
    for name in names {
        found.entry(name).or_default().insert(place.to_string());
    }
}

fn metric_names(expr: &Expr, names: &mut BTreeSet<String>) {
    match expr {
        Expr::Aggregate(e) => {
            metric_names(&e.expr, names);
            if let Some(param) = &e.param {
                metric_names(param, names);
            }
        }
        Expr::Unary(e) => metric_names(&e.expr, names),
        Expr::Binary(e) => {
            metric_names(&e.lhs, names);
            metric_names(&e.rhs, names);
        }
        Expr::Paren(e) => metric_names(&e.expr, names),
        Expr::Subquery(e) => metric_names(&e.expr, names),
        Expr::VectorSelector(vs) => names.extend(vs.name.clone()),
        Expr::MatrixSelector(ms) => names.extend(ms.vs.name.clone()),
        Expr::Call(call) => call.args.args.iter().for_each(|a| metric_names(a, names)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The sample names a `/metrics` text (OpenMetrics, as prometheus-client writes it) serves,
/// from its `# TYPE` lines, so that a family with no sample yet (a counter before its first
/// increment) counts too: `name_total` for a counter, `name_bucket`, `name_sum` and
/// `name_count` for a histogram, `name` for the rest.
pub fn served(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(declared) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut words = declared.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// The queried metrics `text` does not serve, each with where it is queried.
pub fn missing(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let served = served(text);
    queried()
        .into_iter()
        .filter(|(name, _)| !served.contains(name))
        .collect()
}
