//! Strings the Kubernetes API calls opaque but that are numbers on every API server: a
//! resourceVersion, a uid, flotilla's content hash. Kept for every stamped object of every
//! namespace, so kept as the number (no allocation) wherever that prints back exactly as it
//! came, and as the string otherwise.

use std::fmt::Write;

/// A string the API calls opaque, kept as the number it is in practice when it prints back
/// exactly as it came, else as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packed {
    Decimal(u64),
    Hex16(u64),
    /// A UUID's 16 bytes (bytes, not a u128, so that the enum stays 24 bytes).
    Uuid([u8; 16]),
    Text(Box<str>),
}

impl Packed {
    pub fn decimal(text: &str) -> Packed {
        match text.parse::<u64>() {
            Ok(n) if n.to_string() == text => Packed::Decimal(n),
            _ => Packed::Text(text.into()),
        }
    }

    pub fn hex16(text: &str) -> Packed {
        let lower_hex = text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        match u64::from_str_radix(text, 16) {
            Ok(n) if text.len() == 16 && lower_hex => Packed::Hex16(n),
            _ => Packed::Text(text.into()),
        }
    }

    /// The lower-case 8-4-4-4-12 form API servers give uids.
    pub fn uuid(text: &str) -> Packed {
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

    pub fn text(&self) -> String {
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

    /// Whether this is `text`, without making a string of it.
    pub fn is(&self, text: &str) -> bool {
        match self {
            Packed::Decimal(n) => {
                text.parse::<u64>().is_ok_and(|t| t == *n)
                    && (text == "0" || !text.starts_with(['+', '0']))
            }
            Packed::Text(own) => **own == *text,
            Packed::Hex16(_) | Packed::Uuid(_) => self.text() == text,
        }
    }
}

/// A resourceVersion, as tests write them.
impl From<&str> for Packed {
    fn from(text: &str) -> Packed {
        Packed::decimal(text)
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
            assert!(packed.is(text), "{text}");
        }
        assert_eq!(std::mem::size_of::<Packed>(), 24);
    }

    #[test]
    fn a_packed_number_is_only_its_own_text() {
        let rv = Packed::decimal("4711");
        for other in ["4712", "04711", "+4711", "4711 ", ""] {
            assert!(!rv.is(other), "{other}");
        }
        assert!(Packed::decimal("0").is("0") && !Packed::decimal("0").is("00"));
        assert!(!Packed::decimal("007").is("7"));
    }
}
