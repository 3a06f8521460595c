//! The kept revisions as one turn of the rollout sees them: each revision's number by its hash,
//! and whether it can be rendered.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeptRevisions {
    /// By hash: (number, whether it can be rendered: kept and not broken).
    by_hash: BTreeMap<String, (i64, bool)>,
}

impl KeptRevisions {
    pub fn new(revisions: impl IntoIterator<Item = (String, i64, bool)>) -> KeptRevisions {
        KeptRevisions {
            by_hash: revisions
                .into_iter()
                .map(|(hash, number, usable)| (hash, (number, usable)))
                .collect(),
        }
    }

    /// Whether revision `hash` is kept and can be rendered.
    pub fn known(&self, hash: &str) -> bool {
        self.by_hash.get(hash).is_some_and(|(_, usable)| *usable)
    }

    /// A revision's number; 0 for one not kept.
    pub fn number(&self, hash: &str) -> i64 {
        self.by_hash.get(hash).map_or(0, |(number, _)| *number)
    }

    /// The revision numbered `number`, if it is kept.
    pub fn hash_of(&self, number: i64) -> Option<String> {
        self.by_hash
            .iter()
            .find(|(_, (n, _))| *n == number)
            .map(|(hash, _)| hash.clone())
    }

    /// The revision of the highest number.
    pub fn newest(&self) -> Option<String> {
        self.by_hash
            .iter()
            .max_by_key(|(_, (number, _))| *number)
            .map(|(hash, _)| hash.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_found_by_number_and_hash_and_a_broken_one_is_not_known() {
        let kept = KeptRevisions::new([
            ("a".to_string(), 1, true),
            ("b".to_string(), 3, false),
            ("c".to_string(), 2, true),
        ]);
        assert_eq!(kept.newest().as_deref(), Some("b"));
        assert_eq!(kept.hash_of(2).as_deref(), Some("c"));
        assert_eq!(kept.hash_of(4), None);
        assert_eq!((kept.number("c"), kept.number("z")), (2, 0));
        assert!(kept.known("a") && !kept.known("b") && !kept.known("z"));
        assert_eq!(KeptRevisions::default().newest(), None);
    }
}
