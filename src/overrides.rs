//! Per-namespace overrides: an admin sets a value for one namespace with an annotation
//! `override.flotilla.dev/<key>` on the Namespace. Only keys the config declares overridable
//! are accepted, each checked against its declared type and bounds; anything else is refused
//! with a message naming the annotation, and the namespace keeps what it has.

mod number;
mod quantity;

use crate::selector::LabelError;
use number::{compare, decimal};
use quantity::Quantity;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub const ANNOTATION_PREFIX: &str = "override.flotilla.dev/";

/// One overridable key as written in the config's `overrides` map (and kept, as written, in
/// every revision).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideSpec {
    #[serde(rename = "type")]
    pub value_type: ValueType,
    /// Strings: the whole value must match (the pattern is anchored).
    pub pattern: Option<String>,
    /// Strings: the value must be one of these.
    #[serde(rename = "enum")]
    pub one_of: Option<Vec<String>>,
    /// Integers and numbers: inclusive bounds. Kept as JSON numbers, so that a revision's
    /// declarations serialize as written (`1` stays `1`, never `1.0`).
    pub minimum: Option<Number>,
    pub maximum: Option<Number>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum ValueType {
    String,
    Integer,
    Boolean,
    /// A decimal number such as `10` or `0.5`, for settings Argo reads as floats (pods a second,
    /// queries a second). Plain decimal only: no exponent, no `inf` or `NaN`.
    Number,
    /// A Kubernetes quantity such as `500m` or `1Gi`, kept as a string. A request
    /// (`<path>.requests.<resource>`) may not exceed its limit (`<path>.limits.<resource>`).
    Quantity,
}

/// A declaration in the config's `overrides` refused. Its key is the caller's: the message
/// reads after `overrides.<key>` (or, see `setting`, `overrides.<key>.pattern`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OverrideError {
    /// `override.flotilla.dev/<key>` would not be a valid annotation key.
    #[error(transparent)]
    AnnotationKey(LabelError),
    #[error("there is no values.{0} to override")]
    NoSuchValue(String),
    #[error("{0}")]
    Pattern(regex::Error),
    #[error("pattern and enum apply to type string only")]
    PatternNotOnString,
    #[error("minimum and maximum apply to types integer and number only")]
    BoundsNotOnNumbers,
    #[error("minimum and maximum of type integer must be integers")]
    BoundNotAnInteger,
}

impl OverrideError {
    /// The setting of the declaration at fault, when it is one setting rather than the whole.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            OverrideError::Pattern(_) => Some("pattern"),
            _ => None,
        }
    }
}

/// An override annotation on a Namespace refused: which annotation, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct RefusedOverride {
    pub annotation: String,
    pub error: AnnotationError,
}

/// Why an override annotation's value (or key) was refused. Values are quoted with `shown`, so
/// a 256 KiB annotation does not end up whole in the NamespaceWorker's status, an Event and
/// the log.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnnotationError {
    #[error("{} is not overridable (the config allows: {})", shown(.key), list(.allowed))]
    NotOverridable { key: String, allowed: Vec<String> },
    #[error("{} does not match the allowed pattern {pattern:?}", shown(.value))]
    NoMatch { value: String, pattern: String },
    #[error("{} is not one of {allowed:?}", shown(.value))]
    NotOneOf { value: String, allowed: Vec<String> },
    #[error("{} is not an integer", shown(.0))]
    NotAnInteger(String),
    #[error("{} is not a number (like 10 or 0.5)", shown(.0))]
    NotANumber(String),
    #[error("{value} is below the minimum {minimum}")]
    BelowMinimum { value: Number, minimum: Number },
    #[error("{value} is above the maximum {maximum}")]
    AboveMaximum { value: Number, maximum: Number },
    #[error("{} is not true or false", shown(.0))]
    NotABoolean(String),
    #[error("{} is not a Kubernetes quantity (like 500m or 1Gi)", shown(.0))]
    NotAQuantity(String),
    #[error("{} is above the largest Kubernetes quantity, 2^63-1", shown(.0))]
    QuantityTooLarge(String),
    /// After the overrides, a request is above its limit (the API server would refuse the
    /// workload; the namespace keeps what it has instead). Boxed: a rare error, and the largest.
    #[error(
        "{} {} is above its limit {} {}",
        .0.request,
        shown(&.0.request_value),
        .0.limit,
        shown(&.0.limit_value)
    )]
    RequestAboveLimit(Box<AboveLimit>),
}

/// A request and its limit, by key path and value.
#[derive(Debug, Clone, PartialEq)]
pub struct AboveLimit {
    pub request: String,
    pub request_value: String,
    pub limit: String,
    pub limit_value: String,
}

/// A validated, ready-to-use override declaration.
#[derive(Debug, Clone)]
pub struct Override {
    pub key: String,
    path: Vec<String>,
    spec: OverrideSpec,
    pattern: Option<Regex>,
}

impl Override {
    /// Checks a declaration against the values it overrides: the key must name an existing
    /// value (a dotted path into `values`) and make a valid annotation key.
    pub fn new(
        key: &str,
        spec: OverrideSpec,
        values: &Map<String, Value>,
    ) -> Result<Override, OverrideError> {
        let annotation = format!("{ANNOTATION_PREFIX}{key}");
        crate::selector::valid_key(&annotation).map_err(OverrideError::AnnotationKey)?;
        let path: Vec<String> = key.split('.').map(str::to_string).collect();
        if lookup(values, &path).is_none() {
            return Err(OverrideError::NoSuchValue(key.to_string()));
        }
        let pattern = spec
            .pattern
            .as_deref()
            .map(|p| Regex::new(&format!("^(?:{p})$")))
            .transpose()
            .map_err(OverrideError::Pattern)?;
        let string_only = spec.pattern.is_some() || spec.one_of.is_some();
        if string_only && spec.value_type != ValueType::String {
            return Err(OverrideError::PatternNotOnString);
        }
        let bounds = [&spec.minimum, &spec.maximum];
        match spec.value_type {
            ValueType::Integer if bounds.iter().flat_map(|b| b.as_ref()).any(|b| !b.is_i64()) => {
                return Err(OverrideError::BoundNotAnInteger);
            }
            ValueType::Integer | ValueType::Number => {}
            _ if bounds.iter().any(|b| b.is_some()) => {
                return Err(OverrideError::BoundsNotOnNumbers);
            }
            _ => {}
        }
        Ok(Override {
            key: key.to_string(),
            path,
            spec,
            pattern,
        })
    }

    fn parse(&self, raw: &str) -> Result<Value, AnnotationError> {
        let spec = &self.spec;
        match spec.value_type {
            ValueType::String => {
                if let Some(pattern) = &self.pattern
                    && !pattern.is_match(raw)
                {
                    return Err(AnnotationError::NoMatch {
                        value: raw.to_string(),
                        pattern: spec.pattern.clone().unwrap_or_default(),
                    });
                }
                if let Some(one_of) = &spec.one_of
                    && !one_of.iter().any(|v| v == raw)
                {
                    return Err(AnnotationError::NotOneOf {
                        value: raw.to_string(),
                        allowed: one_of.clone(),
                    });
                }
                Ok(Value::String(raw.to_string()))
            }
            ValueType::Integer => {
                let n: i64 = raw
                    .trim()
                    .parse()
                    .map_err(|_| AnnotationError::NotAnInteger(raw.to_string()))?;
                self.within(n.into())
            }
            ValueType::Number => {
                let n = decimal(raw).ok_or_else(|| AnnotationError::NotANumber(raw.to_string()))?;
                self.within(n)
            }
            ValueType::Boolean => match raw.trim() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(AnnotationError::NotABoolean(raw.to_string())),
            },
            ValueType::Quantity => match Quantity::parse(raw) {
                Ok(_) => Ok(Value::String(raw.to_string())),
                Err(quantity::Error::Syntax) => Err(AnnotationError::NotAQuantity(raw.to_string())),
                Err(quantity::Error::TooLarge) => {
                    Err(AnnotationError::QuantityTooLarge(raw.to_string()))
                }
            },
        }
    }

    /// `n` as the value, if it is within the declared bounds.
    fn within(&self, n: Number) -> Result<Value, AnnotationError> {
        if let Some(min) = &self.spec.minimum
            && compare(&n, min) == Some(Ordering::Less)
        {
            return Err(AnnotationError::BelowMinimum {
                value: n,
                minimum: min.clone(),
            });
        }
        if let Some(max) = &self.spec.maximum
            && compare(&n, max) == Some(Ordering::Greater)
        {
            return Err(AnnotationError::AboveMaximum {
                value: n,
                maximum: max.clone(),
            });
        }
        Ok(Value::Number(n))
    }
}

/// A value as messages quote it: at most 100 characters.
fn shown(raw: &str) -> String {
    const MAX: usize = 100;
    if raw.chars().count() <= MAX {
        return format!("{raw:?}");
    }
    let head: String = raw.chars().take(MAX).collect();
    format!("{head:?}… ({} bytes)", raw.len())
}

fn lookup<'v>(values: &'v Map<String, Value>, path: &[String]) -> Option<&'v Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(values.get(first)?, |v, key| v.as_object()?.get(key))
}

fn lookup_mut<'v>(values: &'v mut Map<String, Value>, path: &[String]) -> Option<&'v mut Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(values.get_mut(first)?, |v, key| {
        v.as_object_mut()?.get_mut(key)
    })
}

/// The values for one namespace: the config's, with that namespace's valid overrides applied.
/// Every problem is reported.
pub fn apply(
    values: &Map<String, Value>,
    declared: &[Override],
    annotations: &BTreeMap<String, String>,
) -> Result<Map<String, Value>, Vec<RefusedOverride>> {
    let mut result = values.clone();
    let mut errors = Vec::new();
    // The annotation that set each value.
    let mut set: HashMap<&[String], &String> = HashMap::new();
    for (annotation, raw) in annotations {
        // Whether the namespace sleeps is flotilla's to read (crate::sleep), not a value.
        let Some(key) = annotation
            .strip_prefix(ANNOTATION_PREFIX)
            .filter(|_| annotation != crate::sleep::OPT_OUT_ANNOTATION)
        else {
            continue;
        };
        let refuse = |error| RefusedOverride {
            annotation: annotation.clone(),
            error,
        };
        let Some(declaration) = declared.iter().find(|o| o.key == key) else {
            errors.push(refuse(AnnotationError::NotOverridable {
                key: key.to_string(),
                allowed: declared.iter().map(|o| o.key.clone()).collect(),
            }));
            continue;
        };
        match declaration.parse(raw) {
            Ok(value) => {
                if let Some(slot) = lookup_mut(&mut result, &declaration.path) {
                    *slot = value;
                    set.insert(&declaration.path, annotation);
                }
            }
            Err(error) => errors.push(refuse(error)),
        }
    }
    errors.extend(requests_above_limits(&result, declared, &set));
    if errors.is_empty() {
        Ok(result)
    } else {
        Err(errors)
    }
}

/// The requests above their limits in `values`, each refused on the annotation that set the
/// request (or else the limit): the pairs are `<path>.requests.<resource>` and
/// `<path>.limits.<resource>` of the declared quantity keys, where an annotation set either.
/// A pair no annotation touched is the config's own, and left to the API server.
fn requests_above_limits(
    values: &Map<String, Value>,
    declared: &[Override],
    set: &HashMap<&[String], &String>,
) -> Vec<RefusedOverride> {
    let pairs: BTreeSet<(Vec<String>, Vec<String>)> = declared
        .iter()
        .filter(|o| o.spec.value_type == ValueType::Quantity)
        .filter_map(|o| {
            let [parent @ .., bound, resource] = o.path.as_slice() else {
                return None;
            };
            if bound != "requests" && bound != "limits" {
                return None;
            }
            let at = |bound: &str| [parent, &[bound.to_string(), resource.clone()]].concat();
            Some((at("requests"), at("limits")))
        })
        .collect();
    let mut refused = Vec::new();
    for (request, limit) in pairs {
        let Some(annotation) = set
            .get(request.as_slice())
            .or_else(|| set.get(limit.as_slice()))
        else {
            continue;
        };
        let quantity = |path: &[String]| {
            let text = match lookup(values, path)? {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            Some((Quantity::parse(&text).ok()?, text))
        };
        // One the config set to something that is no quantity: the API server will say so.
        let (Some((requested, request_value)), Some((limited, limit_value))) =
            (quantity(&request), quantity(&limit))
        else {
            continue;
        };
        if requested > limited {
            refused.push(RefusedOverride {
                annotation: (*annotation).clone(),
                error: AnnotationError::RequestAboveLimit(Box::new(AboveLimit {
                    request: request.join("."),
                    request_value,
                    limit: limit.join("."),
                    limit_value,
                })),
            });
        }
    }
    refused
}

fn list(keys: &[String]) -> String {
    if keys.is_empty() {
        "nothing".into()
    } else {
        keys.join(", ")
    }
}

#[cfg(test)]
mod tests;
