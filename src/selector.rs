//! Parses the namespace selector from its string form (`kubectl get -l` syntax) into kube's
//! typed `Selector`, validating every key and value as the API server would.

use kube::core::{Expression, Selector};
use std::collections::{BTreeMap, BTreeSet};

/// A selector string refused, quoted whole, with what is wrong in it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid label selector {selector:?}: {error}")]
pub struct InvalidSelector {
    pub selector: String,
    pub error: SelectorError,
}

/// What is wrong in a selector string; each message quotes the offending part.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    #[error("it is empty; an empty selector would opt in every namespace")]
    Empty,
    #[error("unbalanced '('")]
    UnclosedParen,
    #[error("unbalanced ')'")]
    UnopenedParen,
    /// Requirements are numbered from 1, as a reader counts them.
    #[error("requirement {0} is empty")]
    EmptyRequirement(usize),
    #[error("{0:?}: expected `=`, `==`, `!=`, `in (…)` or `notin (…)`")]
    UnknownOperator(String),
    #[error("{0:?}: the value list must be in parentheses")]
    UnparenthesizedValues(String),
    #[error(transparent)]
    Label(#[from] LabelError),
}

/// A label key or value the API server would refuse (also for annotation keys, which follow
/// the same grammar).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LabelError {
    #[error("label key {0:?}: the prefix must be a DNS subdomain")]
    KeyPrefix(String),
    #[error(
        "label key {0:?}: the name must be 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric"
    )]
    KeyName(String),
    #[error(
        "label value {0:?}: must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric"
    )]
    Value(String),
}

pub fn parse(input: &str) -> Result<Selector, InvalidSelector> {
    let fail = |error: SelectorError| InvalidSelector {
        selector: input.to_string(),
        error,
    };
    let mut expressions = Vec::new();
    for requirement in split_requirements(input).map_err(fail)? {
        expressions.push(parse_requirement(requirement.trim()).map_err(fail)?);
    }
    if expressions.is_empty() {
        return Err(fail(SelectorError::Empty));
    }
    Ok(expressions.into_iter().collect())
}

/// Splits on commas that are not inside a `( … )` value list.
fn split_requirements(input: &str) -> Result<Vec<&str>, SelectorError> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.checked_sub(1).ok_or(SelectorError::UnopenedParen)?;
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError::UnclosedParen);
    }
    parts.push(&input[start..]);
    if input.trim().is_empty() {
        return Ok(Vec::new());
    }
    if let Some(empty) = parts.iter().position(|p| p.trim().is_empty()) {
        return Err(SelectorError::EmptyRequirement(empty + 1));
    }
    Ok(parts)
}

type SetOp = fn(String, BTreeSet<String>) -> Expression;

fn parse_requirement(req: &str) -> Result<Expression, SelectorError> {
    if let Some(key) = req.strip_prefix('!') {
        let key = key.trim();
        return Ok(Expression::DoesNotExist(valid_key(key)?));
    }
    for (op, build) in [
        (
            "!=",
            Expression::NotEqual as fn(String, String) -> Expression,
        ),
        ("==", Expression::Equal),
        ("=", Expression::Equal),
    ] {
        if let Some((key, value)) = req.split_once(op) {
            return Ok(build(valid_key(key.trim())?, valid_value(value.trim())?));
        }
    }
    let Some((key, rest)) = req.split_once(char::is_whitespace) else {
        return Ok(Expression::Exists(valid_key(req)?));
    };
    let rest = rest.trim_start();
    let (set_op, list): (SetOp, &str) = if let Some(list) = rest.strip_prefix("notin") {
        (Expression::NotIn, list)
    } else if let Some(list) = rest.strip_prefix("in") {
        (Expression::In, list)
    } else {
        return Err(SelectorError::UnknownOperator(req.to_string()));
    };
    let values = list
        .trim()
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| SelectorError::UnparenthesizedValues(req.to_string()))?;
    let values = values
        .split(',')
        .map(|v| valid_value(v.trim()))
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(set_op(valid_key(key)?, values))
}

/// The labels a selector's `key=value` requirements demand: what `render` and `check` give a
/// sample namespace so that it counts as opted in.
pub fn required_labels(selector: &Selector) -> BTreeMap<String, String> {
    selector
        .clone()
        .into_iter()
        .filter_map(|expr| match expr {
            Expression::Equal(key, value) => Some((key, value)),
            _ => None,
        })
        .collect()
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
pub fn valid_key(key: &str) -> Result<String, LabelError> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !ok {
            return Err(LabelError::KeyPrefix(key.to_string()));
        }
    }
    if name.is_empty() || !is_label_value(name) {
        return Err(LabelError::KeyName(key.to_string()));
    }
    Ok(key.to_string())
}

pub fn valid_value(value: &str) -> Result<String, LabelError> {
    if is_label_value(value) {
        Ok(value.to_string())
    } else {
        Err(LabelError::Value(value.to_string()))
    }
}

/// The label-value grammar (empty allowed), shared by label names.
pub(crate) fn is_label_value(value: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
            && value.bytes().next().is_some_and(alnum)
            && value.bytes().last().is_some_and(alnum))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::SelectorExt;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn equality_forms() {
        let s = parse("flotilla.dev/enabled=true").unwrap();
        assert!(s.matches(&labels(&[("flotilla.dev/enabled", "true")])));
        assert!(!s.matches(&labels(&[("flotilla.dev/enabled", "false")])));
        assert!(!s.matches(&labels(&[])));
        let s = parse("tier == gold, env != prod").unwrap();
        assert!(s.matches(&labels(&[("tier", "gold"), ("env", "dev")])));
        assert!(!s.matches(&labels(&[("tier", "gold"), ("env", "prod")])));
    }

    #[test]
    fn set_and_existence_forms() {
        let s = parse("env in (dev, staging),team,!frozen,zone notin (eu)").unwrap();
        assert!(s.matches(&labels(&[("env", "dev"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("env", "prod"), ("team", "a")])));
        assert!(!s.matches(&labels(&[("env", "dev")])));
        assert!(!s.matches(&labels(&[("env", "dev"), ("team", "a"), ("frozen", "")])));
        assert!(!s.matches(&labels(&[("env", "dev"), ("team", "a"), ("zone", "eu")])));
    }

    #[test]
    fn refuses_bad_selectors_quoting_the_bad_part() {
        let name =
            "the name must be 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric";
        let value =
            "must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric";
        for (bad, reason) in [
            (
                "",
                "it is empty; an empty selector would opt in every namespace".to_string(),
            ),
            ("a=b,,c", "requirement 2 is empty".into()),
            ("env in (a,b", "unbalanced '('".into()),
            ("env in a)", "unbalanced ')'".into()),
            (
                "env in a,b",
                "\"env in a\": the value list must be in parentheses".into(),
            ),
            ("bad key=1", format!("label key \"bad key\": {name}")),
            (
                "env within (a)",
                "\"env within (a)\": expected `=`, `==`, `!=`, `in (…)` or `notin (…)`".into(),
            ),
            (
                "Upper.Case/x=1",
                "label key \"Upper.Case/x\": the prefix must be a DNS subdomain".into(),
            ),
            ("k=has space", format!("label value \"has space\": {value}")),
            ("k=-lead", format!("label value \"-lead\": {value}")),
            ("x/=1", format!("label key \"x/\": {name}")),
        ] {
            let err = parse(bad).expect_err(bad);
            assert_eq!(
                err.to_string(),
                format!("invalid label selector {bad:?}: {reason}")
            );
        }
    }
}
