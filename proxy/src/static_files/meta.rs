//! What a response says about a file: its Content-Type (by extension) and its ETag (nginx's
//! form), written into fixed buffers (its dates are `crate::http_date`'s).

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
