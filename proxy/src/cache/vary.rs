//! Variants (RFC 9111 4.1): a response with `Vary` is stored with the values its request had
//! for the named fields, and is used only for requests whose values match.
//!
//! 4.1: "A stored response with a Vary header field value containing a member "*" always fails
//! to match" — so it is never stored. Values are compared after normalisation, which 4.1
//! allows ("by applying any normalization the cache knows about"): list elements trimmed of
//! whitespace across all field lines, and `Accept-Encoding` reduced to the set of codings this
//! cache knows and the client accepts (q > 0), so `gzip, br` and `br;q=0.9,gzip` share an entry.
//! Matching allocates nothing.

use shared::http::framing::{list_elements, trim_ows};

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
    /// Any other field: its list elements in order; `None` when absent.
    Elements(Option<Box<[Box<[u8]>]>>),
}

/// The bit of [`VaryValue::Encodings`] that says the request had the field.
const PRESENT: u8 = 128;

/// The response carried `Vary: *` (never stored).
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
    let mut values = field_values(request, name).peekable();
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
            let name = name.to_ascii_lowercase();
            if fields.iter().any(|f| *f.name == *name) {
                continue;
            }
            let value = if name == "accept-encoding" {
                VaryValue::Encodings(encodings(request, &name))
            } else {
                let present = field_values(request, &name).next().is_some();
                VaryValue::Elements(present.then(|| {
                    field_values(request, &name)
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
            VaryValue::Elements(None) => field_values(request, &f.name).next().is_none(),
            VaryValue::Elements(Some(want)) => {
                let mut values = field_values(request, &f.name).peekable();
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
