//! Variants (RFC 9111 4.1): a response with `Vary` is stored with the values its request had
//! for the named fields, and is used only for requests whose values match.
//!
//! 4.1: "A stored response with a Vary header field value containing a member "*" always fails
//! to match" — so it is never stored. Values are compared after the normalisations 4.1
//! allows, those "known to have identical semantics" and no others: list elements trimmed of
//! whitespace across all field lines; in `Accept-Encoding` and `Accept-Language`, names
//! without case, a weight by its number (`q=1` or none, `q=0.5` or `q=0.500`), `x-gzip` as
//! `gzip` and `x-compress` as `compress` (RFC 9110 8.4.1), and the order of elements where it
//! means nothing: none in Accept-Encoding, between ranges of different weights in
//! Accept-Language (12.4.2: "most preferred first"; ranges of one weight keep their order). A
//! coding this cache does not know, a `q=0` exclusion, another weight, a repeated element,
//! an element off the grammar (kept as it came) all stay in the value: the origin may answer
//! each differently (a `compress` body is no answer to `identity`). Matching allocates nothing.
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
//! scheme, a route's `request_headers` are fixed for its store (a reload that changes them gives
//! the route a new one: `generation::Forwards`); keyed on the client's value, they can only
//! split a variant in two, never join two the origin told apart.

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
    /// Accept-Encoding or Accept-Language: its elements as [`normalise`] orders them; `None`
    /// when absent.
    Weighted(Option<Box<[Element]>>),
    /// Any other field: its list elements in order; `None` when absent.
    Elements(Option<Box<[Box<[u8]>]>>),
}

/// A stored element of an Accept-Encoding or Accept-Language (a [`Weighted`], owned).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Element {
    /// Lowercase (as it came when `raw`).
    name: Box<[u8]>,
    q: u16,
    raw: bool,
}

/// The Accept fields whose elements are normalised, and how they are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accept {
    /// RFC 9110 12.5.3: the order of codings means nothing.
    Encoding,
    /// 12.5.4 and 12.4.2: ranges by weight, those of one weight in their order.
    Language,
}

impl Accept {
    fn of(name: &str) -> Option<Accept> {
        match name {
            "accept-encoding" => Some(Accept::Encoding),
            "accept-language" => Some(Accept::Language),
            _ => None,
        }
    }
}

/// Elements of an Accept-Encoding or Accept-Language this cache normalises. A response that
/// varies on a longer one is not stored (and a longer one selects nothing): ignoring the
/// elements past a bound would join values the origin tells apart.
const MAX_ELEMENTS: usize = 32;

/// One element of an Accept-Encoding or Accept-Language, as the request has it: its name (a
/// coding or a language range) and weight in thousandths, or, when it is off the grammar
/// (`name` then at most `;q=qvalue`), the element itself (`raw`), compared byte for byte.
#[derive(Debug, Clone, Copy)]
struct Weighted<'a> {
    name: &'a [u8],
    q: u16,
    raw: bool,
}

impl Weighted<'_> {
    const NONE: Weighted<'static> = Weighted {
        name: b"",
        q: 0,
        raw: true,
    };

    fn parse(element: &[u8], kind: Accept) -> Weighted<'_> {
        let mut parts = element.split(|&b| b == b';');
        let name = trim_ows(parts.next().unwrap_or_default());
        let q = match (parts.next().map(trim_ows), parts.next()) {
            (None, _) => Some(1000),
            (Some(p), None) if p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q=") => {
                qvalue(&p[2..])
            }
            _ => None,
        };
        let Some(q) = q.filter(|_| !name.is_empty()) else {
            return Weighted {
                name: element,
                q: 0,
                raw: true,
            };
        };
        // RFC 9110 8.4.1.1, 8.4.1.3: "A recipient SHOULD consider "x-compress" [and
        // "x-gzip"] to be equivalent".
        let name: &[u8] = match kind {
            Accept::Encoding if name.eq_ignore_ascii_case(b"x-gzip") => b"gzip",
            Accept::Encoding if name.eq_ignore_ascii_case(b"x-compress") => b"compress",
            _ => name,
        };
        Weighted {
            name,
            q,
            raw: false,
        }
    }

    /// Accept-Encoding's one order: any total one, names compared without case.
    fn cmp(&self, other: &Weighted<'_>) -> std::cmp::Ordering {
        (self.raw, self.q)
            .cmp(&(other.raw, other.q))
            .then_with(|| self.bytes().cmp(other.bytes()))
    }

    /// The name's bytes as compared: lowercase unless `raw`.
    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        let raw = self.raw;
        self.name
            .iter()
            .map(move |&b| if raw { b } else { b.to_ascii_lowercase() })
    }

    fn is(&self, stored: &Element) -> bool {
        self.raw == stored.raw
            && self.q == stored.q
            && match self.raw {
                true => *self.name == *stored.name,
                false => self.name.eq_ignore_ascii_case(&stored.name),
            }
    }
}

/// The elements of an Accept-Encoding or Accept-Language (its field lines `values`) in the
/// one order `kind` gives them, in a stack array (no allocation): their count, or `None`
/// past [`MAX_ELEMENTS`].
fn normalise<'a>(
    kind: Accept,
    values: impl Iterator<Item = &'a [u8]>,
    out: &mut [Weighted<'a>; MAX_ELEMENTS],
) -> Option<usize> {
    let mut n = 0;
    for element in values.flat_map(list_elements) {
        *out.get_mut(n)? = Weighted::parse(element, kind);
        n += 1;
    }
    let els = &mut out[..n];
    // An element off the grammar has no weight to place it by: then the order stays.
    if kind == Accept::Language && els.iter().any(|e| e.raw) {
        return Some(n);
    }
    let before = |a: &Weighted<'_>, b: &Weighted<'_>| match kind {
        Accept::Encoding => a.cmp(b).is_lt(),
        Accept::Language => a.q > b.q,
    };
    // Insertion sort: stable, and for a few elements in a stack array it needs nothing more.
    for i in 1..n {
        let mut j = i;
        while j > 0 && before(&els[j], &els[j - 1]) {
            els.swap(j, j - 1);
            j -= 1;
        }
    }
    Some(n)
}

/// A qvalue (RFC 9110 12.4.2) in thousandths; `None`: malformed.
fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &[][..]),
    };
    let digits = |d: &[u8]| d.iter().all(u8::is_ascii_digit);
    if int.len() != 1 || !digits(int) || frac.len() > 3 || !digits(frac) {
        return None;
    }
    let mut q = u16::from(int[0] - b'0') * 1000;
    for (i, &d) in frac.iter().enumerate() {
        q += u16::from(d - b'0') * [100, 10, 1][i];
    }
    // "0" ["." 0*3DIGIT] / "1" ["." 0*3("0")]: anything above 1 is malformed.
    (q <= 1000).then_some(q)
}

/// The response carried `Vary: *`, or named a field written per client, or varies on an
/// Accept-Encoding or Accept-Language of more than [`MAX_ELEMENTS`] elements (never stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VaryStar;

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
            let present = sent_values(request, &name).next().is_some();
            let value = match Accept::of(&name) {
                Some(kind) if present => {
                    let mut els = [Weighted::NONE; MAX_ELEMENTS];
                    let n =
                        normalise(kind, sent_values(request, &name), &mut els).ok_or(VaryStar)?;
                    let owned = els[..n].iter().map(|w| Element {
                        name: match w.raw {
                            true => w.name.into(),
                            false => w.name.to_ascii_lowercase().into(),
                        },
                        q: w.q,
                        raw: w.raw,
                    });
                    VaryValue::Weighted(Some(owned.collect()))
                }
                Some(_) => VaryValue::Weighted(None),
                None => VaryValue::Elements(present.then(|| {
                    sent_values(request, &name)
                        .flat_map(list_elements)
                        .map(Box::from)
                        .collect()
                })),
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
            VaryValue::Weighted(None) | VaryValue::Elements(None) => {
                sent_values(request, &f.name).next().is_none()
            }
            VaryValue::Weighted(Some(want)) => {
                let Some(kind) = Accept::of(&f.name) else {
                    return false;
                };
                let mut values = sent_values(request, &f.name).peekable();
                let present = values.peek().is_some();
                let mut els = [Weighted::NONE; MAX_ELEMENTS];
                present
                    && normalise(kind, values, &mut els).is_some_and(|n| {
                        n == want.len() && els[..n].iter().zip(want.iter()).all(|(w, s)| w.is(s))
                    })
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
                        VaryValue::Weighted(e) => {
                            e.iter().flatten().map(|e| e.name.len() + 24).sum::<usize>()
                        }
                        VaryValue::Elements(e) => e.iter().flatten().map(|e| e.len() + 16).sum(),
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

    /// Whether a response varying on `name`, stored for a request with `stored` (its value;
    /// `None`: absent), is selected by a request with `asked`.
    fn selects(
        name: &'static str,
        stored: Option<&'static str>,
        asked: Option<&'static str>,
    ) -> bool {
        let req = |v: Option<&'static str>| match v {
            Some(v) => hs(&[(name, v)]),
            None => hs(&[]),
        };
        let spec = VarySpec::new(&hs(&[("Vary", name)]), &req(stored)).unwrap();
        spec.matches(&req(asked))
    }

    #[test]
    fn accept_encoding_is_normalised_only_where_the_meaning_is_the_same() {
        let same: [(&str, &str); 6] = [
            ("gzip, br", "br;q=1 , GZIP"),
            ("gzip", "x-gzip"),
            ("compress", "X-Compress"),
            ("gzip;q=0.5, br", "BR, gzip;q=0.500"),
            ("gzip;q=0, identity", "identity,gzip;Q=0.0"),
            ("", " "),
        ];
        for (a, b) in same {
            assert!(selects("Accept-Encoding", Some(a), Some(b)), "{a} ~ {b}");
        }
        let different: [(Option<&str>, Option<&str>); 10] = [
            (Some("compress"), Some("identity")),
            (Some("compress"), Some("")),
            (Some("compress, identity"), Some("identity")),
            (Some("gzip, br;q=0"), Some("gzip")),
            (Some("gzip;q=0.0, identity"), Some("identity")),
            (Some("gzip;q=0.5, br"), Some("gzip, br")),
            (Some("gzip"), Some("br")),
            (Some("*"), Some("")),
            (Some("gzip;q=2"), Some("gzip")),
            (Some(""), None),
        ];
        for (a, b) in different {
            assert!(!selects("Accept-Encoding", a, b), "{a:?} !~ {b:?}");
        }
    }

    #[test]
    fn accept_language_is_normalised_only_where_the_meaning_is_the_same() {
        let same: [(&str, &str); 6] = [
            ("en-US, fr;q=0.5", "EN-us,fr;q=0.500"),
            ("en-US, fr;q=0.5", "fr;q=0.5, en-US"),
            ("en;q=1, de;q=0", "de;q=0 , EN"),
            ("da, en-gb;q=0.8, en;q=0.7", "da,en-GB;q=0.80,en;q=0.700"),
            ("*, fr;q=0", "*,FR;q=0.0"),
            ("en,fr", "en , fr"),
        ];
        for (a, b) in same {
            assert!(selects("Accept-Language", Some(a), Some(b)), "{a} ~ {b}");
        }
        let different: [(Option<&str>, Option<&str>); 10] = [
            (Some("en, fr"), Some("fr, en")),
            (Some("en"), Some("en, fr")),
            (Some("en"), None),
            (None, Some("en")),
            (Some("en;q=0.5, fr"), Some("en, fr;q=0.5")),
            (Some("*"), Some("*, fr;q=0")),
            (Some("en, de;q=0"), Some("en")),
            (Some("en;q=0.8, fr;q=0.8"), Some("en;q=0.3,fr;q=0.3")),
            (Some("en, en"), Some("en")),
            (Some("en;q=x"), Some("en;q=0")),
        ];
        for (a, b) in different {
            assert!(!selects("Accept-Language", a, b), "{a:?} !~ {b:?}");
        }
        assert_eq!(qvalue(b"1.000"), Some(1000));
        assert_eq!(
            (qvalue(b"0.05"), qvalue(b"2"), qvalue(b"0.1234")),
            (Some(50), None, None)
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
    fn an_accept_value_too_long_to_normalise_is_never_stored_nor_selects() {
        let long = (0..=MAX_ELEMENTS)
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>();
        let long: &'static str = Box::leak(long.join(", ").into_boxed_str());
        for name in ["Accept-Encoding", "Accept-Language"] {
            let vary = hs(&[("Vary", name)]);
            assert_eq!(VarySpec::new(&vary, &hs(&[(name, long)])), Err(VaryStar));
            let spec = VarySpec::new(&vary, &hs(&[(name, "c0")])).unwrap();
            assert!(!spec.matches(&hs(&[(name, long)])), "{name}");
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
        // Both mean "identity only" (RFC 9110 12.5.3), but only by reading the field's rules
        // together, not by a normalisation of the value: kept apart (at worst, a miss).
        assert!(!empty.matches(&hs(&[("Accept-Encoding", "identity")])));
        assert!(empty.matches(&hs(&[("Accept-Encoding", " ")])));
        let none = VarySpec::new(&hs(&[("Content-Type", "text/plain")]), &[]).unwrap();
        assert_eq!(none, VarySpec::default());
        assert!(none.matches(&hs(&[("Accept-Encoding", "gzip")])));
    }
}
