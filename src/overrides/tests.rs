use super::*;
use serde_json::json;

fn values() -> Map<String, Value> {
    json!({
        "controllerImage": "quay.io/argoproj/workflow-controller:v4.1.2",
        "parallelism": 50,
        "debug": false,
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
    assert_eq!(result["resources"]["limits"]["memory"], "1Gi");
    let mut unrelated = BTreeMap::new();
    unrelated.insert("example.com/other".to_string(), "x".to_string());
    assert_eq!(apply(&values(), &declared(), &unrelated).unwrap(), values());
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
            r#"override.flotilla.dev/executorImage: "executorImage" is not overridable (the config allows: controllerImage, debug, parallelism, resources.limits.memory)"#,
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
                value: 0,
                minimum: 1,
            },
            "0 is below the minimum 1".into(),
        ),
        (
            AnnotationError::AboveMaximum {
                value: 5000,
                maximum: 500,
            },
            "5000 is above the maximum 500".into(),
        ),
        (
            AnnotationError::NotABoolean("yes".into()),
            r#""yes" is not true or false"#.into(),
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
            "minimum and maximum apply to type integer only",
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
