//! Names composed in templates, e.g. from the namespace name: `{{ (namespace.name ~ "-fleet-entry")
//! | dns_label }}`. A namespace name may already be 63 characters long, the limit of a DNS label,
//! so anything appended to it needs shortening; cutting alone would make two long names that
//! differ only at the end collide. `dns_label` keeps a valid name as it is and otherwise
//! shortens (and cleans) it, appending a hash of the whole input, so distinct inputs stay
//! distinct.

use sha2::{Digest, Sha256};

/// The longest DNS label (RFC 1123), and the default length of `dns_label`.
pub const MAX_LABEL: usize = 63;
/// `-` and 8 hex digits.
const SUFFIX: usize = 9;

/// `value` if it is a valid DNS label of at most `max` characters; otherwise the longest prefix
/// of it that fits (lowercased, characters other than `[a-z0-9-]` replaced by `-`), then `-`
/// and the first 8 hex digits of the SHA-256 of the whole `value`.
pub fn dns_label(value: &str, max: usize) -> Result<String, String> {
    if !(SUFFIX + 1..=MAX_LABEL).contains(&max) {
        return Err(format!(
            "dns_label: the length must be between {} and {MAX_LABEL}, not {max}",
            SUFFIX + 1
        ));
    }
    if value.len() <= max && crate::config::is_dns_label(value) {
        return Ok(value.to_string());
    }
    let hash: String = Sha256::digest(value.as_bytes())[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let clean: String = value
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9') => c,
            _ => '-',
        })
        .take(max - SUFFIX)
        .collect();
    let prefix = clean.trim_matches('-');
    if prefix.is_empty() {
        return Ok(hash);
    }
    Ok(format!("{prefix}-{hash}"))
}

/// The minijinja filter: `{{ value | dns_label }}` or `{{ value | dns_label(40) }}`.
pub fn dns_label_filter(value: String, max: Option<usize>) -> Result<String, minijinja::Error> {
    dns_label(&value, max.unwrap_or(MAX_LABEL))
        .map_err(|e| minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::is_dns_label;

    #[test]
    fn a_valid_short_name_is_kept() {
        assert_eq!(
            dns_label("team-a-fleet-entry", 63).unwrap(),
            "team-a-fleet-entry"
        );
        let exactly = "a".repeat(63);
        assert_eq!(dns_label(&exactly, 63).unwrap(), exactly);
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let base = "x".repeat(60);
        let a = dns_label(&format!("{base}-one-fleet-entry"), 63).unwrap();
        let b = dns_label(&format!("{base}-two-fleet-entry"), 63).unwrap();
        for name in [&a, &b] {
            assert_eq!(name.len(), 63, "{name}");
            assert!(is_dns_label(name), "{name}");
        }
        assert_ne!(a, b);
        // Deterministic: the same input always gives the same name.
        assert_eq!(
            a,
            dns_label(&format!("{base}-one-fleet-entry"), 63).unwrap()
        );
        // A shorter limit is honoured too.
        let short = dns_label(&format!("{base}-one"), 20).unwrap();
        assert_eq!(short.len(), 20);
        assert!(is_dns_label(&short));
    }

    #[test]
    fn invalid_characters_are_replaced_and_hashed() {
        let a = dns_label("Team_A.example", 63).unwrap();
        let b = dns_label("team-a-example", 63).unwrap();
        assert!(is_dns_label(&a), "{a}");
        assert!(a.starts_with("team-a-example-"), "{a}");
        // Cleaning alone would make them equal; the hash keeps them apart.
        assert_ne!(a, b);
        for odd in ["-lead", "trail-", "--", "ünï", "", "a\nb", &"-".repeat(100)] {
            let name = dns_label(odd, 63).unwrap();
            assert!(is_dns_label(&name), "{odd:?} -> {name:?}");
        }
    }

    #[test]
    fn the_length_must_leave_room_for_the_hash() {
        assert!(dns_label("x", 9).unwrap_err().contains("between 10 and 63"));
        assert!(dns_label("x", 64).is_err());
        assert_eq!(dns_label(&"y".repeat(30), 10).unwrap().len(), 10);
    }
}
