//! Variants (RFC 9111 4.1): a response with `Vary` is stored with the values its request had
//! for the named fields, and is used only for requests whose values match.
//!
//! 4.1: "A stored response with a Vary header field value containing a member "*" always fails
//! to match" — so it is never stored. Values are compared after normalisation, which 4.1
//! allows ("by applying any normalization the cache knows about"): list elements trimmed of
//! whitespace across all field lines, and `Accept-Encoding` reduced to the set of codings this
//! cache knows and the client accepts (q > 0), so `gzip, br` and `br;q=0.9,gzip` share an entry;
//! `Accept-Language` to its ranges with q > 0, without case, most preferred first (so
//! `en-US, fr;q=0.5` and `fr;q=0.4,EN-us` share one). Matching allocates nothing.
//!
//! The values are the ones the origin got, not the client's: the proxy rewrites the request on
//! its way (`request::write_upstream_head`), and a variant must be the answer to what the origin
//! saw, or one client's request could fill the entry another's selects (Varnish, likewise,
//! evaluates Vary after its own header rewriting). A field the proxy never forwards (hop-by-hop,
//! the ones the request's Connection names, `sent_fields::never_forwarded`) reads as absent, at
//! storing and at lookup alike. A field the proxy writes from the client's address
//! (`X-Forwarded-For`, `X-Real-IP`) has a value per client that the client's request does not
//! hold: a response varying on it is not stored, as for `*`. The other fields the proxy writes
//! have one value per key: the `Host` sent follows the key's authority, `X-Forwarded-Proto` its
//! scheme, a route's `request_headers` are fixed for its store; keyed on the client's value, they
//! can only split a variant in two, never join two the origin told apart.

use crate::sent_fields::{never_forwarded, written_per_client};
use shared::http::framing::{connection_tokens, list_elements, trim_ows};

/// The request values a stored response was selected by. Empty: the response had no `Vary`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VarySpec {
    fields: Box<[VaryField]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct VaryField {
    /// Lowercase field name.
    name: Box<str>,
    value: VaryValue,
}

/// A request's value of a field a response varies on. Absent and empty are different values
/// (RFC 9111 4.1: "If (after any normalization that might take place) a header field is
/// absent from a request, it can only match another request if it is also absent there"):
/// no `Accept-Encoding` accepts any coding, an empty one only the identity.
#[derive(Debug, Clone, PartialEq, Eq)]
enum VaryValue {
    /// Accept-Encoding: a set of [`CODINGS`] bits, and [`PRESENT`] when the field was sent.
    Encodings(u8),
    /// Accept-Language: the language ranges the client accepts (q > 0), lowercase, most
    /// preferred first; `None` when absent.
    Languages(Option<Box<[Box<[u8]>]>>),
    /// Any other field: its list elements in order; `None` when absent.
    Elements(Option<Box<[Box<[u8]>]>>),
}

/// Language ranges an Accept-Language is read to (more are ignored, on both sides alike).
const MAX_LANGUAGES: usize = 16;

/// The ranges of an Accept-Language (its field lines `values`) with q > 0, in order of
/// preference (RFC 9110 12.4.2: higher qvalue first; equal ones keep their order): into a
/// stack array, no allocation. The count.
fn languages<'a>(
    values: impl Iterator<Item = &'a [u8]>,
    out: &mut [(&'a [u8], u16); MAX_LANGUAGES],
) -> usize {
    let mut n = 0;
    for element in values.flat_map(list_elements) {
        if n == MAX_LANGUAGES {
            break;
        }
        let mut params = element.split(|&b| b == b';');
        let tag = trim_ows(params.next().unwrap_or_default());
        let q = params
            .map(trim_ows)
            .find(|p| p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q="))
            .map_or(1000, |p| qvalue(trim_ows(&p[2..])));
        if tag.is_empty() || q == 0 || out[..n].iter().any(|(t, _)| t.eq_ignore_ascii_case(tag)) {
            continue;
        }
        // Insertion after every range of at least this q: stable, most preferred first.
        let at = out[..n].iter().position(|&(_, oq)| oq < q).unwrap_or(n);
        out[at..=n].rotate_right(1);
        out[at] = (tag, q);
        n += 1;
    }
    n
}

/// A qvalue (RFC 9110 12.4.2) in thousandths; malformed reads as 0 (not acceptable).
fn qvalue(v: &[u8]) -> u16 {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &[][..]),
    };
    let digits = |d: &[u8]| d.iter().all(u8::is_ascii_digit);
    if int.len() != 1 || !digits(int) || frac.len() > 3 || !digits(frac) {
        return 0;
    }
    let mut q = u16::from(int[0] - b'0') * 1000;
    for (i, &d) in frac.iter().enumerate() {
        q += u16::from(d - b'0') * [100, 10, 1][i];
    }
    // "0" ["." 0*3DIGIT] / "1" ["." 0*3("0")]: anything above 1 is malformed.
    if q > 1000 {
        return 0;
    }
    q
}

/// The bit of [`VaryValue::Encodings`] that says the request had the field.
const PRESENT: u8 = 128;

/// The response carried `Vary: *`, or named a field written per client (never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VaryStar;

/// Content codings Accept-Encoding is normalised to.
const CODINGS: [(&str, u8); 6] = [
    ("gzip", 1),
    ("x-gzip", 1),
    ("br", 2),
    ("zstd", 4),
    ("deflate", 8),
    ("*", 16),
];

/// The set of known codings `value` accepts with q > 0 (RFC 9110 12.5.3).
pub fn accept_encoding_set<'a>(values: impl Iterator<Item = &'a [u8]>) -> u8 {
    let mut set = 0;
    for element in values.flat_map(list_elements) {
        let mut params = element.split(|&b| b == b';');
        let coding = trim_ows(params.next().unwrap_or_default());
        let refused = params.any(|p| {
            let p = trim_ows(p);
            p.len() >= 2
                && p[..2].eq_ignore_ascii_case(b"q=")
                && trim_ows(&p[2..]).iter().all(|&b| b == b'0' || b == b'.')
        });
        if refused {
            continue;
        }
        if let Some((_, bit)) = CODINGS
            .iter()
            .find(|(n, _)| coding.eq_ignore_ascii_case(n.as_bytes()))
        {
            set |= bit;
        }
    }
    set
}

/// The request's Accept-Encoding as [`VaryValue::Encodings`] holds it.
fn encodings(request: &[httparse::Header<'_>], name: &str) -> u8 {
    let mut values = sent_values(request, name).peekable();
    match values.peek() {
        None => 0,
        Some(_) => PRESENT | accept_encoding_set(values),
    }
}

fn field_values<'h, 'b: 'h>(
    headers: &'h [httparse::Header<'b>],
    name: &'h str,
) -> impl Iterator<Item = &'b [u8]> + 'h {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value)
}

/// The values of the request's field `name` (lowercase) as the origin gets them: none when
/// the proxy does not forward the field (see the module's notes).
fn sent_values<'h, 'b: 'h>(
    request: &'h [httparse::Header<'b>],
    name: &'h str,
) -> impl Iterator<Item = &'b [u8]> + 'h {
    let sent = !never_forwarded(name)
        && !connection_tokens(request).any(|t| t.eq_ignore_ascii_case(name.as_bytes()));
    field_values(request, name).filter(move |_| sent)
}

impl VarySpec {
    /// The spec of a response (its `Vary` fields) for the request that fetched it.
    pub fn new(
        response: &[httparse::Header<'_>],
        request: &[httparse::Header<'_>],
    ) -> Result<VarySpec, VaryStar> {
        let mut fields: Vec<VaryField> = Vec::new();
        for name in field_values(response, "vary").flat_map(list_elements) {
            if name == b"*" {
                return Err(VaryStar);
            }
            let Ok(name) = std::str::from_utf8(name) else {
                continue;
            };
            if written_per_client(name) {
                return Err(VaryStar);
            }
            let name = name.to_ascii_lowercase();
            if fields.iter().any(|f| *f.name == *name) {
                continue;
            }
            let value = if name == "accept-encoding" {
                VaryValue::Encodings(encodings(request, &name))
            } else if name == "accept-language" {
                let present = sent_values(request, &name).next().is_some();
                VaryValue::Languages(present.then(|| {
                    let mut ranges = [(&[][..], 0); MAX_LANGUAGES];
                    let n = languages(sent_values(request, &name), &mut ranges);
                    ranges[..n]
                        .iter()
                        .map(|(t, _)| t.to_ascii_lowercase().into_boxed_slice())
                        .collect()
                }))
            } else {
                let present = sent_values(request, &name).next().is_some();
                VaryValue::Elements(present.then(|| {
                    sent_values(request, &name)
                        .flat_map(list_elements)
                        .map(Box::from)
                        .collect()
                }))
            };
            fields.push(VaryField {
                name: name.into(),
                value,
            });
        }
        Ok(VarySpec {
            fields: fields.into(),
        })
    }

    /// Whether `request` selects this variant.
    pub fn matches(&self, request: &[httparse::Header<'_>]) -> bool {
        self.fields.iter().all(|f| match &f.value {
            VaryValue::Encodings(set) => encodings(request, &f.name) == *set,
            VaryValue::Languages(None) | VaryValue::Elements(None) => {
                sent_values(request, &f.name).next().is_none()
            }
            VaryValue::Languages(Some(want)) => {
                let mut ranges = [(&[][..], 0); MAX_LANGUAGES];
                let mut values = sent_values(request, &f.name).peekable();
                let present = values.peek().is_some();
                let n = languages(values, &mut ranges);
                present
                    && n == want.len()
                    && ranges[..n]
                        .iter()
                        .zip(want.iter())
                        .all(|((t, _), w)| t.eq_ignore_ascii_case(w))
            }
            VaryValue::Elements(Some(want)) => {
                let mut values = sent_values(request, &f.name).peekable();
                values.peek().is_some()
                    && values
                        .flat_map(list_elements)
                        .eq(want.iter().map(|e| &e[..]))
            }
        })
    }

    /// Bytes this spec takes in the store (for the byte bound).
    pub fn size(&self) -> usize {
        self.fields
            .iter()
            .map(|f| {
                f.name.len()
                    + match &f.value {
                        VaryValue::Encodings(_) => 1,
                        VaryValue::Languages(e) | VaryValue::Elements(e) => {
                            e.iter().flatten().map(|e| e.len() + 16).sum()
                        }
                    }
                    + 32
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(list: &[(&'static str, &'static str)]) -> Vec<httparse::Header<'static>> {
        list.iter()
            .map(|&(name, v)| httparse::Header {
                name,
                value: v.as_bytes(),
            })
            .collect()
    }

    #[test]
    fn accept_encoding_is_normalised() {
        let set = |v: &'static str| accept_encoding_set([v.as_bytes()].into_iter());
        assert_eq!(set("gzip, br"), set("br;q=0.9 , GZIP"));
        assert_eq!(set("gzip"), set("x-gzip"));
        assert_eq!(set("gzip, br;q=0"), set("gzip"));
        assert_eq!(set("gzip;q=0.0, identity"), 0);
        assert_eq!(set("compress, identity"), 0);
        assert_ne!(set("gzip"), set("br"));
        assert_ne!(set("*"), set(""));
    }

    #[test]
    fn accept_language_is_normalised() {
        let spec = |v: Option<&'static str>| {
            let req = match v {
                Some(v) => hs(&[("Accept-Language", v)]),
                None => hs(&[]),
            };
            VarySpec::new(&hs(&[("Vary", "Accept-Language")]), &req).unwrap()
        };
        let matches = |stored: Option<&'static str>, v: Option<&'static str>| {
            let req = match v {
                Some(v) => hs(&[("accept-language", v)]),
                None => hs(&[]),
            };
            spec(stored).matches(&req)
        };
        let same: [(&str, &str); 6] = [
            ("en-US, fr;q=0.5", "EN-us,fr;q=0.4"),
            ("en-US, fr;q=0.5", "fr;q=0.5, en-US"),
            ("en, de;q=0", "en"),
            ("en;q=0.8, fr;q=0.8", "en;q=0.3,fr;q=0.3"),
            ("da, en-gb;q=0.8, en;q=0.7", "da,en-GB;q=0.80,en;q=0.700"),
            ("en, en", "en"),
        ];
        for (a, b) in same {
            assert!(matches(Some(a), Some(b)), "{a} ~ {b}");
        }
        let different: [(Option<&str>, Option<&str>); 5] = [
            (Some("en, fr"), Some("fr, en")),
            (Some("en"), Some("en, fr")),
            (Some("en"), None),
            (None, Some("en")),
            (Some("en;q=0.5, fr"), Some("en, fr;q=0.5")),
        ];
        for (a, b) in different {
            assert!(!matches(a, b), "{a:?} !~ {b:?}");
        }
        assert!(matches(None, None));
        assert_eq!(qvalue(b"1.000"), 1000);
        assert_eq!(
            (qvalue(b"0.05"), qvalue(b"2"), qvalue(b"0.1234")),
            (50, 0, 0)
        );
    }

    #[test]
    fn variants_match_their_requests_only() {
        let resp = hs(&[
            ("Vary", "Accept-Encoding, accept-language"),
            ("vary", "X-Tenant"),
        ]);
        let spec = VarySpec::new(
            &resp,
            &hs(&[
                ("Accept-Encoding", "gzip, br"),
                ("Accept-Language", "fr, en"),
                ("X-Tenant", "a"),
            ]),
        )
        .unwrap();
        let cases: [(&[(&str, &str)], bool); 6] = [
            (
                &[
                    ("accept-encoding", "br,gzip"),
                    ("accept-language", "fr,en"),
                    ("x-tenant", "a"),
                ],
                true,
            ),
            (
                &[
                    ("Accept-Language", "fr"),
                    ("Accept-Language", " en"),
                    ("Accept-Encoding", "gzip;q=1, br"),
                    ("X-Tenant", "a"),
                ],
                true,
            ),
            (
                &[
                    ("Accept-Encoding", "gzip"),
                    ("Accept-Language", "fr, en"),
                    ("X-Tenant", "a"),
                ],
                false,
            ),
            (
                &[
                    ("Accept-Encoding", "gzip, br"),
                    ("Accept-Language", "en, fr"),
                    ("X-Tenant", "a"),
                ],
                false,
            ),
            (
                &[
                    ("Accept-Encoding", "gzip, br"),
                    ("Accept-Language", "fr, en"),
                ],
                false,
            ),
            (
                &[
                    ("Accept-Encoding", "gzip, br"),
                    ("Accept-Language", "fr, en"),
                    ("X-Tenant", "b"),
                ],
                false,
            ),
        ];
        for (req, want) in cases {
            assert_eq!(spec.matches(&hs(req)), want, "{req:?}");
        }
    }

    #[test]
    fn fields_the_proxy_does_not_forward_read_as_absent() {
        let al = hs(&[("Vary", "Accept-Language")]);
        let hidden = hs(&[("Accept-Language", "fr"), ("Connection", "accept-language")]);
        let stored = VarySpec::new(&al, &hidden).unwrap();
        assert_eq!(stored, VarySpec::new(&al, &[]).unwrap(), "stored as absent");
        assert!(stored.matches(&[]));
        assert!(stored.matches(&hidden));
        assert!(!stored.matches(&hs(&[("Accept-Language", "fr")])));
        let fr = VarySpec::new(&al, &hs(&[("Accept-Language", "fr")])).unwrap();
        assert!(
            !fr.matches(&hidden),
            "matched on a value the origin would not see"
        );
        // Any named field, Accept-Encoding's normalisation included; and the fields the proxy
        // never forwards, named or not.
        let ae = hs(&[("Vary", "Accept-Encoding, X-Tenant, Forwarded, TE")]);
        let sent = hs(&[
            ("Accept-Encoding", "gzip"),
            ("Connection", "x-tenant, Accept-Encoding"),
        ]);
        let spec = VarySpec::new(&ae, &sent).unwrap();
        assert!(spec.matches(&hs(&[("Forwarded", "for=x"), ("TE", "trailers")])));
        assert!(!spec.matches(&hs(&[("X-Tenant", "a")])), "X-Tenant sent");
        assert!(
            !spec.matches(&hs(&[("Accept-Encoding", "gzip")])),
            "Accept-Encoding sent"
        );
    }

    #[test]
    fn a_field_written_per_client_is_refused() {
        for vary in ["X-Real-IP", "accept, x-forwarded-for"] {
            let resp = hs(&[("Vary", vary)]);
            let req = hs(&[("X-Real-IP", "10.0.0.1")]);
            assert_eq!(VarySpec::new(&resp, &req), Err(VaryStar), "{vary}");
        }
    }

    #[test]
    fn absent_field_matches_absent_only_and_star_is_refused() {
        let spec = VarySpec::new(&hs(&[("Vary", "Cookie")]), &[]).unwrap();
        assert!(spec.matches(&[]));
        assert!(!spec.matches(&hs(&[("Cookie", "a=1")])));
        assert_eq!(
            VarySpec::new(&hs(&[("Vary", "Accept, *")]), &[]),
            Err(VaryStar)
        );
        // RFC 9111 4.1: absent and empty are different values.
        assert!(!spec.matches(&hs(&[("Cookie", "")])), "absent vs empty");
        let empty = VarySpec::new(&hs(&[("Vary", "Cookie")]), &hs(&[("Cookie", "")])).unwrap();
        assert!(empty.matches(&hs(&[("Cookie", " ")])));
        assert!(!empty.matches(&[]), "empty vs absent");
        // Accept-Encoding too: absent accepts any coding, empty only identity.
        let ae = hs(&[("Vary", "Accept-Encoding")]);
        let absent = VarySpec::new(&ae, &[]).unwrap();
        assert!(absent.matches(&[]));
        assert!(
            !absent.matches(&hs(&[("Accept-Encoding", "")])),
            "AE absent vs empty"
        );
        let empty = VarySpec::new(&ae, &hs(&[("Accept-Encoding", "")])).unwrap();
        assert!(!empty.matches(&[]), "AE empty vs absent");
        assert!(empty.matches(&hs(&[("Accept-Encoding", "identity")])));
        let none = VarySpec::new(&hs(&[("Content-Type", "text/plain")]), &[]).unwrap();
        assert_eq!(none, VarySpec::default());
        assert!(none.matches(&hs(&[("Accept-Encoding", "gzip")])));
    }
}
