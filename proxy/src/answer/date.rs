//! The `Date` field of the responses the proxy writes itself (RFC 9110 6.6.1: an origin
//! with a clock must send it), formatted once per second per worker.

use std::cell::Cell;

/// `Sun, 06 Nov 1994 08:49:37 GMT`: IMF-fixdate, always 29 bytes.
pub const LEN: usize = 29;

#[derive(Default)]
pub struct DateCache {
    second: Cell<u64>,
    text: Cell<[u8; LEN]>,
}

impl DateCache {
    /// The current date, formatted again only when the second changed.
    pub fn now(&self) -> [u8; LEN] {
        let secs = shared::clock::coarse_unix_secs();
        if secs != self.second.get() || self.text.get()[0] == 0 {
            self.second.set(secs);
            self.text.set(imf_fixdate(secs));
        }
        self.text.get()
    }
}

/// Format seconds since the epoch.
pub fn imf_fixdate(secs: u64) -> [u8; LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
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
        assert_eq!(DateCache::default().now().len(), LEN);
    }
}
