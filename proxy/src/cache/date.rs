//! HTTP-date (RFC 9110 5.6.7), read into seconds since the Unix epoch.
//!
//! "Recipients of timestamp values are encouraged to be robust in parsing timestamps unless
//! otherwise restricted by the field definition ... A recipient that parses a timestamp value
//! in an HTTP field MUST accept all three HTTP-date formats": IMF-fixdate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37
//! GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Anything else is `None`; for `Expires` the
//! caller reads that as "already expired" (RFC 9111 5.3).

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Seconds since the epoch of an HTTP-date, or `None` if `v` is not one.
pub fn parse_http_date(v: &[u8]) -> Option<u64> {
    let v = shared::http::framing::trim_ows(v);
    let comma = v.iter().position(|&b| b == b',');
    match comma {
        // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" (the day name is 3 letters).
        Some(3) if v.len() == 29 => {
            let (day, mon, year) = (&v[5..7], &v[8..11], &v[12..16]);
            (v[4] == b' ' && v[7] == b' ' && v[11] == b' ' && v[16] == b' ' && &v[25..] == b" GMT")
                .then_some(())?;
            civil(num(year)?, month(mon)?, num(day)?, &v[17..25])
        }
        // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year that would be more than
        // 50 years ahead is in the past century (RFC 9110 5.6.7).
        Some(c) => {
            let r = &v[c + 1..];
            (r.len() == 23 && r[0] == b' ' && r[3] == b'-' && r[7] == b'-' && r[10] == b' ')
                .then_some(())?;
            (&r[19..] == b" GMT").then_some(())?;
            let yy = num(&r[8..10])?;
            let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
            civil(year, month(&r[4..7])?, num(&r[1..3])?, &r[11..19])
        }
        // asctime: "Sun Nov  6 08:49:37 1994" (the day padded with a space).
        None if v.len() == 24 => {
            (v[3] == b' ' && v[7] == b' ' && v[10] == b' ' && v[19] == b' ').then_some(())?;
            let day = if v[8] == b' ' { &v[9..10] } else { &v[8..10] };
            civil(num(&v[20..24])?, month(&v[4..7])?, num(day)?, &v[11..19])
        }
        None => None,
    }
}

/// A number of one to four ASCII digits.
fn num(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 4 || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(d.iter().fold(0, |n, &b| n * 10 + u64::from(b - b'0')))
}

fn month(m: &[u8]) -> Option<u64> {
    MONTHS
        .iter()
        .position(|n| &n[..] == m)
        .map(|i| i as u64 + 1)
}

/// Seconds since the epoch of a calendar date and an `HH:MM:SS` time (days from civil, after
/// Howard Hinnant's algorithm); dates before 1970 are `None`.
fn civil(year: u64, month: u64, day: u64, hms: &[u8]) -> Option<u64> {
    (hms.len() == 8 && hms[2] == b':' && hms[5] == b':').then_some(())?;
    let (h, m, s) = (num(&hms[0..2])?, num(&hms[3..5])?, num(&hms[6..8])?);
    if !(1970..=9999).contains(&year) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_formats_and_garbage() {
        const NOV_6_1994: u64 = 784_111_777;
        let cases: [(&str, Option<u64>); 12] = [
            ("Sun, 06 Nov 1994 08:49:37 GMT", Some(NOV_6_1994)),
            ("Sunday, 06-Nov-94 08:49:37 GMT", Some(NOV_6_1994)),
            ("Sun Nov  6 08:49:37 1994", Some(NOV_6_1994)),
            ("  Sun, 06 Nov 1994 08:49:37 GMT ", Some(NOV_6_1994)),
            ("Thu, 01 Jan 1970 00:00:00 GMT", Some(0)),
            ("Tue, 29 Feb 2000 12:00:00 GMT", Some(951_825_600)),
            ("Sat, 01 Jan 2050 00:00:00 GMT", Some(2_524_608_000)),
            ("0", None),
            ("-1", None),
            ("Sun, 06 Nov 1994 08:49:37 UTC", None),
            ("Sun, 06 Foo 1994 08:49:37 GMT", None),
            ("Sun, 06 Nov 1994 25:49:37 GMT", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_http_date(input.as_bytes()), want, "{input}");
        }
    }
}
