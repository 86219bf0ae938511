//! A certificate's `notAfter`, read from its DER with a few lines of DER walking (enough to warn
//! about an expired certificate at start; verification proper is webpki's).

/// One DER element at the front of `d`: `(tag, contents, rest)`.
fn element(d: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, d) = d.split_first()?;
    let (&first, mut d) = d.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || d.len() < n {
            return None;
        }
        let (bytes, rest) = d.split_at(n);
        d = rest;
        bytes
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    if d.len() < len {
        return None;
    }
    let (contents, rest) = d.split_at(len);
    Some((tag, contents, rest))
}

/// The certificate's notAfter as Unix seconds.
pub fn not_after(cert: &[u8]) -> Option<i64> {
    let (_, certificate, _) = element(cert)?;
    let (_, mut tbs, _) = element(certificate)?;
    // [0] version (optional), serial, signature algorithm, issuer, validity.
    let (tag, _, rest) = element(tbs)?;
    if tag == 0xa0 {
        tbs = rest;
    }
    let (_, _, rest) = element(tbs)?; // serial
    let (_, _, rest) = element(rest)?; // signature algorithm
    let (_, _, rest) = element(rest)?; // issuer
    let (_, validity, _) = element(rest)?;
    let (_, _, rest) = element(validity)?; // notBefore
    let (tag, time, _) = element(rest)?;
    parse_time(tag, time)
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) as Unix seconds.
fn parse_time(tag: u8, t: &[u8]) -> Option<i64> {
    let digits = |s: &[u8]| -> Option<i64> {
        s.iter().try_fold(0i64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
        })
    };
    let (year, rest) = match tag {
        0x17 if t.len() >= 12 => {
            let yy = digits(&t[..2])?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &t[2..])
        }
        0x18 if t.len() >= 14 => (digits(&t[..4])?, &t[4..]),
        _ => return None,
    };
    let f = |i: usize| digits(&rest[i..i + 2]);
    let days = days_from_civil(year, f(0)?, f(2)?);
    Some(days * 86400 + f(4)? * 3600 + f(6)? * 60 + f(8)?)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// `YYYY-MM-DD` of Unix seconds.
pub fn date(secs: i64) -> String {
    let z = secs.div_euclid(86400) + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_dates() {
        assert_eq!(parse_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(parse_time(0x17, b"491231235959Z"), Some(2524607999));
        assert_eq!(parse_time(0x18, b"20240229120000Z"), Some(1709208000));
        assert_eq!(parse_time(0x17, b"7001"), None);
        assert_eq!(date(1709208000), "2024-02-29");
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(not_after(b"\x30\x03\x02\x01\x00"), None);
    }
}
