//! What a response says about a file: its Content-Type (by extension) and its ETag (nginx's
//! form), written into fixed buffers (its dates are `crate::http_date`'s).

/// Content types by extension (lower-case, sorted: looked up by binary search): nginx's
/// `mime.types` (its `application/octet-stream` lines are the default anyway), with the web's
/// current names where they differ (`js` is `text/javascript`, RFC 9239; `bmp` `image/bmp`)
/// and a few it lacks (`mjs`, `map`, `md`, `csv`, `ttf`, `otf`, `gz`, `tar`, `wav`).
/// Text types carry `charset=utf-8`, as most sites configure (`charset utf-8;`).
pub const TYPES: &[(&str, &str)] = &[
    ("3gp", "video/3gpp"),
    ("3gpp", "video/3gpp"),
    ("7z", "application/x-7z-compressed"),
    ("ai", "application/postscript"),
    ("asf", "video/x-ms-asf"),
    ("asx", "video/x-ms-asf"),
    ("atom", "application/atom+xml"),
    ("avi", "video/x-msvideo"),
    ("avif", "image/avif"),
    ("bmp", "image/bmp"),
    ("cco", "application/x-cocoa"),
    ("crt", "application/x-x509-ca-cert"),
    ("css", "text/css; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("der", "application/x-x509-ca-cert"),
    ("doc", "application/msword"),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
    ("ear", "application/java-archive"),
    ("eot", "application/vnd.ms-fontobject"),
    ("eps", "application/postscript"),
    ("flv", "video/x-flv"),
    ("gif", "image/gif"),
    ("gz", "application/gzip"),
    ("hqx", "application/mac-binhex40"),
    ("htc", "text/x-component; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("html", "text/html; charset=utf-8"),
    ("ico", "image/x-icon"),
    ("jad", "text/vnd.sun.j2me.app-descriptor; charset=utf-8"),
    ("jar", "application/java-archive"),
    ("jardiff", "application/x-java-archive-diff"),
    ("jng", "image/x-jng"),
    ("jnlp", "application/x-java-jnlp-file"),
    ("jpeg", "image/jpeg"),
    ("jpg", "image/jpeg"),
    ("js", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("kar", "audio/midi"),
    ("kml", "application/vnd.google-earth.kml+xml"),
    ("kmz", "application/vnd.google-earth.kmz"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("m4a", "audio/x-m4a"),
    ("m4v", "video/x-m4v"),
    ("map", "application/json"),
    ("md", "text/markdown; charset=utf-8"),
    ("mid", "audio/midi"),
    ("midi", "audio/midi"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("mml", "text/mathml; charset=utf-8"),
    ("mng", "video/x-mng"),
    ("mov", "video/quicktime"),
    ("mp3", "audio/mpeg"),
    ("mp4", "video/mp4"),
    ("mpeg", "video/mpeg"),
    ("mpg", "video/mpeg"),
    ("odg", "application/vnd.oasis.opendocument.graphics"),
    ("odp", "application/vnd.oasis.opendocument.presentation"),
    ("ods", "application/vnd.oasis.opendocument.spreadsheet"),
    ("odt", "application/vnd.oasis.opendocument.text"),
    ("ogg", "audio/ogg"),
    ("otf", "font/otf"),
    ("pdb", "application/x-pilot"),
    ("pdf", "application/pdf"),
    ("pem", "application/x-x509-ca-cert"),
    ("pl", "application/x-perl"),
    ("pm", "application/x-perl"),
    ("png", "image/png"),
    ("ppt", "application/vnd.ms-powerpoint"),
    (
        "pptx",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ),
    ("prc", "application/x-pilot"),
    ("ps", "application/postscript"),
    ("ra", "audio/x-realaudio"),
    ("rar", "application/x-rar-compressed"),
    ("rpm", "application/x-redhat-package-manager"),
    ("rss", "application/rss+xml"),
    ("rtf", "application/rtf"),
    ("run", "application/x-makeself"),
    ("sea", "application/x-sea"),
    ("shtml", "text/html; charset=utf-8"),
    ("sit", "application/x-stuffit"),
    ("svg", "image/svg+xml"),
    ("svgz", "image/svg+xml"),
    ("swf", "application/x-shockwave-flash"),
    ("tar", "application/x-tar"),
    ("tcl", "application/x-tcl"),
    ("tif", "image/tiff"),
    ("tiff", "image/tiff"),
    ("tk", "application/x-tcl"),
    ("ts", "video/mp2t"),
    ("ttf", "font/ttf"),
    ("txt", "text/plain; charset=utf-8"),
    ("war", "application/java-archive"),
    ("wasm", "application/wasm"),
    ("wav", "audio/wav"),
    ("wbmp", "image/vnd.wap.wbmp"),
    ("webm", "video/webm"),
    ("webp", "image/webp"),
    ("wml", "text/vnd.wap.wml; charset=utf-8"),
    ("wmlc", "application/vnd.wap.wmlc"),
    ("wmv", "video/x-ms-wmv"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("xhtml", "application/xhtml+xml"),
    ("xls", "application/vnd.ms-excel"),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    ("xml", "text/xml; charset=utf-8"),
    ("xpi", "application/x-xpinstall"),
    ("xspf", "application/xspf+xml"),
    ("zip", "application/zip"),
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
    // Lower-cased on the stack: no extension in the table is longer.
    let mut lower = [0u8; EXT_MAX];
    let Some(lower) = lower.get_mut(..ext.len()) else {
        return DEFAULT_TYPE;
    };
    for (l, &b) in lower.iter_mut().zip(ext) {
        *l = b.to_ascii_lowercase();
    }
    TYPES
        .binary_search_by(|(e, _)| e.as_bytes().cmp(lower))
        .map_or(DEFAULT_TYPE, |i| TYPES[i].1)
}

/// The longest extension in [`TYPES`] (`jardiff`), rounded up.
pub const EXT_MAX: usize = 8;

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
