//! How every `{{ … }}` is written into a template's output: as JSON, which is YAML too, so that a
//! value is always one scalar (or one flow collection) and never adds a field, an object or a
//! document.
//!
//! JSON alone is not quite enough: JSON lets DEL, the C1 controls and U+FFFE/U+FFFF stand
//! unescaped inside a string, but YAML does not allow them anywhere in a stream, so an
//! annotation holding one would make the whole output invalid. They are written as `\uXXXX`
//! escapes (valid in both), as are the separators U+2028/U+2029 and the byte-order mark
//! U+FEFF, which some YAML readers take for line breaks or a stream start.

use minijinja::value::ValueKind;
use minijinja::{AutoEscape, Error, ErrorKind, Output, State, Value};

/// A value as a JSON text that is also a valid YAML scalar or flow collection.
pub fn to_yaml_json(value: &Value) -> Result<String, Error> {
    if matches!(value.kind(), ValueKind::Undefined | ValueKind::None) {
        return Ok("null".into());
    }
    let json = serde_json::to_string(value).map_err(|e| {
        Error::new(
            ErrorKind::BadSerialization,
            format!("cannot write the value as JSON: {e}"),
        )
    })?;
    Ok(escape_non_printable(&json))
}

/// Escapes the characters YAML does not accept, or may read as line breaks, as `\uXXXX`. They
/// can only occur inside JSON strings (JSON's own syntax is ASCII), where the escape means the
/// same character in JSON and in YAML.
pub fn escape_non_printable(json: &str) -> String {
    let needs = |c: char| {
        matches!(
            c,
            '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        )
    };
    if !json.chars().any(needs) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if needs(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The environment's formatter. Text the template itself produced (safe strings: captured
/// blocks, macro output) is written as it is; every value is written by [`to_yaml_json`]; and
/// a template that turns escaping off (`{% autoescape false %}`) fails instead of emitting raw
/// values.
pub fn formatter(out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
    if value.is_safe() {
        return minijinja::escape_formatter(out, state, value);
    }
    match state.auto_escape() {
        AutoEscape::Json => out.write_str(&to_yaml_json(value)?).map_err(Error::from),
        _ => Err(Error::new(
            ErrorKind::InvalidOperation,
            "escaping is turned off here ({% autoescape %}); flotilla writes every {{ … }} as JSON so that no value can add YAML structure",
        )),
    }
}

/// `|safe` would emit a value unescaped, so that a label or annotation could add structure.
pub fn safe_filter(_value: Value) -> Result<Value, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        "the safe filter is not available in flotilla templates: it would let a value add YAML structure; write {{ value }} and flotilla quotes it",
    ))
}

/// `|escape`, `|e` and `|tojson`: the same escaping as printing, as a safe string.
pub fn escape_filter(value: Value) -> Result<Value, Error> {
    if value.is_safe() {
        return Ok(value);
    }
    Ok(Value::from_safe_string(to_yaml_json(&value)?))
}

/// `|tojson` takes an optional indent; flotilla's output is always compact (a multi-line flow
/// collection would have to follow YAML's indentation rules).
pub fn tojson_filter(value: Value, _indent: Option<Value>) -> Result<Value, Error> {
    Ok(Value::from_safe_string(to_yaml_json(&value)?))
}
