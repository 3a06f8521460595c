//! How the index keeps one stamped object: what a [`Watched`] says, in about a hundred bytes and
//! no allocation of its own. Every namespace repeats the same few object names, so a name is
//! shared (interned per kind); a uid, a resourceVersion and flotilla's content hash are numbers
//! on every API server, so each is kept as one where it prints back exactly as it came. At
//! 10,000 namespaces and nine objects each, this is what makes the index a small part of
//! flotilla's memory rather than the largest.

use crate::kinds::Kind;
use crate::object::{ObjectKey, Watched};
use std::collections::HashSet;
use std::fmt::Write;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    /// Where it lives, if that is not the namespace it was stamped for (flotilla's own
    /// namespace, say).
    elsewhere: Option<Box<str>>,
    name: Arc<str>,
    uid: Option<Packed>,
    resource_version: Option<Packed>,
    hash: Option<Packed>,
}

impl Entry {
    pub(super) fn of(watched: &Watched, names: &mut Names) -> Entry {
        Entry {
            elsewhere: (watched.key.namespace != watched.stamped_for)
                .then(|| watched.key.namespace.as_str().into()),
            name: names.intern(&watched.key.name),
            uid: watched.uid.as_deref().map(Packed::uuid),
            resource_version: watched.resource_version.as_deref().map(Packed::decimal),
            hash: watched.hash.as_deref().map(Packed::hex16),
        }
    }

    /// The namespace it lives in, when it is in the list of `stamped_for`.
    fn namespace<'a>(&'a self, stamped_for: &'a str) -> &'a str {
        self.elsewhere.as_deref().unwrap_or(stamped_for)
    }

    /// Whether this is the object at `key`, when it is in the list of `stamped_for`.
    pub(super) fn is(&self, key: &ObjectKey, stamped_for: &str) -> bool {
        *self.name == *key.name && self.namespace(stamped_for) == key.namespace
    }

    pub(super) fn key(&self, kind: Kind, stamped_for: &str) -> ObjectKey {
        ObjectKey {
            kind,
            namespace: self.namespace(stamped_for).to_string(),
            name: self.name.to_string(),
        }
    }

    pub(super) fn watched(&self, kind: Kind, stamped_for: &str) -> Watched {
        Watched {
            key: self.key(kind, stamped_for),
            uid: self.uid.as_ref().map(Packed::text),
            resource_version: self.resource_version.as_ref().map(Packed::text),
            stamped_for: stamped_for.to_string(),
            hash: self.hash.as_ref().map(Packed::text),
        }
    }

    /// Its name, which the caller gives back to [`Names::release`] once it removed it.
    pub(super) fn into_name(self) -> Arc<str> {
        self.name
    }
}

/// The object names of one kind, each kept once however many namespaces use it.
#[derive(Debug, Default)]
pub(super) struct Names(HashSet<Arc<str>>);

impl Names {
    fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(known) = self.0.get(name) {
            return Arc::clone(known);
        }
        let name: Arc<str> = name.into();
        self.0.insert(Arc::clone(&name));
        name
    }

    /// `name` left the index: forgotten once nothing else uses it (a template that put the
    /// namespace into a name would otherwise leave a name behind for every reaped namespace).
    pub(super) fn release(&mut self, name: Arc<str>) {
        // This one and the set's.
        if Arc::strong_count(&name) == 2 {
            self.0.remove(&*name);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

/// A string the API calls opaque, kept as the number it is in practice when it prints back
/// exactly as it came, else as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Packed {
    Decimal(u64),
    Hex16(u64),
    /// A UUID's 16 bytes (bytes, not a u128, so that the enum stays 24 bytes).
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Packed {
    fn decimal(text: &str) -> Packed {
        match text.parse::<u64>() {
            Ok(n) if n.to_string() == text => Packed::Decimal(n),
            _ => Packed::Text(text.into()),
        }
    }

    fn hex16(text: &str) -> Packed {
        let lower_hex = text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        match u64::from_str_radix(text, 16) {
            Ok(n) if text.len() == 16 && lower_hex => Packed::Hex16(n),
            _ => Packed::Text(text.into()),
        }
    }

    /// The lower-case 8-4-4-4-12 form API servers give uids.
    fn uuid(text: &str) -> Packed {
        let digits: Vec<u8> = text.bytes().filter(|b| *b != b'-').collect();
        let hyphens_in_place = text.len() == 36
            && text
                .bytes()
                .enumerate()
                .all(|(i, b)| (b == b'-') == matches!(i, 8 | 13 | 18 | 23));
        let lower_hex = digits
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !(hyphens_in_place && lower_hex) {
            return Packed::Text(text.into());
        }
        let mut bytes = [0u8; 16];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            // Both are hex digits, checked above.
            *byte = (hex_value(pair[0]) << 4) | hex_value(pair[1]);
        }
        Packed::Uuid(bytes)
    }

    fn text(&self) -> String {
        match self {
            Packed::Decimal(n) => n.to_string(),
            Packed::Hex16(n) => format!("{n:016x}"),
            Packed::Uuid(bytes) => {
                let mut text = String::with_capacity(36);
                for (i, b) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        text.push('-');
                    }
                    let _ = write!(text, "{b:02x}");
                }
                text
            }
            Packed::Text(text) => text.to_string(),
        }
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        _ => digit - b'a' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_packed_prints_back_exactly_as_it_came() {
        type Pack = fn(&str) -> Packed;
        let cases: [(&str, Pack, bool); 12] = [
            ("4711", Packed::decimal, true),
            ("0", Packed::decimal, true),
            ("007", Packed::decimal, false),
            ("+7", Packed::decimal, false),
            ("18446744073709551616", Packed::decimal, false),
            ("43fda9d807afc526", Packed::hex16, true),
            ("43FDA9D807AFC526", Packed::hex16, false),
            ("43fda9d807afc52", Packed::hex16, false),
            ("1b4e28ba-2fa1-11d2-883f-0016d3cca427", Packed::uuid, true),
            ("1B4E28BA-2FA1-11D2-883F-0016D3CCA427", Packed::uuid, false),
            ("1b4e28ba2fa1-11d2-883f-0016d3cca427-", Packed::uuid, false),
            ("uid-a-cm", Packed::uuid, false),
        ];
        for (text, pack, as_number) in cases {
            let packed = pack(text);
            assert_eq!(packed.text(), text, "{packed:?}");
            assert_eq!(!matches!(packed, Packed::Text(_)), as_number, "{text}");
        }
        assert_eq!(std::mem::size_of::<Packed>(), 24);
    }

    fn watched(namespace: &str, name: &str, stamped_for: &str) -> Watched {
        Watched {
            key: ObjectKey {
                kind: Kind::Role,
                namespace: namespace.into(),
                name: name.into(),
            },
            uid: Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427".into()),
            resource_version: Some("912".into()),
            stamped_for: stamped_for.into(),
            hash: Some("43fda9d807afc526".into()),
        }
    }

    #[test]
    fn an_entry_gives_back_the_watched_object_and_shares_its_name() {
        let mut names = Names::default();
        let here = watched("team-a", "argo-role", "team-a");
        let there = watched("flotilla-system", "argo-role", "team-b");
        let (a, b) = (Entry::of(&here, &mut names), Entry::of(&there, &mut names));
        assert_eq!(a.watched(Kind::Role, "team-a"), here);
        assert_eq!(b.watched(Kind::Role, "team-b"), there);
        assert!(a.is(&here.key, "team-a") && !a.is(&there.key, "team-a"));
        assert!(b.is(&there.key, "team-b"));
        assert_eq!(names.len(), 1);
        names.release(a.into_name());
        assert_eq!(names.len(), 1, "team-b's Role still has the name");
        names.release(b.into_name());
        assert_eq!(names.len(), 0);
    }
}
