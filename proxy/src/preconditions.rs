//! Preconditions (RFC 9110 13): what a GET or HEAD of a representation gets from its
//! validators and the request's conditional fields, evaluated in the order of 13.2.2. One
//! plain function for the file server and the cache's hits, so the two cannot disagree.
//!
//! 1. `If-Match`: none of its tags matches the ETag strongly (`*` matches any current
//!    representation): 412.
//! 2. Else `If-Unmodified-Since` (a valid date, and the representation has a Last-Modified):
//!    modified after it: 412.
//! 3. `If-None-Match`: a tag matches weakly (or `*`): 304.
//! 4. Else `If-Modified-Since` (as in 2): not modified since: 304. A stored response without
//!    a Last-Modified is compared by its Date instead (RFC 9111 4.3.2: a cache SHOULD answer
//!    304 when "no Last-Modified field is present in the selected stored response, but it has
//!    a Date field value that is earlier than or equal to the conditional timestamp"); that
//!    is for If-Modified-Since alone, and for a cache's stored responses alone.
//!
//! Entity-tag lists are read by their grammar (8.8.3: a tag is quoted and may hold a comma);
//! a malformed list matches nothing. A list field sent on several lines is one list (5.3):
//! its value here may be the head's bytes from the first line's value to the last's, the
//! lines of other fields between them skipped by name ([`field_values`]; the file server
//! hands them so), or the parsed fields of the head ([`Conditions::of`], the cache's: its
//! callers hold the fields, not the buffer). The dates are first-line-only everywhere (a date
//! is no list).

use crate::http_date::parse_http_date;

/// The request's conditional fields (their values as received).
#[derive(Debug, Clone, Copy, Default)]
pub struct Conditions<'a> {
    pub if_match: Option<&'a [u8]>,
    pub if_unmodified_since: Option<&'a [u8]>,
    pub if_none_match: Option<&'a [u8]>,
    pub if_modified_since: Option<&'a [u8]>,
    /// The head's parsed fields, when the lists are read from them: then a tag field's lines
    /// are every field of its name here, and its slot above only says that it was sent.
    pub fields: &'a [httparse::Header<'a>],
}

impl<'a> Conditions<'a> {
    /// The fields of a parsed head.
    pub fn of(headers: &'a [httparse::Header<'a>]) -> Conditions<'a> {
        let mut c = Conditions::default();
        for h in headers {
            c.take(h);
        }
        c.fields = headers;
        c
    }

    /// Take field `h` if it is a conditional one; whether it was. A date sent twice is a list
    /// of dates, no valid date: ignored (RFC 9110 13.1.3, 13.1.4; an empty value parses as
    /// none). A tag field's first line stands for all of them (see `fields`).
    pub fn take(&mut self, h: &httparse::Header<'a>) -> bool {
        let date = matches!(h.name.len(), 17 | 19);
        let Some(slot) = self.slot(h.name) else {
            return false;
        };
        match slot {
            None => *slot = Some(h.value),
            Some(_) if date => *slot = Some(b""),
            Some(_) => {}
        }
        true
    }

    /// The values of tag field `name`, whose first value is `list`: from the parsed fields if
    /// these conditions hold them, else from `list` (see [`field_values`]).
    fn values(&self, list: &'a [u8], name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        let (bytes, fields) = match self.fields {
            [] => (Some(list), &[][..]),
            fields => (None, fields),
        };
        let parsed = fields
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.trim_ascii());
        bytes
            .into_iter()
            .flat_map(move |b| field_values(b, name))
            .chain(parsed)
    }

    /// Where the value of field `name` goes, if it is a conditional one.
    fn slot(&mut self, name: &str) -> Option<&mut Option<&'a [u8]>> {
        let eq = |n: &str| name.eq_ignore_ascii_case(n);
        match name.len() {
            8 if eq("if-match") => Some(&mut self.if_match),
            13 if eq("if-none-match") => Some(&mut self.if_none_match),
            17 if eq("if-modified-since") => Some(&mut self.if_modified_since),
            19 if eq("if-unmodified-since") => Some(&mut self.if_unmodified_since),
            _ => None,
        }
    }

    pub fn any(&self) -> bool {
        self.if_match.is_some()
            || self.if_unmodified_since.is_some()
            || self.if_none_match.is_some()
            || self.if_modified_since.is_some()
    }
}

/// What identifies the representation: its ETag (with quotes, `W/` if weak) and its
/// Last-Modified in seconds since the epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Validators<'a> {
    pub etag: Option<&'a [u8]>,
    pub last_modified: Option<u64>,
    /// A stored response's Date (seconds since the epoch), which `If-Modified-Since` is
    /// compared with when there is no Last-Modified (RFC 9111 4.3.2); `None` for the file
    /// server, whose files always have one.
    pub stored_date: Option<u64>,
}

/// The outcome for a GET or HEAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Serve the representation (a `Range` may still apply).
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Evaluate `c` against `v` for a GET or HEAD (RFC 9110 13.2.2).
pub fn evaluate(c: &Conditions<'_>, v: &Validators<'_>) -> Outcome {
    if let Some(list) = c.if_match {
        if !list_matches(c.values(list, "if-match"), v.etag, strong) {
            return Outcome::Failed;
        }
    } else if let Some(date) = c.if_unmodified_since.and_then(parse_http_date) {
        if v.last_modified.is_some_and(|lm| lm > date) {
            return Outcome::Failed;
        }
    }
    if let Some(list) = c.if_none_match {
        if list_matches(c.values(list, "if-none-match"), v.etag, weak) {
            return Outcome::NotModified;
        }
    } else if let Some(date) = c.if_modified_since.and_then(parse_http_date) {
        if v.last_modified.or(v.stored_date).is_some_and(|t| t <= date) {
            return Outcome::NotModified;
        }
    }
    Outcome::Proceed
}

/// The values of field `name`'s lines in `list`: one value, or the bytes of a head from the
/// first line's value to the last's (a repeated field), whose other lines are `name: value`
/// (the head was parsed: every line is a field line, none folded, no name holds a colon), of
/// `name` or of fields in between. A lone value holds no LF: one scan finds that.
pub fn field_values<'a>(list: &'a [u8], name: &'a str) -> impl Iterator<Item = &'a [u8]> {
    let mut lines = list.split(|&b| b == b'\n');
    let first = lines.next();
    let more = lines.filter_map(move |line| {
        let colon = line.iter().position(|&b| b == b':')?;
        let named = line[..colon].eq_ignore_ascii_case(name.as_bytes());
        named.then(|| &line[colon + 1..])
    });
    first.into_iter().chain(more).map(<[u8]>::trim_ascii)
}

/// Whether the list made of `values` (`*` alone, or entity-tags) matches `etag` by `same`.
/// `*` matches any current representation, with or without an ETag (13.1.1, 13.1.2).
fn list_matches<'a>(
    mut values: impl Iterator<Item = &'a [u8]>,
    etag: Option<&[u8]>,
    same: fn(Tag, Tag) -> bool,
) -> bool {
    let Some(first) = values.next() else {
        return false;
    };
    let mut rest = values.peekable();
    if first == b"*" && rest.peek().is_none() {
        return true;
    }
    let Some(mine) = etag.and_then(|e| Tag::parse(e.trim_ascii()).map(|(t, _)| t)) else {
        return false;
    };
    // Each line in turn, as the one comma-separated list they make: a tag that matches
    // before anything malformed counts.
    for value in std::iter::once(first).chain(rest) {
        match tags_match(value, mine, same) {
            Some(false) => {}
            Some(true) => return true,
            None => return false,
        }
    }
    false
}

/// Whether a tag of `list` (one line's) matches `mine`; `None`: malformed before any did.
fn tags_match(list: &[u8], mine: Tag, same: fn(Tag, Tag) -> bool) -> Option<bool> {
    let mut rest = list;
    loop {
        rest = rest.trim_ascii_start();
        match rest.first() {
            None => return Some(false),
            Some(b',') => rest = &rest[1..],
            Some(_) => {
                let (t, after) = Tag::parse(rest)?;
                if same(t, mine) {
                    return Some(true);
                }
                rest = after;
            }
        }
    }
}

/// An entity-tag: weak or not, and its opaque part with the quotes.
#[derive(Debug, Clone, Copy)]
struct Tag<'a> {
    weak: bool,
    opaque: &'a [u8],
}

impl<'a> Tag<'a> {
    /// The tag at the start of `s` and what follows it.
    fn parse(s: &'a [u8]) -> Option<(Tag<'a>, &'a [u8])> {
        let (weak, s) = match s.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        if s.first() != Some(&b'"') {
            return None;
        }
        let close = s[1..].iter().position(|&b| b == b'"')? + 1;
        Some((
            Tag {
                weak,
                opaque: &s[..=close],
            },
            &s[close + 1..],
        ))
    }
}

/// 8.8.3.2: "Strong comparison: two entity tags are equivalent if both are not weak and
/// their opaque-tags match character-by-character."
fn strong(a: Tag, b: Tag) -> bool {
    !a.weak && !b.weak && a.opaque == b.opaque
}

/// 8.8.3.2: "Weak comparison: two entity tags are equivalent if their opaque-tags match
/// character-by-character, regardless of either or both being tagged as "weak"."
fn weak(a: Tag, b: Tag) -> bool {
    a.opaque == b.opaque
}

#[cfg(test)]
mod tests {
    use super::*;

    const LM: u64 = 1_700_000_000; // Tue, 14 Nov 2023 22:13:20 GMT
    const AT: &[u8] = b"Tue, 14 Nov 2023 22:13:20 GMT";
    const BEFORE: &[u8] = b"Tue, 14 Nov 2023 22:13:19 GMT";

    fn eval(c: Conditions<'_>, etag: Option<&str>) -> Outcome {
        let v = Validators {
            etag: etag.map(str::as_bytes),
            last_modified: Some(LM),
            stored_date: None,
        };
        evaluate(&c, &v)
    }

    fn if_match(v: &str) -> Conditions<'_> {
        Conditions {
            if_match: Some(v.as_bytes()),
            ..Conditions::default()
        }
    }

    fn if_none_match(v: &str) -> Conditions<'_> {
        Conditions {
            if_none_match: Some(v.as_bytes()),
            ..Conditions::default()
        }
    }

    #[test]
    fn the_order_and_the_comparisons_of_rfc_9110() {
        use Outcome::*;
        let tag = Some("\"v1\"");
        let cases = [
            (Conditions::default(), tag, Proceed),
            (if_match("\"v1\""), tag, Proceed),
            (if_match(" \"x\" ,\"v1\" "), tag, Proceed),
            (if_match("*"), None, Proceed),
            (if_match("\"v2\""), tag, Failed),
            (if_match("W/\"v1\""), tag, Failed),
            (if_match("\"v1\""), Some("W/\"v1\""), Failed),
            (if_match("\"v1\""), None, Failed),
            (if_match("v1"), tag, Failed),
            // A comma inside a tag is part of it.
            (if_match("\"a,b\""), Some("\"a,b\""), Proceed),
            (if_none_match("\"v1\""), tag, NotModified),
            (if_none_match("W/\"v1\""), tag, NotModified),
            (if_none_match("\"v1\""), Some("W/\"v1\""), NotModified),
            (if_none_match("*"), None, NotModified),
            (if_none_match("\"x\", \"y\""), tag, Proceed),
            (if_none_match("\"v1"), tag, Proceed),
        ];
        for (c, etag, want) in cases {
            assert_eq!(eval(c, etag), want, "{c:?} against {etag:?}");
        }
    }

    #[test]
    fn a_repeated_tag_field_is_one_list() {
        use Outcome::*;
        let tag = Some("\"v1\"");
        let cases = [
            (if_none_match("\"x\"\r\nIf-None-Match: \"v1\""), NotModified),
            (
                if_none_match("\"x\"\r\nHost: t\r\nif-none-match:\"y\", \"v1\""),
                NotModified,
            ),
            (
                if_none_match("\"x\"\r\nX-If-None-Match: \"v1\"\r\nIf-None-Match: \"y\""),
                Proceed,
            ),
            (
                if_none_match("\"x\"\r\nHost: If-None-Match: \"v1\"\r\nIf-None-Match: \"y\""),
                Proceed,
            ),
            // `*` is a list of its own: with tags it is malformed.
            (if_none_match("\"x\"\r\nIf-None-Match: *"), Proceed),
            (if_match("\"x\"\r\nIf-Match: \"v1\""), Proceed),
            (if_match("\"x\"\r\nIf-Match: \"y\""), Failed),
            (if_match("v1\r\nIf-Match: \"v1\""), Failed),
        ];
        for (c, want) in cases {
            assert_eq!(eval(c, tag), want, "{c:?}");
        }
    }

    #[test]
    fn dates_count_only_without_their_tag_field_and_when_valid() {
        use Outcome::*;
        let ius = |d: &'static [u8]| Conditions {
            if_unmodified_since: Some(d),
            ..Conditions::default()
        };
        let ims = |d: &'static [u8]| Conditions {
            if_modified_since: Some(d),
            ..Conditions::default()
        };
        assert_eq!(eval(ius(BEFORE), None), Failed);
        assert_eq!(eval(ius(AT), None), Proceed);
        assert_eq!(eval(ius(b"yesterday"), None), Proceed);
        assert_eq!(eval(ims(AT), None), NotModified);
        assert_eq!(eval(ims(BEFORE), None), Proceed);
        assert_eq!(eval(ims(b"soon"), None), Proceed);
        // Without a Last-Modified, dates decide nothing.
        let none = Validators::default();
        assert_eq!(evaluate(&ius(BEFORE), &none), Proceed);
        assert_eq!(evaluate(&ims(AT), &none), Proceed);
        // But a stored response's Date answers If-Modified-Since in its place (RFC 9111
        // 4.3.2), and If-Modified-Since alone: If-Unmodified-Since still ignores it.
        let dated = Validators {
            stored_date: Some(LM),
            ..Validators::default()
        };
        assert_eq!(evaluate(&ims(AT), &dated), NotModified);
        assert_eq!(evaluate(&ims(BEFORE), &dated), Proceed);
        assert_eq!(evaluate(&ius(BEFORE), &dated), Proceed);
        // A Last-Modified, when there is one, decides over the Date.
        let both = Validators {
            last_modified: Some(LM + 60),
            stored_date: Some(LM),
            ..Validators::default()
        };
        assert_eq!(evaluate(&ims(AT), &both), Proceed);
        // The tag fields win over the dates.
        let both = Conditions {
            if_match: Some(b"\"v1\""),
            if_unmodified_since: Some(BEFORE),
            if_none_match: Some(b"\"v2\""),
            if_modified_since: Some(AT),
            ..Conditions::default()
        };
        assert_eq!(eval(both, Some("\"v1\"")), Proceed);
        // A failed precondition is 412 even where If-None-Match would be 304.
        let failed = Conditions {
            if_match: Some(b"\"v2\""),
            if_none_match: Some(b"\"v1\""),
            ..Conditions::default()
        };
        assert_eq!(eval(failed, Some("\"v1\"")), Failed);
    }

    #[test]
    fn fields_are_read_from_a_head_first_line_first() {
        let hs = [
            httparse::Header {
                name: "IF-MATCH",
                value: b"\"a\"",
            },
            httparse::Header {
                name: "If-Match",
                value: b"\"b\"",
            },
            httparse::Header {
                name: "if-unmodified-since",
                value: AT,
            },
        ];
        let c = Conditions::of(&hs);
        assert_eq!(c.if_match, Some(&b"\"a\""[..]));
        assert_eq!(c.if_unmodified_since, Some(AT));
        assert!(c.any() && c.if_none_match.is_none());
        assert!(!Conditions::of(&[]).any());
    }
}
