use super::*;
use crate::rollout::{Amount, OnFailure};

/// Parses `text` as `<tmp>/flotilla.yaml`, next to a templates directory; errors as they
/// are printed, with `<tmp>` for the directory.
fn parse(text: &str) -> Result<Config, String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    Config::parse(text, &dir.path().join("flotilla.yaml")).map_err(|e| {
        let tmp = dir.path().display().to_string();
        e.to_string().replace(&tmp, "<tmp>")
    })
}

#[test]
fn defaults_apply_to_an_empty_file() {
    let config = parse("").unwrap();
    assert_eq!(config.selector_text, "flotilla.dev/enabled=true");
    assert_eq!(config.namespace, "flotilla-system");
    assert_eq!(config.instance, "flotilla");
    assert_eq!(config.concurrency, 16);
    assert_eq!((config.api_qps, config.api_burst), (0, 200));
    assert!(config.templates_dir.ends_with("templates"));
    assert_eq!(
        config.policy.allow_service_types,
        [ServiceType::ClusterIP],
        "ClusterIP Services only"
    );
    assert!(config.policy.allow_namespaces.is_empty());
}

#[test]
fn rollout_defaults_are_safe_and_each_setting_is_read() {
    let config = parse("").unwrap();
    let defaults = &config.rollout;
    assert_eq!(defaults.max_unavailable, Amount::Percent(10));
    assert_eq!(defaults.max_failures, Amount::Count(0));
    assert_eq!(defaults.on_failure, OnFailure::Pause);
    assert_eq!(defaults.soak.as_secs(), 60);
    assert_eq!(defaults.history_limit, 10);
    assert_eq!(
        (defaults.reap_brake.share, defaults.reap_brake.at_least),
        (Amount::Percent(10), 5)
    );
    assert_eq!(defaults.reap_brake.window.as_secs(), 600);
    let config = parse(
        "rollout:\n  canary: tier=canary\n  maxUnavailable: 5\n  soakSeconds: 2\n  progressDeadlineSeconds: 30\n  maxFailures: 10%\n  onFailure: Rollback\n  revisionHistoryLimit: 3\n  reapBrake:\n    share: 25%\n    atLeast: 2\n    windowSeconds: 60\n",
    )
    .unwrap();
    let r = &config.rollout;
    assert!(r.canary.is_some());
    assert_eq!(r.max_unavailable, Amount::Count(5));
    assert_eq!((r.soak.as_secs(), r.progress_deadline.as_secs()), (2, 30));
    assert_eq!(r.max_failures, Amount::Percent(10));
    assert_eq!(r.on_failure, OnFailure::Rollback);
    assert_eq!(r.history_limit, 3);
    assert_eq!(
        (
            r.reap_brake.share,
            r.reap_brake.at_least,
            r.reap_brake.window.as_secs()
        ),
        (Amount::Percent(25), 2, 60)
    );
    let none = parse("rollout:\n  reapBrake:\n    windowSeconds: 0\n").unwrap_err();
    assert!(
        none.to_string()
            .contains("rollout.reapBrake.windowSeconds: must be at least 1"),
        "{none}"
    );
    assert_eq!(
        parse("rollout:\n  maxUnavailable: \"100%\"\n")
            .unwrap()
            .rollout
            .max_unavailable,
        Amount::Percent(100)
    );
}

#[test]
fn policy_allows_what_it_names() {
    let config = parse(
        "policy:\n  allowServiceTypes: [ClusterIP, LoadBalancer]\n  allowNamespaces: [kube-system]\n",
    )
    .unwrap();
    assert_eq!(
        config.policy.allow_service_types,
        [ServiceType::ClusterIP, ServiceType::LoadBalancer]
    );
    assert_eq!(config.policy.allow_namespaces, ["kube-system"]);
}

#[test]
fn values_are_kept_as_written() {
    let config = parse("values:\n  image: x:v1\n  replicas: 2\n").unwrap();
    assert_eq!(config.values["image"], "x:v1");
    assert_eq!(config.values["replicas"], 2);
}

#[test]
fn refused_values_are_named_by_file_line_and_key() {
    let label = "must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric";
    for (text, message) in [
        (
            "# who opts in\nselector: 'env in (a'\n",
            "line 2: selector: invalid label selector \"env in (a\": unbalanced '('".to_string(),
        ),
        (
            "instance: 'a b'\n",
            format!("line 1: instance: label value \"a b\": {label}"),
        ),
        ("instance: ''\n", "line 1: instance: must not be empty".into()),
        (
            "namespace: Bad_NS\n",
            "line 1: namespace: \"Bad_NS\" is not a valid namespace name (lowercase alphanumerics and '-', at most 63)".into(),
        ),
        (
            "fieldManager: ''\n",
            "line 1: fieldManager: must be 1-128 characters".into(),
        ),
        ("concurrency: 0\n", "line 1: concurrency: must be at least 1".into()),
        ("apiBurst: 0\n", "line 1: apiBurst: must be at least 1".into()),
        ("apiBurst: 0\n", "line 1: apiBurst: must be at least 1".into()),
        ("\n\nresyncSeconds: 0\n", "line 3: resyncSeconds: must be at least 1".into()),
        (
            "rollout:\n  soakSeconds: 5\n  maxUnavailable: 10 percent\n",
            "line 3: rollout.maxUnavailable: \"10 percent\" is neither a count (5) nor a share of the fleet from 0% to 100% (\"25%\")".into(),
        ),
        (
            "rollout:\n  maxFailures: 200%\n",
            "line 2: rollout.maxFailures: \"200%\" is neither a count (5) nor a share of the fleet from 0% to 100% (\"25%\")".into(),
        ),
        (
            "rollout:\n  revisionHistoryLimit: 0\n",
            "line 2: rollout.revisionHistoryLimit: must be at least 1".into(),
        ),
        (
            "leaderElection:\n  leaseDurationSeconds: 2\n",
            "line 2: leaderElection.leaseDurationSeconds: must be at least 3".into(),
        ),
        (
            "templates: nowhere\n",
            "line 1: templates: <tmp>/nowhere is not a directory".into(),
        ),
        (
            "values: {image: x}\noverrides:\n  registry: {type: string}\n",
            "line 3: overrides.registry: there is no values.registry to override".into(),
        ),
        (
            "policy:\n  allowNamespaces: [kube-public, team-a]\n",
            "line 2: policy.allowNamespaces: \"team-a\" is not a reserved namespace (kube-system, kube-public, kube-node-lease): a namespace the selector matches is a target already".into(),
        ),
        (
            "namespace: ops\npolicy:\n  allowNamespaces:\n    - ops\n",
            "line 3: policy.allowNamespaces: \"ops\" is flotilla's own namespace, which holds its credentials: it is never a target".into(),
        ),
        (
            "values: {n: 1}\noverrides:\n  n:\n    type: integer\n    pattern: x\n",
            "line 3: overrides.n: pattern and enum apply to type string only".into(),
        ),
        (
            "values: {image: x}\noverrides:\n  image:\n    type: string\n    pattern: '('\n",
            "line 5: overrides.image.pattern: regex parse error:\n    ^(?:()$\n     ^\nerror: unclosed group".into(),
        ),
    ] {
        assert_eq!(parse(text).unwrap_err(), format!("<tmp>/flotilla.yaml: {message}"));
    }
}

#[test]
fn a_key_the_file_does_not_set_is_named_without_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let err = Config::parse("selector: a=b\n", &dir.path().join("flotilla.yaml")).unwrap_err();
    let ConfigError::Invalid { key, line, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!((key.as_str(), *line), ("templates", None));
    assert!(
        err.to_string().ends_with("templates is not a directory"),
        "{err}"
    );
}

#[test]
fn yaml_errors_name_line_column_and_key_then_show_the_spot() {
    for (text, first_line) in [
        (
            "selector: a=b\nconcurrency: many\n",
            "line 2 column 14: concurrency: invalid u16",
        ),
        (
            "selector: a=b\nresyncSeconds:\n  - 1\n",
            "line 3 column 3: resyncSeconds: expected string scalar",
        ),
        (
            "selector: a=b\nvalues:\n  x: [1, 2\n",
            "line 3 column 6: x: unclosed bracket '['",
        ),
        (
            "selector: a=b\nselector: c=d\n",
            "line 2 column 1: selector: duplicate mapping key: selector, set DuplicateKeyPolicy in Options if acceptable",
        ),
        // The parser names an unknown key itself.
        (
            "selectr: a=b\n",
            "line 1 column 1: unknown field `selectr`, expected one of selector, templates, namespace, instance, fieldManager, concurrency, apiQps, apiBurst, resyncSeconds, degradedAfterSeconds, values, overrides, leaderElection, policy, rollout, sleep, fleetParallelism",
        ),
        (
            "values: {n: 1}\noverrides:\n  n: {type: float}\n",
            "line 3 column 13: n: unknown variant `float`, expected one of string, integer, boolean, number, quantity",
        ),
        (
            "policy:\n  allowServiceTypes: [ClusterIp]\n",
            "line 2 column 23: allowServiceTypes: unknown variant `ClusterIp`, expected one of ClusterIP, NodePort, LoadBalancer, ExternalName",
        ),
    ] {
        let err = parse(text).unwrap_err();
        let (first, spot) = err.split_once('\n').expect(&err);
        assert_eq!(first, format!("<tmp>/flotilla.yaml: {first_line}"));
        assert!(spot.starts_with(" --> <input>:"), "{err}");
    }
}
