use super::*;
use serde_json::json;

fn values() -> Map<String, Value> {
    json!({
        "controllerImage": "quay.io/argoproj/workflow-controller:v4.1.2",
        "parallelism": 50,
        "debug": false,
        "rate": 0,
        "resources": {"limits": {"memory": "512Mi"}},
    })
    .as_object()
    .unwrap()
    .clone()
}

fn declared() -> Vec<Override> {
    let specs = json!({
        "controllerImage": {"type": "string", "pattern": r"quay\.io/argoproj/workflow-controller:v[0-9.]+(-rc[0-9]+)?"},
        "parallelism": {"type": "integer", "minimum": 1, "maximum": 500},
        "debug": {"type": "boolean"},
        "rate": {"type": "number", "minimum": 0.1, "maximum": 100},
        "resources.limits.memory": {"type": "quantity"},
    });
    specs
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, s)| {
            Override::new(k, serde_json::from_value(s.clone()).unwrap(), &values()).unwrap()
        })
        .collect()
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), v.to_string()))
        .collect()
}

#[test]
fn accepted_overrides_replace_only_their_value() {
    let result = apply(
        &values(),
        &declared(),
        &annotations(&[
            (
                "controllerImage",
                "quay.io/argoproj/workflow-controller:v4.1.3-rc1",
            ),
            ("parallelism", "200"),
            ("debug", "true"),
            ("rate", "2.5"),
            ("resources.limits.memory", "1Gi"),
        ]),
    )
    .unwrap();
    assert_eq!(
        result["controllerImage"],
        "quay.io/argoproj/workflow-controller:v4.1.3-rc1"
    );
    assert_eq!(result["parallelism"], 200);
    assert_eq!(result["debug"], true);
    assert_eq!(result["rate"], 2.5);
    assert_eq!(result["resources"]["limits"]["memory"], "1Gi");
    let mut unrelated = BTreeMap::new();
    unrelated.insert("example.com/other".to_string(), "x".to_string());
    assert_eq!(apply(&values(), &declared(), &unrelated).unwrap(), values());
    // Whether the namespace sleeps is flotilla's, not a value, whatever it says.
    let sleep = annotations(&[("sleep", "false")]);
    assert_eq!(apply(&values(), &declared(), &sleep).unwrap(), values());
}

/// Each refusal as it is reported: the annotation, then why.
fn refusals(errors: &[RefusedOverride]) -> Vec<String> {
    errors
        .iter()
        .map(|e| format!("{}: {}", e.annotation, e.error))
        .collect()
}

#[test]
fn rejected_overrides_name_the_annotation_and_the_problem() {
    let errors = apply(
        &values(),
        &declared(),
        &annotations(&[
            ("controllerImage", "evil.example/controller:latest"),
            ("parallelism", "lots"),
            ("debug", "yes"),
            ("resources.limits.memory", "a lot"),
            ("executorImage", "x"),
        ]),
    )
    .unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            r#"override.flotilla.dev/controllerImage: "evil.example/controller:latest" does not match the allowed pattern "quay\\.io/argoproj/workflow-controller:v[0-9.]+(-rc[0-9]+)?""#,
            r#"override.flotilla.dev/debug: "yes" is not true or false"#,
            r#"override.flotilla.dev/executorImage: "executorImage" is not overridable (the config allows: controllerImage, debug, parallelism, rate, resources.limits.memory)"#,
            r#"override.flotilla.dev/parallelism: "lots" is not an integer"#,
            r#"override.flotilla.dev/resources.limits.memory: "a lot" is not a Kubernetes quantity (like 500m or 1Gi)"#,
        ]
    );
}

#[test]
fn annotation_errors_read_as_documented() {
    let long = "q".repeat(101);
    for (error, message) in [
        (
            AnnotationError::NotOverridable {
                key: "x".into(),
                allowed: vec!["a".into(), "b.c".into()],
            },
            r#""x" is not overridable (the config allows: a, b.c)"#.to_string(),
        ),
        (
            AnnotationError::NotOverridable {
                key: "x".into(),
                allowed: vec![],
            },
            r#""x" is not overridable (the config allows: nothing)"#.into(),
        ),
        (
            AnnotationError::NoMatch {
                value: "v".into(),
                pattern: "a|b".into(),
            },
            r#""v" does not match the allowed pattern "a|b""#.into(),
        ),
        (
            AnnotationError::NotOneOf {
                value: "info\n- x".into(),
                allowed: vec!["debug".into(), "info".into()],
            },
            r#""info\n- x" is not one of ["debug", "info"]"#.into(),
        ),
        (
            AnnotationError::NotAnInteger("lots".into()),
            r#""lots" is not an integer"#.into(),
        ),
        (
            AnnotationError::BelowMinimum {
                value: 0.into(),
                minimum: 1.into(),
            },
            "0 is below the minimum 1".into(),
        ),
        (
            AnnotationError::AboveMaximum {
                value: 5000.into(),
                maximum: 500.into(),
            },
            "5000 is above the maximum 500".into(),
        ),
        (
            AnnotationError::BelowMinimum {
                value: Number::from_f64(0.05).unwrap(),
                minimum: Number::from_f64(0.1).unwrap(),
            },
            "0.05 is below the minimum 0.1".into(),
        ),
        (
            AnnotationError::NotANumber("1e3".into()),
            r#""1e3" is not a number (like 10 or 0.5)"#.into(),
        ),
        (
            AnnotationError::NotABoolean("yes".into()),
            r#""yes" is not true or false"#.into(),
        ),
        (
            AnnotationError::QuantityTooLarge("1e19".into()),
            r#""1e19" is above the largest Kubernetes quantity, 2^63-1"#.into(),
        ),
        (
            AnnotationError::RequestAboveLimit(Box::new(AboveLimit {
                request: "r.requests.cpu".into(),
                request_value: "2".into(),
                limit: "r.limits.cpu".into(),
                limit_value: "1".into(),
            })),
            r#"r.requests.cpu "2" is above its limit r.limits.cpu "1""#.into(),
        ),
        (
            AnnotationError::NotAQuantity(long.clone()),
            format!(
                "{:?}… (101 bytes) is not a Kubernetes quantity (like 500m or 1Gi)",
                &long[..100]
            ),
        ),
    ] {
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn only_the_declared_key_itself_is_overridable() {
    // Not a parent of a declared key (which would replace the whole map and its bounds), not
    // a child of one, not a lookalike, not a value that is not declared at all.
    for key in [
        "resources",
        "resources.limits",
        "resources.limits.memory.extra",
        "controllerimage",
        "controllerImage ",
        "workflowDefaults.spec.serviceAccountName",
    ] {
        let errors = apply(&values(), &declared(), &annotations(&[(key, "x")])).unwrap_err();
        assert_eq!(errors.len(), 1, "{key}: {errors:?}");
        assert!(
            matches!(errors[0].error, AnnotationError::NotOverridable { .. }),
            "{key}: {errors:?}"
        );
    }
    // With nothing declared, nothing is overridable, and the message says so.
    let errors = apply(&values(), &[], &annotations(&[("parallelism", "1")])).unwrap_err();
    assert_eq!(
        errors[0].error,
        AnnotationError::NotOverridable {
            key: "parallelism".into(),
            allowed: vec![]
        },
        "{errors:?}"
    );
}

#[test]
fn patterns_bind_the_whole_value() {
    for evil in [
        "evil.example/argoproj/workflow-controller:v4.1.2",
        "quay.io.evil.example/argoproj/workflow-controller:v4.1.2",
        "quay.io/argoproj/workflow-controller:v4.1.2@sha256:0000",
        "quay.io/argoproj/workflow-controller:v4.1.2\n",
        "quay.io/argoproj/workflow-controller:v4.1.2\nimage: evil/x",
        "x quay.io/argoproj/workflow-controller:v4.1.2",
        "quay.io/argoproj/workflow-controller:latest",
        "",
    ] {
        let errors = apply(
            &values(),
            &declared(),
            &annotations(&[("controllerImage", evil)]),
        )
        .expect_err(evil);
        assert!(
            matches!(errors[0].error, AnnotationError::NoMatch { .. }),
            "{evil:?}: {errors:?}"
        );
    }
}

#[test]
fn typed_values_refuse_near_misses() {
    for (key, raw, needle) in [
        ("parallelism", "5; rm -rf /", "not an integer"),
        ("parallelism", "1e3", "not an integer"),
        ("parallelism", "0", "below the minimum 1"),
        ("parallelism", "-1", "below the minimum 1"),
        ("parallelism", "99999999999999999999", "not an integer"),
        ("parallelism", "1.5", "not an integer"),
        ("rate", "0.05", "0.05 is below the minimum 0.1"),
        ("rate", "0", "0 is below the minimum 0.1"),
        ("rate", "100.01", "100.01 is above the maximum 100"),
        ("rate", "1e2", "not a number"),
        ("rate", "inf", "not a number"),
        ("rate", "NaN", "not a number"),
        ("rate", ".5", "not a number"),
        ("rate", "5; rm -rf /", "not a number"),
        ("rate", "0.5\n- --qps=1000", "not a number"),
        ("debug", "True", "not true or false"),
        ("debug", "1", "not true or false"),
        ("resources.limits.memory", "", "not a Kubernetes quantity"),
        (
            "resources.limits.memory",
            "1Gi\n",
            "not a Kubernetes quantity",
        ),
        (
            "resources.limits.memory",
            "-1Gi",
            "not a Kubernetes quantity",
        ),
        (
            "resources.limits.memory",
            "{\"a\": 1}",
            "not a Kubernetes quantity",
        ),
    ] {
        let errors = apply(&values(), &declared(), &annotations(&[(key, raw)])).expect_err(raw);
        let message = errors[0].error.to_string();
        assert!(message.contains(needle), "{key}={raw:?}: {message}");
    }
}

#[test]
fn messages_quote_at_most_a_little_of_a_huge_value() {
    let huge = "q".repeat(256 * 1024);
    let errors = apply(
        &values(),
        &declared(),
        &annotations(&[("controllerImage", &huge), (&huge[..200], "x")]),
    )
    .unwrap_err();
    for message in errors.iter().map(|e| e.error.to_string()) {
        assert!(message.len() < 400, "{} bytes", message.len());
        assert!(
            message.contains("(262144 bytes)") || message.contains("(200 bytes)"),
            "{message}"
        );
    }
}

#[test]
fn declarations_are_checked_against_values() {
    let spec = |v: Value| serde_json::from_value::<OverrideSpec>(v).unwrap();
    for (key, declaration, message, setting) in [
        (
            "nope",
            json!({"type": "string"}),
            "there is no values.nope to override",
            None,
        ),
        (
            "parallelism",
            json!({"type": "integer", "pattern": "x"}),
            "pattern and enum apply to type string only",
            None,
        ),
        (
            "parallelism",
            json!({"type": "integer", "enum": ["1"]}),
            "pattern and enum apply to type string only",
            None,
        ),
        (
            "controllerImage",
            json!({"type": "string", "maximum": 3}),
            "minimum and maximum apply to types integer and number only",
            None,
        ),
        (
            "debug",
            json!({"type": "boolean", "minimum": 0}),
            "minimum and maximum apply to types integer and number only",
            None,
        ),
        (
            "parallelism",
            json!({"type": "integer", "maximum": 1.5}),
            "minimum and maximum of type integer must be integers",
            None,
        ),
        (
            "rate",
            json!({"type": "number", "enum": ["1"]}),
            "pattern and enum apply to type string only",
            None,
        ),
        (
            "controllerImage",
            json!({"type": "string", "pattern": "("}),
            "regex parse error:\n    ^(?:()$\n     ^\nerror: unclosed group",
            Some("pattern"),
        ),
        (
            "a b",
            json!({"type": "string"}),
            "label key \"override.flotilla.dev/a b\": the name must be 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric",
            None,
        ),
    ] {
        let err = Override::new(key, spec(declaration), &values()).unwrap_err();
        assert_eq!(
            (err.to_string().as_str(), err.setting()),
            (message, setting)
        );
    }
}

#[test]
fn quantities_are_ascii_digits_and_suffixes_only() {
    // Unicode digits (Arabic-Indic, Devanagari, full-width) are digits to `\d`, not to the API
    // server.
    for raw in ["٥", "٥Gi", "1٥Mi", "५00m", "１Gi", "1e٣"] {
        let errors = apply(
            &values(),
            &declared(),
            &annotations(&[("resources.limits.memory", raw)]),
        )
        .expect_err(raw);
        assert_eq!(
            errors[0].error,
            AnnotationError::NotAQuantity(raw.into()),
            "{raw}"
        );
    }
    let errors = apply(
        &values(),
        &declared(),
        &annotations(&[("resources.limits.memory", "9Ei")]),
    )
    .unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            r#"override.flotilla.dev/resources.limits.memory: "9Ei" is above the largest Kubernetes quantity, 2^63-1"#
        ]
    );
}

/// The config's resources, as flotilla.yaml has them, with every quantity overridable.
fn resources() -> (Map<String, Value>, Vec<Override>) {
    let values = json!({
        "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "sidecar": {"requests": {"cpu": 1}, "limits": {"cpu": 2}},
    })
    .as_object()
    .unwrap()
    .clone();
    let declared = [
        "resources.requests.cpu",
        "resources.requests.memory",
        "resources.limits.cpu",
        "resources.limits.memory",
        "sidecar.limits.cpu",
    ]
    .iter()
    .map(|key| {
        let spec = serde_json::from_value(json!({"type": "quantity"})).unwrap();
        Override::new(key, spec, &values).unwrap()
    })
    .collect();
    (values, declared)
}

#[test]
fn a_request_above_its_limit_is_refused_on_the_annotation_that_set_it() {
    let (values, declared) = resources();
    let refused = |pairs: &[(&str, &str)]| match apply(&values, &declared, &annotations(pairs)) {
        Ok(_) => Vec::new(),
        Err(errors) => refusals(&errors),
    };
    // Within the limits, in any form the API server reads: accepted.
    for pairs in [
        &[("resources.requests.cpu", "0.5")][..],
        &[("resources.requests.cpu", "500m")],
        &[("resources.requests.memory", "0.5Gi")],
        &[("resources.requests.memory", "536870912")],
        &[("resources.limits.memory", "64Mi")],
        &[
            ("resources.limits.cpu", "100m"),
            ("resources.requests.cpu", "0.1"),
        ],
        &[
            ("resources.requests.cpu", "2"),
            ("resources.limits.cpu", "2000m"),
        ],
        &[("sidecar.limits.cpu", "1")],
    ] {
        assert_eq!(refused(pairs), Vec::<String>::new(), "{pairs:?}");
    }
    assert_eq!(
        refused(&[("resources.requests.memory", "1Gi")]),
        [
            r#"override.flotilla.dev/resources.requests.memory: resources.requests.memory "1Gi" is above its limit resources.limits.memory "512Mi""#
        ]
    );
    // Only the limit overridden: it is the one named.
    assert_eq!(
        refused(&[("resources.limits.cpu", "99m")]),
        [
            r#"override.flotilla.dev/resources.limits.cpu: resources.requests.cpu "100m" is above its limit resources.limits.cpu "99m""#
        ]
    );
    // Both: the request is named. 1 Gi is more than 1 G.
    assert_eq!(
        refused(&[
            ("resources.requests.memory", "1Gi"),
            ("resources.limits.memory", "1G"),
        ]),
        [
            r#"override.flotilla.dev/resources.requests.memory: resources.requests.memory "1Gi" is above its limit resources.limits.memory "1G""#
        ]
    );
    // A number in the config's values is a quantity too; a limit's own pair is found from it.
    assert_eq!(
        refused(&[("sidecar.limits.cpu", "999m")]),
        [
            r#"override.flotilla.dev/sidecar.limits.cpu: sidecar.requests.cpu "1" is above its limit sidecar.limits.cpu "999m""#
        ]
    );
    // Every refusal is reported, the pair's after the annotations' own.
    assert_eq!(
        refused(&[
            ("resources.requests.cpu", "4"),
            ("resources.requests.memory", "lots"),
        ]),
        [
            r#"override.flotilla.dev/resources.requests.memory: "lots" is not a Kubernetes quantity (like 500m or 1Gi)"#,
            r#"override.flotilla.dev/resources.requests.cpu: resources.requests.cpu "4" is above its limit resources.limits.cpu "500m""#,
        ]
    );
}

#[test]
fn a_pair_no_annotation_touched_is_left_to_the_api_server() {
    let (mut values, declared) = resources();
    values["resources"]["requests"]["cpu"] = json!("1");
    let result = apply(
        &values,
        &declared,
        &annotations(&[("resources.limits.memory", "1Gi")]),
    );
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn numbers_within_their_bounds_are_taken_as_written() {
    for (raw, want) in [
        ("0.1", json!(0.1)),
        ("100", json!(100)),
        ("100.0", json!(100.0)),
        ("2.5", json!(2.5)),
        // An integer stays one: `--qps=20`, never `--qps=20.0`, for an override of 20.
        ("20", json!(20)),
    ] {
        let result = apply(&values(), &declared(), &annotations(&[("rate", raw)])).expect(raw);
        assert_eq!(result["rate"], want, "{raw}");
        assert_eq!(result["rate"].is_i64(), want.is_i64(), "{raw}");
    }
}
