//! Files the user names, read whole but bounded: a device or an endless pipe given by
//! mistake (`/dev/zero` as a body, a CA file or a config) is refused with one line instead of
//! read until memory runs out; pipes and process substitutions still work.

use std::io::{self, Read};
use std::path::Path;

/// The most a certificate, key or CA file, or a config file, may hold: 16 MiB (a system's
/// whole CA bundle is about 200 KB).
pub const MAX_SMALL_FILE: u64 = 16 << 20;

/// The whole of `path`, refused beyond `limit` bytes (before reading, when it is a regular
/// file that says so).
pub fn read_capped(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    if size > limit {
        return Err(too_large(limit));
    }
    let mut data = Vec::with_capacity(size as usize);
    f.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(data)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_capped_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read_capped(path, limit)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

fn too_large(limit: u64) -> io::Error {
    io::Error::other(format!("larger than {} MiB, the limit", limit >> 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_limit() {
        let dir = std::env::temp_dir().join(format!("shared-bounded-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ten");
        std::fs::write(&f, b"0123456789").unwrap();
        assert_eq!(read_capped(&f, 10).unwrap(), b"0123456789");
        let e = read_capped(&f, 9).unwrap_err().to_string();
        assert!(e.contains("the limit"), "{e}");
        // A device that never ends: refused once the limit is passed.
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("1 MiB"), "{e}");
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_capped_text(&f, 10).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
