//! Kubernetes quantities (`500m`, `1.5Gi`, `2e3`) parsed into a value that compares exactly, as
//! the API server parses them (apimachinery's `resource.ParseQuantity`): a number of ASCII
//! digits with an optional fraction, then one suffix, binary (`Ki` to `Ei`), decimal (`m`, `k`
//! to `E`) or a decimal exponent (`e3`, `E-2`); the value rounded up to the nano, so that a
//! non-zero request never becomes zero. No floating point: `0.1` is exactly a tenth.
//!
//! flotilla accepts less than the API server: no sign (a negative request or limit is invalid
//! anyway), no `n` or `u` suffixes (below the milli-CPU the API server would keep), and nothing
//! above 2^63-1, which the API's documentation sets as the largest quantity.

/// A quantity's value in nano-units (10^-9), rounded up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(u128);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// Not of the form above.
    Syntax,
    /// Above 2^63-1.
    TooLarge,
}

const NANO_DIGITS: i64 = 9;
/// 2^63-1 units, in nano-units.
const LARGEST: u128 = (i64::MAX as u128) * 1_000_000_000;

impl Quantity {
    pub fn parse(text: &str) -> Result<Quantity, Error> {
        let bytes = text.as_bytes();
        let integer_end = bytes
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(bytes.len());
        let (integer, rest) = text.split_at(integer_end);
        let (fraction, suffix) = match rest.strip_prefix('.') {
            Some(after) => {
                let end = after
                    .bytes()
                    .position(|b| !b.is_ascii_digit())
                    .unwrap_or(after.len());
                if end == 0 {
                    return Err(Error::Syntax);
                }
                after.split_at(end)
            }
            None => ("", rest),
        };
        if integer.is_empty() && fraction.is_empty() {
            return Err(Error::Syntax);
        }
        let (exponent, binary) = scale(suffix)?;
        // The digits as one integer, times 1024^binary, times 10^(exponent - fraction digits).
        let mut digits: Vec<u8> = integer
            .bytes()
            .chain(fraction.bytes())
            .map(|b| b - b'0')
            .collect();
        times(&mut digits, 1u64 << (10 * binary));
        let shift = exponent
            .saturating_add(NANO_DIGITS)
            .saturating_sub(fraction.len() as i64);
        nano_units(digits, shift).map(Quantity)
    }
}

/// A suffix as (decimal exponent, power of 1024).
fn scale(suffix: &str) -> Result<(i64, u32), Error> {
    let decimal = |exponent| Ok((exponent, 0));
    let binary = |power| Ok((0, power));
    match suffix {
        "" => decimal(0),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E']).ok_or(Error::Syntax)?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Error::Syntax);
            }
            // Any exponent beyond this makes a non-zero value too large or rounds it up to 1n.
            let magnitude: i64 = digits.parse().unwrap_or(i64::MAX).min(1_000);
            decimal(if exponent.starts_with('-') {
                -magnitude
            } else {
                magnitude
            })
        }
    }
}

/// `digits` (most significant first) times `factor`, in place.
fn times(digits: &mut Vec<u8>, factor: u64) {
    let mut carry: u128 = 0;
    for digit in digits.iter_mut().rev() {
        let product = u128::from(*digit) * u128::from(factor) + carry;
        *digit = (product % 10) as u8;
        carry = product / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// The integer `digits` times 10^`shift`, rounded up, if at most [`LARGEST`].
fn nano_units(mut digits: Vec<u8>, shift: i64) -> Result<u128, Error> {
    let leading_zeros = digits.iter().take_while(|d| **d == 0).count();
    digits.drain(..leading_zeros);
    if digits.is_empty() {
        return Ok(0);
    }
    let kept = digits.len() as i64 + shift.min(0);
    let round_up =
        kept < digits.len() as i64 && digits[kept.max(0) as usize..].iter().any(|d| *d != 0);
    let zeros = shift.max(0);
    // LARGEST has 28 digits: a longer integer is above it.
    if kept + zeros > 28 {
        return Err(Error::TooLarge);
    }
    let mut value: u128 = 0;
    for digit in digits.iter().take(kept.max(0) as usize) {
        value = value * 10 + u128::from(*digit);
    }
    for _ in 0..zeros {
        value *= 10;
    }
    value += u128::from(round_up);
    if value > LARGEST {
        return Err(Error::TooLarge);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nano(text: &str) -> u128 {
        Quantity::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e:?}"))
            .0
    }

    #[test]
    fn every_suffix_means_what_it_means_to_the_api_server() {
        let n = 1_000_000_000u128;
        for (text, value) in [
            ("0", 0),
            ("1", n),
            ("500m", n / 2),
            ("0.5", n / 2),
            (".5", n / 2),
            ("1.5", 3 * n / 2),
            ("100m", n / 10),
            ("0.1", n / 10),
            ("1k", 1_000 * n),
            ("1M", 1_000_000 * n),
            ("1G", 1_000_000_000 * n),
            ("1T", 1_000_000_000_000 * n),
            ("1P", 1_000_000_000_000_000 * n),
            ("1E", 1_000_000_000_000_000_000 * n),
            ("1Ki", 1_024 * n),
            ("1Mi", 1_048_576 * n),
            ("1.5Gi", 1_610_612_736 * n),
            ("1Ti", (1 << 40) * n),
            ("1Pi", (1 << 50) * n),
            ("2Ei", (1 << 61) * n),
            ("1e3", 1_000 * n),
            ("1E3", 1_000 * n),
            ("1e+3", 1_000 * n),
            ("25e-1", 5 * n / 2),
            ("1e-3", n / 1_000),
            ("0001.000", n),
        ] {
            assert_eq!(nano(text), value, "{text}");
        }
    }

    #[test]
    fn equal_quantities_in_different_forms_compare_equal() {
        for (a, b) in [
            ("500m", "0.5"),
            ("1000m", "1"),
            ("1k", "1e3"),
            ("1Ki", "1024"),
            ("0.5Ki", "512"),
            ("1Gi", "1024Mi"),
            ("64Mi", "67108864"),
            ("15e-1", "1.5"),
        ] {
            assert_eq!(Quantity::parse(a), Quantity::parse(b), "{a} = {b}");
        }
        let q = |t| Quantity::parse(t).unwrap();
        assert!(q("1Gi") > q("1G"));
        assert!(q("999m") < q("1"));
        assert!(q("513Mi") > q("0.5Gi"));
    }

    #[test]
    fn precision_below_the_nano_rounds_up_as_the_api_server_does() {
        assert_eq!(nano("0.0000000001"), 1);
        assert_eq!(nano("1e-30"), 1);
        assert_eq!(nano("1.0000000001"), 1_000_000_001);
        assert_eq!(nano("1.0000000000000"), 1_000_000_000);
        // A binary fraction: 1.0000000001 * 1024 = 1024.0000001024.
        assert_eq!(nano("1.0000000001Ki"), 1_024_000_000_103);
        assert_eq!(nano("0e-1000000"), 0);
    }

    #[test]
    fn only_ascii_digits_and_one_known_suffix_are_a_quantity() {
        for text in [
            "", ".", "1.", "m", "Ki", "e3", "-1", "+1", "1 ", " 1", "1Gi\n", "1ki", "1K", "1mi",
            "1n", "1u", "1e", "1e+", "1e3k", "1ee3", "1.5.5", "1Gii", "0x10", "1_000",
            // Arabic-Indic, Devanagari and full-width digits: Unicode's \d, not Kubernetes'.
            "٥", "५00m", "１Gi", "1٥", "1e٣",
        ] {
            assert_eq!(Quantity::parse(text), Err(Error::Syntax), "{text:?}");
        }
    }

    #[test]
    fn nothing_above_the_largest_quantity() {
        assert_eq!(nano("9223372036854775807"), LARGEST);
        for text in [
            "9223372036854775808",
            "8Ei",
            "9.3E",
            "1e19",
            "1e1000",
            "1e99999999999999999999",
        ] {
            assert_eq!(Quantity::parse(text), Err(Error::TooLarge), "{text}");
        }
        assert!(Quantity::parse("7.99Ei").is_ok());
        assert!(Quantity::parse(&format!("0.{}1", "0".repeat(5000))).is_ok());
        assert_eq!(
            Quantity::parse(&format!("1{}", "0".repeat(5000))),
            Err(Error::TooLarge)
        );
    }
}
