//! Targeted cache control (RFC 9213): response fields such as `CDN-Cache-Control` that speak
//! to one class of cache and, when valid, replace `Cache-Control` and `Expires` for it.
//!
//! A targeted field is a Structured Field Dictionary (RFC 8941 3.2). A field that does not
//! parse as one, or whose `max-age`/`s-maxage` is not a non-negative Integer, is ignored as a
//! whole (RFC 9213 2.1: "... MUST ... use the first (in target list order) field with a valid,
//! non-empty value"), and the cache falls back on the next name, then on `Cache-Control`.

use super::directives::{ResponseDirectives, DELTA_MAX};
use shared::http::framing::trim_ows;

/// The directives of the first field of `names` (in their order) present in `headers` with a
/// valid, non-empty value; its lines are one dictionary. `None`: none is, and Cache-Control
/// and Expires decide.
pub fn directives(
    headers: &[httparse::Header<'_>],
    names: &[String],
) -> Option<ResponseDirectives> {
    names.iter().find_map(|name| {
        let mut d = ResponseDirectives::default();
        let mut present = false;
        for h in headers.iter().filter(|h| h.name.eq_ignore_ascii_case(name)) {
            let v = trim_ows(h.value);
            if v.is_empty() {
                continue;
            }
            present = true;
            dictionary(v, &mut d)?;
        }
        present.then_some(d)
    })
}

/// The value of one dictionary member, reduced to what a cache directive needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Integer(i64),
    Boolean(bool),
    /// A String, Token, Decimal, Byte Sequence, Date or Inner List: valid, of no use here.
    Other,
}

/// A parser over the bytes of one field line.
struct Sf<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Sf<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += usize::from(hit);
        hit
    }

    fn skip(&mut self, set: &[u8]) {
        while self.peek().is_some_and(|c| set.contains(&c)) {
            self.i += 1;
        }
    }

    /// 4.2.3.3: lcalpha or `*`, then lcalpha, DIGIT, `_`, `-`, `.`, `*`.
    fn key(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        match self.peek()? {
            b'a'..=b'z' | b'*' => self.i += 1,
            _ => return None,
        }
        self.skip(b"abcdefghijklmnopqrstuvwxyz0123456789_-.*");
        let b: &'a [u8] = self.b;
        Some(&b[start..self.i])
    }

    /// 4.2.3.1 (a bare item), 4.2.4-4.2.8.
    fn bare(&mut self) -> Option<Item> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => {
                self.i += 1;
                loop {
                    match self.peek()? {
                        b'\\' => {
                            self.i += 1;
                            if !matches!(self.peek()?, b'"' | b'\\') {
                                return None;
                            }
                        }
                        b'"' => break,
                        0x20..=0x7e => {}
                        _ => return None,
                    }
                    self.i += 1;
                }
                self.i += 1;
                Some(Item::Other)
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'*' => {
                self.i += 1;
                self.skip(b"!#$%&'*+-.^_`|~:/0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
                Some(Item::Other)
            }
            b':' => {
                self.i += 1;
                self.skip(b"+/=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
                self.eat(b':').then_some(Item::Other)
            }
            b'?' => {
                self.i += 1;
                let v = match self.peek()? {
                    b'0' => false,
                    b'1' => true,
                    _ => return None,
                };
                self.i += 1;
                Some(Item::Boolean(v))
            }
            b'@' => {
                self.i += 1;
                matches!(self.number()?, Item::Integer(_)).then_some(Item::Other)
            }
            _ => None,
        }
    }

    /// 4.2.4: an Integer (at most 15 digits) or a Decimal (at most 12 + 3 digits).
    fn number(&mut self) -> Option<Item> {
        let negative = self.eat(b'-');
        let start = self.i;
        self.skip(b"0123456789");
        let int = &self.b[start..self.i];
        if int.is_empty() {
            return None;
        }
        if self.eat(b'.') {
            let frac = self.i;
            self.skip(b"0123456789");
            let n = self.i - frac;
            return (int.len() <= 12 && (1..=3).contains(&n)).then_some(Item::Other);
        }
        if int.len() > 15 {
            return None;
        }
        let v = int.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
        Some(Item::Integer(if negative { -v } else { v }))
    }

    /// 4.2.3.2: `;key[=bare]` repeated.
    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip(b" ");
            self.key()?;
            if self.eat(b'=') {
                self.bare()?;
            }
        }
        Some(())
    }

    /// 4.2.1.2: `(item item ...)` with parameters.
    fn inner_list(&mut self) -> Option<Item> {
        self.i += 1;
        loop {
            self.skip(b" ");
            if self.eat(b')') {
                self.parameters()?;
                return Some(Item::Other);
            }
            self.bare()?;
            self.parameters()?;
            if !matches!(self.peek()?, b' ' | b')') {
                return None;
            }
        }
    }
}

/// 4.2.2: parse `line` as a dictionary, applying the cache directives it holds to `d`.
/// `None`: not a valid dictionary, or a directive of the wrong type.
fn dictionary(line: &[u8], d: &mut ResponseDirectives) -> Option<()> {
    let mut p = Sf { b: line, i: 0 };
    loop {
        let key = p.key()?;
        let value = if p.eat(b'=') {
            if p.peek()? == b'(' {
                p.inner_list()?
            } else {
                p.bare()?
            }
        } else {
            Item::Boolean(true)
        };
        p.parameters()?;
        apply(d, key, value)?;
        p.skip(b" \t");
        if p.peek().is_none() {
            return Some(());
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip(b" \t");
        // A trailing comma is an error (4.2.2).
        p.peek()?;
    }
}

/// Apply one member to `d`. A key seen again overwrites what it said before (RFC 8941 4.2.2:
/// "If dictionary already contains a key this_key ..., overwrite its value"), the field's
/// lines being one dictionary: unlike Cache-Control, whose first max-age this cache keeps.
fn apply(d: &mut ResponseDirectives, key: &[u8], value: Item) -> Option<()> {
    let seconds = |v: Item| match v {
        Item::Integer(n) if n >= 0 => Some((n as u64).min(DELTA_MAX)),
        _ => None,
    };
    // A flag is set by `?1` (or a bare key); `?0` says it is absent. Any other value (a field
    // name list for private or no-cache) reads as the unqualified form, as in Cache-Control.
    let set = value != Item::Boolean(false);
    match key {
        b"max-age" => d.max_age = Some(seconds(value)?),
        b"s-maxage" => d.s_maxage = Some(seconds(value)?),
        b"stale-while-revalidate" => d.stale_while_revalidate = Some(seconds(value)?),
        b"stale-if-error" => d.stale_if_error = Some(seconds(value)?),
        b"no-store" => d.no_store = set,
        b"no-cache" => d.no_cache = set,
        b"private" => d.private = set,
        b"public" => d.public = set,
        b"must-revalidate" => d.must_revalidate = set,
        b"proxy-revalidate" => d.proxy_revalidate = set,
        b"must-understand" => d.must_understand = set,
        _ => {}
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &'static str, v: &'static str) -> httparse::Header<'static> {
        httparse::Header {
            name,
            value: v.as_bytes(),
        }
    }

    #[test]
    fn valid_dictionaries_and_what_they_say() {
        let cdn = ["CDN-Cache-Control".to_string()];
        let none = ResponseDirectives::default();
        let cases: [(&[httparse::Header<'static>], Option<ResponseDirectives>); 18] = [
            (&[], None),
            (&[h("CDN-Cache-Control", "")], None),
            (
                &[h("cdn-cache-control", "max-age=3600")],
                Some(ResponseDirectives {
                    max_age: Some(3600),
                    ..none
                }),
            ),
            (
                &[h(
                    "CDN-Cache-Control",
                    "foobar, max-age=60;a=1, x=(1 \"b\" tok);p, y=?0, z=1.5, w=:aGk=:",
                )],
                Some(ResponseDirectives {
                    max_age: Some(60),
                    ..none
                }),
            ),
            (
                &[h("CDN-Cache-Control", "max-age=99999999999")],
                Some(ResponseDirectives {
                    max_age: Some(DELTA_MAX),
                    ..none
                }),
            ),
            (
                &[
                    h("CDN-Cache-Control", "no-store"),
                    h("CDN-Cache-Control", "private=?1"),
                ],
                Some(ResponseDirectives {
                    no_store: true,
                    private: true,
                    ..none
                }),
            ),
            (
                &[h("CDN-Cache-Control", "no-cache=?0, s-maxage=5")],
                Some(ResponseDirectives {
                    s_maxage: Some(5),
                    ..none
                }),
            ),
            // RFC 8941 4.2.2: a key seen again overwrites its value, across field lines too.
            (
                &[h("CDN-Cache-Control", "max-age=60, max-age=0")],
                Some(ResponseDirectives {
                    max_age: Some(0),
                    ..none
                }),
            ),
            (
                &[
                    h("CDN-Cache-Control", "max-age=60, s-maxage=5"),
                    h("CDN-Cache-Control", "max-age=0, s-maxage=7"),
                ],
                Some(ResponseDirectives {
                    max_age: Some(0),
                    s_maxage: Some(7),
                    ..none
                }),
            ),
            (
                &[h(
                    "CDN-Cache-Control",
                    "no-store, private, no-store=?0, stale-if-error=9, stale-if-error=3",
                )],
                Some(ResponseDirectives {
                    private: true,
                    stale_if_error: Some(3),
                    ..none
                }),
            ),
            (
                &[
                    h("CDN-Cache-Control", "must-revalidate=?0"),
                    h("CDN-Cache-Control", "must-revalidate"),
                ],
                Some(ResponseDirectives {
                    must_revalidate: true,
                    ..none
                }),
            ),
            // Not a dictionary, or max-age of the wrong type: ignored as a whole.
            (&[h("CDN-Cache-Control", "max-age=10000, &&&&&")], None),
            (&[h("CDN-Cache-Control", "max-age=\"10000\"")], None),
            (&[h("CDN-Cache-Control", "max-age =100")], None),
            (&[h("CDN-Cache-Control", "max-age= 100")], None),
            (&[h("CDN-Cache-Control", "MaX-aGe=100")], None),
            (&[h("CDN-Cache-Control", "max-age=-1")], None),
            (&[h("CDN-Cache-Control", "max-age=5,")], None),
        ];
        for (headers, want) in cases {
            assert_eq!(directives(headers, &cdn), want, "{headers:?}");
        }
    }

    #[test]
    fn the_first_valid_name_of_the_list_wins() {
        let names = [
            "Proxy-Cache-Control".to_string(),
            "CDN-Cache-Control".to_string(),
        ];
        let headers = [
            h("CDN-Cache-Control", "max-age=1"),
            h("Proxy-Cache-Control", "max-age=2"),
        ];
        assert_eq!(directives(&headers, &names).unwrap().max_age, Some(2));
        let invalid_first = [
            h("CDN-Cache-Control", "max-age=1"),
            h("Proxy-Cache-Control", "max-age=\"2\""),
        ];
        assert_eq!(directives(&invalid_first, &names).unwrap().max_age, Some(1));
        assert_eq!(directives(&headers, &[]), None);
    }
}
