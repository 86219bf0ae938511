//! HTTP-date (RFC 9110 5.6.7): the IMF-fixdate the proxy writes (`Date` of its own answers,
//! `Last-Modified` of static files, the access log's time), the `Date` value formatted once per
//! second per thread, and reading a date a header carries.
//!
//! "A recipient that parses a timestamp value in an HTTP field MUST accept all three HTTP-date
//! formats": IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form
//! (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`). Anything else is
//! `None`; for `Expires` the caller reads that as "already expired" (RFC 9111 5.3).

use std::cell::Cell;

/// `Sun, 06 Nov 1994 08:49:37 GMT`: IMF-fixdate, always 29 bytes.
pub const LEN: usize = 29;

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

thread_local! {
    /// The second last formatted and its text (each worker is a thread).
    static NOW: Cell<(u64, [u8; LEN])> = const { Cell::new((u64::MAX, [0; LEN])) };
}

/// The current date, formatted again only when the second changed (the coarse clock: a new
/// second shows at most one tick late).
pub fn now() -> [u8; LEN] {
    let secs = shared::clock::coarse_unix_secs();
    NOW.with(|c| match c.get() {
        (s, text) if s == secs => text,
        _ => {
            let text = imf_fixdate(secs);
            c.set((secs, text));
            text
        }
    })
}

/// Format seconds since the epoch.
pub fn imf_fixdate(secs: u64) -> [u8; LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem / 60 % 60, rem % 60);
    let (year, month, day) = shared::civil::civil_from_days(days as i64);
    let (year, month, day) = (year as u64, month as usize, day as u64);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    two(&mut out[5..7], day);
    out[8..11].copy_from_slice(MONTHS[month - 1]);
    two(&mut out[12..14], year / 100 % 100);
    two(&mut out[14..16], year % 100);
    two(&mut out[17..19], h);
    two(&mut out[20..22], m);
    two(&mut out[23..25], s);
    out
}

fn two(dst: &mut [u8], n: u64) {
    dst[0] = b'0' + (n / 10 % 10) as u8;
    dst[1] = b'0' + (n % 10) as u8;
}

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

/// Seconds since the epoch of a calendar date and an `HH:MM:SS` time; dates before 1970 and
/// after 9999 are `None`.
fn civil(year: u64, month: u64, day: u64, hms: &[u8]) -> Option<u64> {
    (hms.len() == 8 && hms[2] == b':' && hms[5] == b':').then_some(())?;
    let (h, m, s) = (num(&hms[0..2])?, num(&hms[3..5])?, num(&hms[6..8])?);
    if !(1970..=9999).contains(&year) || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let days = shared::civil::days_from_civil(year as i64, month as i64, day as i64);
    Some(u64::try_from(days).ok()? * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_dates() {
        for (secs, want) in [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (1_798_761_599, "Thu, 31 Dec 2026 23:59:59 GMT"),
            (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 GMT"),
        ] {
            assert_eq!(std::str::from_utf8(&imf_fixdate(secs)).unwrap(), want);
        }
        let t = now();
        assert!(parse_http_date(&t).is_some(), "{t:?}");
    }

    #[test]
    fn what_is_written_reads_back() {
        for secs in [0, 784_111_777, 951_782_400, 4_102_444_799, 253_402_300_799] {
            assert_eq!(parse_http_date(&imf_fixdate(secs)), Some(secs), "{secs}");
        }
    }

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
