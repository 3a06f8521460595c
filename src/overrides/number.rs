//! Numbers in override annotations: the plain decimals a `number` override takes, and bounds
//! compared without losing an integer's exactness.

use serde_json::Number;
use std::cmp::Ordering;

/// Integers exactly (an `i64` is not always an `f64`), anything else as floats.
pub(super) fn compare(a: &Number, b: &Number) -> Option<Ordering> {
    match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => Some(a.cmp(&b)),
        _ => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// A plain decimal (`10`, `0.5`, `-2.25`; ASCII digits, as a quantity's): an integer stays
/// one, so that `20` renders as the config's own `20` would, never as `20.0`. `None` for
/// anything else, an exponent, `inf` and `NaN` included, and for a value too large for a float.
pub(super) fn decimal(raw: &str) -> Option<Number> {
    let text = raw.trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (whole, fraction) = match digits.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (digits, None),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || !fraction.is_none_or(all_digits) {
        return None;
    }
    if fraction.is_none()
        && let Ok(n) = text.parse::<i64>()
    {
        return Some(n.into());
    }
    text.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .and_then(Number::from_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_decimals_only() {
        for (raw, want) in [
            ("10", Some("10")),
            ("0", Some("0")),
            ("-3", Some("-3")),
            ("007", Some("7")),
            ("0.5", Some("0.5")),
            ("20.0", Some("20.0")),
            ("-2.25", Some("-2.25")),
            (" 1.5 ", Some("1.5")),
            ("9223372036854775808", Some("9.223372036854776e+18")),
            ("", None),
            ("-", None),
            (".5", None),
            ("5.", None),
            ("+5", None),
            ("1e3", None),
            ("1E3", None),
            ("0x10", None),
            ("inf", None),
            ("NaN", None),
            ("1,5", None),
            ("1.2.3", None),
            ("١٠", None),
            ("１0", None),
            ("5 pods", None),
            (&"9".repeat(400), None),
        ] {
            assert_eq!(
                decimal(raw).map(|n| n.to_string()).as_deref(),
                want,
                "{raw:?}"
            );
        }
        // An integer stays an integer: it renders as the config's own `20` would.
        assert!(decimal("20").unwrap().is_i64());
        assert!(decimal("20.0").unwrap().is_f64());
    }

    #[test]
    fn integers_compare_exactly_and_floats_as_floats() {
        let n = |text: &str| decimal(text).unwrap();
        for (a, b, want) in [
            ("1", "2", Ordering::Less),
            ("2", "2", Ordering::Equal),
            ("0.5", "1", Ordering::Less),
            ("1", "0.5", Ordering::Greater),
            ("100.5", "100", Ordering::Greater),
            ("2.0", "2", Ordering::Equal),
            // Beyond 2^53 the floats of these are equal; the integers are not.
            ("9007199254740993", "9007199254740992", Ordering::Greater),
        ] {
            assert_eq!(compare(&n(a), &n(b)), Some(want), "{a} vs {b}");
        }
    }
}
