//! What a response says about a file: its Content-Type (by extension), its ETag (nginx's
//! form) and its dates (RFC 9110 5.6.7 IMF-fixdate), all written into fixed buffers.

use shared::civil::{civil_from_days, days_from_civil};

/// Content types by extension (lower-case), nginx's `mime.types` for the common ones.
/// Text types carry `charset=utf-8`, as most sites configure (`charset utf-8;`).
const TYPES: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "text/xml; charset=utf-8"),
    ("svg", "image/svg+xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("ico", "image/x-icon"),
    ("bmp", "image/bmp"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("wav", "audio/wav"),
    ("rss", "application/rss+xml"),
    ("atom", "application/atom+xml"),
];

/// For anything else (nginx's `default_type application/octet-stream`).
pub const DEFAULT_TYPE: &str = "application/octet-stream";

/// The Content-Type of a file by its name's extension (case-insensitive).
pub fn content_type(path: &[u8]) -> &'static str {
    let name = match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[i + 1..],
        None => path,
    };
    let Some(dot) = name.iter().rposition(|&b| b == b'.') else {
        return DEFAULT_TYPE;
    };
    let ext = &name[dot + 1..];
    TYPES
        .iter()
        .find(|(e, _)| e.as_bytes().eq_ignore_ascii_case(ext))
        .map_or(DEFAULT_TYPE, |(_, t)| t)
}

/// A short ASCII text kept inline (an ETag, a date).
#[derive(Clone, Copy)]
pub struct Text<const N: usize> {
    buf: [u8; N],
    len: u8,
}

impl<const N: usize> Text<N> {
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }

    fn push(&mut self, b: u8) {
        self.buf[self.len as usize] = b;
        self.len += 1;
    }

    fn push_hex(&mut self, v: u64) {
        let digits = if v == 0 {
            1
        } else {
            16 - v.leading_zeros() as usize / 4
        };
        for i in (0..digits).rev() {
            self.push(b"0123456789abcdef"[(v >> (i * 4)) as usize & 15]);
        }
    }
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Text {
            buf: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> std::fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

/// `"<mtime seconds hex>-<size hex>"`, with the quotes: nginx's ETag.
pub type ETag = Text<40>;

pub fn etag(mtime: i64, size: u64) -> ETag {
    let mut t = ETag::default();
    t.push(b'"');
    t.push_hex(mtime.max(0) as u64);
    t.push(b'-');
    t.push_hex(size);
    t.push(b'"');
    t
}

/// An IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT` (29 bytes).
pub type HttpDate = Text<29>;

const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// Seconds since the epoch as an IMF-fixdate (times before 1970 are written as 1970).
pub fn http_date(secs: i64) -> HttpDate {
    let secs = secs.max(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let mut t = HttpDate::default();
    let two = |t: &mut HttpDate, v: i64| {
        t.push(b'0' + (v / 10 % 10) as u8);
        t.push(b'0' + (v % 10) as u8);
    };
    DAYS[(days % 7) as usize].iter().for_each(|&b| t.push(b));
    t.push(b',');
    t.push(b' ');
    two(&mut t, d);
    t.push(b' ');
    MONTHS[(m - 1) as usize].iter().for_each(|&b| t.push(b));
    t.push(b' ');
    two(&mut t, y / 100);
    two(&mut t, y);
    t.push(b' ');
    two(&mut t, rem / 3600);
    t.push(b':');
    two(&mut t, rem / 60 % 60);
    t.push(b':');
    two(&mut t, rem % 60);
    b" GMT".iter().for_each(|&b| t.push(b));
    t
}

/// Parse an IMF-fixdate into seconds since the epoch. The obsolete RFC 850 and asctime forms
/// (RFC 9110 5.6.7) are not read: a date we cannot read is ignored, which only costs a 200
/// where a 304 was possible.
pub fn parse_http_date(s: &[u8]) -> Option<i64> {
    let s = s.trim_ascii();
    if s.len() != 29 || &s[3..5] != b", " || &s[25..] != b" GMT" {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        s[r].iter().try_fold(0i64, |acc, &b| {
            b.is_ascii_digit().then(|| acc * 10 + i64::from(b - b'0'))
        })
    };
    let day = num(5..7)?;
    let month = MONTHS.iter().position(|m| &s[8..11] == *m)? as i64 + 1;
    let year = num(12..16)?;
    let (h, mi, sec) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if s[7] != b' ' || s[11] != b' ' || s[16] != b' ' || s[19] != b':' || s[22] != b':' {
        return None;
    }
    if !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + mi * 60 + sec)
}
