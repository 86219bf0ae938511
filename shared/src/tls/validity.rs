//! The validity period of an X.509 certificate (RFC 5280 section 4.1.2.5), read from its DER.
//!
//! Only what the `--cacert` rule needs: walk `Certificate → tbsCertificate → [version],
//! serialNumber, signature, issuer → validity` and read the two times. Anything else in the
//! certificate is skipped by length. Malformed input is `None`, never a panic.

/// Seconds since the Unix epoch of notBefore and notAfter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    /// Read the validity of a DER certificate; `None` if it is not one.
    pub fn of(cert_der: &[u8]) -> Option<Validity> {
        let (cert, _) = tlv(cert_der, SEQUENCE)?;
        let (mut tbs, _) = tlv(cert, SEQUENCE)?;
        if tbs.first() == Some(&VERSION_TAG) {
            tbs = tlv(tbs, VERSION_TAG)?.1;
        }
        let (_, rest) = tlv(tbs, INTEGER)?; // serialNumber
        let (_, rest) = tlv(rest, SEQUENCE)?; // signature AlgorithmIdentifier
        let (_, rest) = tlv(rest, SEQUENCE)?; // issuer Name
        let (validity, _) = tlv(rest, SEQUENCE)?;
        let (not_before, rest) = time(validity)?;
        let (not_after, _) = time(rest)?;
        Some(Validity {
            not_before,
            not_after,
        })
    }

    /// Whether `now` (Unix seconds) is within the period, both ends included (RFC 5280).
    pub fn contains(&self, now: i64) -> bool {
        self.not_before <= now && now <= self.not_after
    }
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const VERSION_TAG: u8 = 0xa0;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// One DER element with tag `tag` at the start of `input`: its contents and what follows.
fn tlv(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = input.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A `Time` (UTCTime or GeneralizedTime, both in `Z` form as RFC 5280 requires): Unix seconds.
fn time(input: &[u8]) -> Option<(i64, &[u8])> {
    let (year, digits, rest) = match *input.first()? {
        UTC_TIME => {
            let (v, rest) = tlv(input, UTC_TIME)?;
            let yy = number(v.get(..2)?)?;
            // RFC 5280: YY >= 50 is 19YY, else 20YY.
            let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
            (year, v.get(2..)?, rest)
        }
        GENERALIZED_TIME => {
            let (v, rest) = tlv(input, GENERALIZED_TIME)?;
            (number(v.get(..4)?)?, v.get(4..)?, rest)
        }
        _ => return None,
    };
    // MMDDHHMMSSZ
    if digits.len() != 11 || digits[10] != b'Z' {
        return None;
    }
    let f = |i: usize| number(&digits[i..i + 2]);
    let (month, day, h, m, s) = (f(0)?, f(2)?, f(4)?, f(6)?, f(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = crate::civil::days_from_civil(year, month, day);
    Some((days * 86_400 + h * 3600 + m * 60 + s, rest))
}

fn number(digits: &[u8]) -> Option<i64> {
    digits.iter().try_fold(0i64, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        // UTCTime 2049-12-31 23:59:59 and 1950-01-01 00:00:00; GeneralizedTime 2050.
        let utc = b"\x17\x0d491231235959Z";
        assert_eq!(time(utc).unwrap().0, 2_524_607_999);
        assert_eq!(time(b"\x17\x0d500101000000Z").unwrap().0, -631_152_000);
        assert_eq!(time(b"\x18\x0f20500101000000Z").unwrap().0, 2_524_608_000);
        for bad in [
            &b"\x17\x0d491231235959X"[..],
            b"\x17\x0c49123123595Z",
            b"\x17\x0d491331235959Z",
            b"\x17\x0d4912312359a9Z",
            b"\x02\x01\x00",
            b"\x17\x0d4912",
            b"",
        ] {
            assert_eq!(time(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn long_lengths_and_truncation() {
        let mut long = vec![SEQUENCE, 0x82, 0x01, 0x00];
        long.extend(std::iter::repeat_n(0u8, 256));
        assert_eq!(tlv(&long, SEQUENCE).unwrap().0.len(), 256);
        assert_eq!(tlv(&long[..100], SEQUENCE), None);
        assert_eq!(tlv(&[SEQUENCE, 0x80], SEQUENCE), None);
        assert_eq!(tlv(&[SEQUENCE, 0x85, 1, 1, 1, 1, 1], SEQUENCE), None);
        // Every prefix of a real certificate is rejected, never a panic.
        let cert = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        let der = cert.cert.der().to_vec();
        assert!(Validity::of(&der).is_some());
        for n in 0..der.len() {
            assert_eq!(Validity::of(&der[..n]), None, "prefix of {n} bytes");
        }
    }
}
