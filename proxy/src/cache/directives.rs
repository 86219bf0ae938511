//! Cache-Control (RFC 9111 5.2) and Pragma (5.4), read in one pass over a head's fields.
//!
//! Unknown directives are ignored (5.2.3: "A cache MUST ignore unrecognized cache
//! directives"). Qualified forms (`private="Set-Cookie"`, `no-cache="X"`) are read as their
//! unqualified forms: 5.2.2.4 and 5.2.2.7 allow a cache to do so, and it only stores less.

use shared::http::framing::trim_ows;

/// 1.2.2: "If a cache receives a delta-seconds value greater than the greatest integer it can
/// represent, or if any of its subsequent calculations overflows, the cache MUST consider the
/// value to be 2147483648 (2^31) or the greatest positive integer it can conveniently
/// represent."
pub const DELTA_MAX: u64 = 1 << 31;

/// The directives of a response that decide storing and freshness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseDirectives {
    pub no_store: bool,
    pub no_cache: bool,
    pub private: bool,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    /// Seconds; an invalid value reads as 0 (4.2.1: "the response should be considered
    /// stale"); a repeated one keeps the first (4.2.1: "the first occurrence should be used").
    pub max_age: Option<u64>,
    pub s_maxage: Option<u64>,
    /// RFC 5861 3: seconds past freshness a stale response may be served while it is
    /// revalidated in the background. An invalid value is ignored.
    pub stale_while_revalidate: Option<u64>,
    /// RFC 5861 4: seconds past freshness a stale response may be served when the origin
    /// fails. An invalid value is ignored.
    pub stale_if_error: Option<u64>,
    /// 5.2.2.3: store only if the status code's semantics are understood.
    pub must_understand: bool,
}

/// The directives of a request that decide lookup and storing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestDirectives {
    /// `no-cache`, `max-age=0`, or `Pragma: no-cache` without Cache-Control: the stored
    /// response may not be used without going to the origin.
    pub no_cache: bool,
    pub no_store: bool,
    pub only_if_cached: bool,
    /// 5.2.1.1 `max-age=N` (N > 0): no stored response older than N seconds.
    pub max_age: Option<u64>,
    /// 5.2.1.3 `min-fresh=N`: no stored response fresh for less than N more seconds.
    pub min_fresh: Option<u64>,
    /// 5.2.1.2 `max-stale[=N]`: a stale response is accepted, at most N seconds past its
    /// lifetime (no value: any; [`DELTA_MAX`]). An invalid value is ignored.
    pub max_stale: Option<u64>,
}

/// One directive: its name (lowercase comparison is the caller's) and its value, unquoted.
fn directives(value: &[u8]) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
    QuotedSplit { rest: value }.map(|d| match d.iter().position(|&b| b == b'=') {
        Some(eq) => {
            let v = trim_ows(&d[eq + 1..]);
            let v = v
                .strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(v);
            (trim_ows(&d[..eq]), Some(v))
        }
        None => (d, None),
    })
}

/// Comma-separated elements, commas inside quoted strings kept (`private="a, b"`).
struct QuotedSplit<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for QuotedSplit<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let mut quoted = false;
            let mut end = self.rest.len();
            let mut i = 0;
            while i < self.rest.len() {
                match self.rest[i] {
                    b'\\' if quoted => i += 1,
                    b'"' => quoted = !quoted,
                    b',' if !quoted => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            let item = trim_ows(&self.rest[..end]);
            self.rest = self.rest.get(end + 1..).unwrap_or(&[]);
            if !item.is_empty() {
                return Some(item);
            }
        }
    }
}

/// delta-seconds (1.2.2): digits only; too large saturates at 2^31; invalid is `None`.
fn delta_seconds(v: Option<&[u8]>) -> Option<u64> {
    let v = v?;
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |n, &b| {
        n.saturating_mul(10)
            .saturating_add(u64::from(b - b'0'))
            .min(DELTA_MAX)
    }))
}

fn first(slot: &mut Option<u64>, v: Option<&[u8]>) {
    if slot.is_none() {
        *slot = Some(delta_seconds(v).unwrap_or(0));
    }
}

impl ResponseDirectives {
    /// Add the directives of one Cache-Control field line.
    pub fn add(&mut self, value: &[u8]) {
        for (name, v) in directives(value) {
            let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
            if is("no-store") {
                self.no_store = true;
            } else if is("no-cache") {
                self.no_cache = true;
            } else if is("private") {
                self.private = true;
            } else if is("public") {
                self.public = true;
            } else if is("must-revalidate") {
                self.must_revalidate = true;
            } else if is("proxy-revalidate") {
                self.proxy_revalidate = true;
            } else if is("max-age") {
                first(&mut self.max_age, v);
            } else if is("s-maxage") {
                first(&mut self.s_maxage, v);
            } else if is("stale-while-revalidate") {
                self.stale_while_revalidate = self.stale_while_revalidate.or(delta_seconds(v));
            } else if is("stale-if-error") {
                self.stale_if_error = self.stale_if_error.or(delta_seconds(v));
            } else if is("must-understand") {
                self.must_understand = true;
            }
        }
    }

    /// 4.2.4: "A cache MUST NOT generate a stale response if it is prohibited by an explicit
    /// in-protocol directive (e.g., by a no-cache response directive, a must-revalidate
    /// cache-response-directive, or an applicable s-maxage or proxy-revalidate
    /// cache-response-directive; see Section 5.2.2)."
    pub fn forbids_stale(&self) -> bool {
        self.no_cache || self.must_revalidate || self.proxy_revalidate || self.s_maxage.is_some()
    }
}

impl RequestDirectives {
    /// Read the request's Cache-Control and Pragma fields.
    pub fn scan(headers: &[httparse::Header<'_>]) -> RequestDirectives {
        let mut d = RequestDirectives::default();
        let mut has_cache_control = false;
        let mut pragma_no_cache = false;
        for h in headers {
            if h.name.eq_ignore_ascii_case("cache-control") {
                has_cache_control = true;
                for (name, v) in directives(h.value) {
                    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
                    if is("no-cache") {
                        d.no_cache = true;
                    } else if is("no-store") {
                        d.no_store = true;
                    } else if is("only-if-cached") {
                        d.only_if_cached = true;
                    } else if is("max-age") {
                        match delta_seconds(v).unwrap_or(0) {
                            // 5.2.1.1: max-age=0 accepts no stored response without
                            // validation (an invalid value reads as 0, as a response's does).
                            0 => d.no_cache = true,
                            n => d.max_age = Some(d.max_age.map_or(n, |m| m.min(n))),
                        }
                    } else if is("min-fresh") {
                        if let Some(n) = delta_seconds(v) {
                            d.min_fresh = Some(d.min_fresh.map_or(n, |m| m.max(n)));
                        }
                    } else if is("max-stale") {
                        let n = match v {
                            None => Some(DELTA_MAX),
                            v => delta_seconds(v),
                        };
                        if let Some(n) = n {
                            d.max_stale = Some(d.max_stale.map_or(n, |m| m.min(n)));
                        }
                    }
                }
            } else if h.name.eq_ignore_ascii_case("pragma") {
                pragma_no_cache |= directives(h.value).any(|(n, _)| n == b"no-cache");
            }
        }
        // 5.4: "When the Cache-Control header field is also present and understood in a
        // request, Pragma is ignored." Without it, `Pragma: no-cache` means no-cache.
        d.no_cache |= pragma_no_cache && !has_cache_control;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(lines: &[&str]) -> ResponseDirectives {
        let mut d = ResponseDirectives::default();
        for l in lines {
            d.add(l.as_bytes());
        }
        d
    }

    #[test]
    fn response_directives_table() {
        let none = ResponseDirectives::default();
        let cases: [(&[&str], ResponseDirectives); 10] = [
            (
                &["max-age=60"],
                ResponseDirectives {
                    max_age: Some(60),
                    ..none
                },
            ),
            (
                &["Max-Age=60, PUBLIC"],
                ResponseDirectives {
                    max_age: Some(60),
                    public: true,
                    ..none
                },
            ),
            (
                &["max-age=\"30\""],
                ResponseDirectives {
                    max_age: Some(30),
                    ..none
                },
            ),
            (
                &["max-age=60", "max-age=10"],
                ResponseDirectives {
                    max_age: Some(60),
                    ..none
                },
            ),
            (
                &["max-age=abc"],
                ResponseDirectives {
                    max_age: Some(0),
                    ..none
                },
            ),
            (
                &["max-age=99999999999999999999"],
                ResponseDirectives {
                    max_age: Some(DELTA_MAX),
                    ..none
                },
            ),
            (
                &["s-maxage=5, max-age=60"],
                ResponseDirectives {
                    s_maxage: Some(5),
                    max_age: Some(60),
                    ..none
                },
            ),
            (
                &["private=\"Set-Cookie, X\", max-age=5"],
                ResponseDirectives {
                    private: true,
                    max_age: Some(5),
                    ..none
                },
            ),
            (
                &[" , no-store,,no-cache ,"],
                ResponseDirectives {
                    no_store: true,
                    no_cache: true,
                    ..none
                },
            ),
            (
                &["must-revalidate, proxy-revalidate, x-ext=\"a,b\""],
                ResponseDirectives {
                    must_revalidate: true,
                    proxy_revalidate: true,
                    ..none
                },
            ),
        ];
        for (lines, want) in cases {
            assert_eq!(resp(lines), want, "{lines:?}");
        }
        assert!(resp(&["must-revalidate"]).forbids_stale());
        assert!(resp(&["s-maxage=1"]).forbids_stale());
        assert!(!resp(&["max-age=1, public"]).forbids_stale());
    }

    #[test]
    fn request_directives_table() {
        let h = |n: &'static str, v: &'static str| httparse::Header {
            name: n,
            value: v.as_bytes(),
        };
        let none = RequestDirectives::default();
        let nc = RequestDirectives {
            no_cache: true,
            ..none
        };
        let max5 = RequestDirectives {
            max_age: Some(5),
            ..none
        };
        let cases: Vec<(Vec<httparse::Header>, RequestDirectives)> = vec![
            (vec![], none),
            (vec![h("Cache-Control", "no-cache")], nc),
            (vec![h("cache-control", "max-age=0")], nc),
            (vec![h("Cache-Control", "max-age=5")], max5),
            (
                vec![h(
                    "Cache-Control",
                    "max-age=9, max-age=5, min-fresh=x, min-fresh=3",
                )],
                RequestDirectives {
                    min_fresh: Some(3),
                    ..max5
                },
            ),
            (
                vec![
                    h("Cache-Control", "max-stale"),
                    h("Cache-Control", "max-stale=7"),
                ],
                RequestDirectives {
                    max_stale: Some(7),
                    ..none
                },
            ),
            (vec![h("Cache-Control", "max-stale=-1")], none),
            (
                vec![h("Cache-Control", "MAX-STALE")],
                RequestDirectives {
                    max_stale: Some(DELTA_MAX),
                    ..none
                },
            ),
            (vec![h("Pragma", "no-cache")], nc),
            // 5.4: Pragma is ignored when Cache-Control is present.
            (
                vec![h("Pragma", "no-cache"), h("Cache-Control", "max-age=5")],
                max5,
            ),
            (
                vec![h("Cache-Control", "no-store")],
                RequestDirectives {
                    no_store: true,
                    ..none
                },
            ),
            (
                vec![h("Cache-Control", "only-if-cached")],
                RequestDirectives {
                    only_if_cached: true,
                    ..none
                },
            ),
        ];
        for (headers, want) in cases {
            assert_eq!(RequestDirectives::scan(&headers), want, "{headers:?}");
        }
    }
}
