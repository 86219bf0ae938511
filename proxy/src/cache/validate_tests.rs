//! Validation's rules as tables: the conditional request, what a 304 updates, which 304
//! selects the stored response, and clients' conditionals answered from a stored head.

use super::validate::{
    has_strong_validator, make_conditional, not_modified_head, precondition, same_strong_validator,
    selects, updated_fields, validators, Validators,
};
use crate::preconditions::Outcome::{self, Failed, NotModified, Proceed};
use bytes::BytesMut;

/// Header fields as (name, value) pairs.
type Fields = &'static [(&'static str, &'static str)];

const LM: &str = "Tue, 14 Nov 2023 22:13:20 GMT";
const BEFORE: &str = "Tue, 14 Nov 2023 22:13:10 GMT";
const AFTER: &str = "Tue, 14 Nov 2023 22:14:20 GMT";

fn hs<'a>(list: &[(&'a str, &'a str)]) -> Vec<httparse::Header<'a>> {
    list.iter()
        .map(|&(name, v)| httparse::Header {
            name,
            value: v.as_bytes(),
        })
        .collect()
}

fn stored() -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nETag: \"v1\"\r\nLast-Modified: {LM}\r\n\
         Cache-Control: max-age=10\r\nX-One: a\r\nX-One: b\r\n"
    )
    .into_bytes()
}

#[test]
fn validators_of_a_stored_head() {
    let s = stored();
    let v = validators(&s);
    assert_eq!(v.etag, Some(&b"\"v1\""[..]));
    assert_eq!(v.last_modified, Some(LM.as_bytes()));
    assert!(v.any());
    let none = validators(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n");
    assert_eq!(none, Validators::default());
    assert!(!none.any());
}

#[test]
fn the_conditional_request_replaces_the_clients_conditionals() {
    let mut out = BytesMut::from(
        &b"GET /a HTTP/1.1\r\nAccept: */*\r\nIf-None-Match: \"mine\"\r\n\
           if-modified-since: x\r\nX-Forwarded-For: 1.2.3.4\r\n"[..],
    );
    let s = stored();
    make_conditional(&mut out, validators(&s));
    let want = format!(
        "GET /a HTTP/1.1\r\nAccept: */*\r\nX-Forwarded-For: 1.2.3.4\r\n\
         If-None-Match: \"v1\"\r\nIf-Modified-Since: {LM}\r\n"
    );
    assert_eq!(String::from_utf8_lossy(&out), want);
    // Only a Last-Modified: only If-Modified-Since.
    let mut out = BytesMut::from(&b"GET /a HTTP/1.1\r\nAccept: */*\r\n"[..]);
    let lm_only = format!("HTTP/1.1 200 OK\r\nLast-Modified: {LM}\r\n");
    make_conditional(&mut out, validators(lm_only.as_bytes()));
    let want = format!("GET /a HTTP/1.1\r\nAccept: */*\r\nIf-Modified-Since: {LM}\r\n");
    assert_eq!(String::from_utf8_lossy(&out), want);
}

#[test]
fn a_304_updates_every_field_it_carries_but_framing_and_encoding() {
    let s = stored();
    let new = hs(&[
        ("Cache-Control", "max-age=60"),
        ("X-One", "c"),
        ("Date", AFTER),
        ("Content-Length", "0"),
        ("Content-Encoding", "gzip"),
        ("Connection", "keep-alive"),
        ("X-Cache", "HIT"),
    ]);
    let got: Vec<(String, String)> = updated_fields(&s, &new)
        .into_iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("Content-Type", "text/plain"),
        ("ETag", "\"v1\""),
        ("Last-Modified", LM),
        ("Cache-Control", "max-age=60"),
        ("X-One", "c"),
        ("Date", AFTER),
    ]
    .iter()
    .map(|&(n, v)| (n.to_string(), v.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn which_304_selects_the_stored_response() {
    // RFC 9111 4.3.4: a strong validator selects the stored responses with the same strong
    // one; a weak one, those it matches weakly (RFC 9110 8.8.3.2); neither, the one validated.
    let v1 = Some(&b"\"v1\""[..]);
    let w1 = Some(&b"W/\"v1\""[..]);
    let cases: [(Option<&[u8]>, Fields, bool); 11] = [
        (v1, &[], true),
        (v1, &[("ETag", "\"v1\"")], true),
        (v1, &[("ETag", "\"v2\"")], false),
        (v1, &[("ETag", "W/\"v2\"")], false),
        (v1, &[("ETag", "W/\"v1\"")], true),
        (w1, &[("ETag", " W/\"v1\" ")], true),
        (w1, &[("ETag", "W/\"v2\"")], false),
        (w1, &[("ETag", "\"v1\"")], false),
        (None, &[("ETag", "\"v1\"")], false),
        (None, &[("ETag", "W/\"v1\"")], false),
        (None, &[], true),
    ];
    for (stored, fields, want) in cases {
        assert_eq!(selects(stored, &hs(fields)), want, "{stored:?} {fields:?}");
    }
}

#[test]
fn client_conditionals_against_a_stored_response() {
    let s = stored();
    let v = &s[..];
    let lm_only = format!("HTTP/1.1 200 OK\r\nLast-Modified: {LM}\r\n");
    let lm = lm_only.as_bytes();
    // RFC 9111 4.3.2: without a Last-Modified, If-Modified-Since is compared with the Date.
    let date_only = format!("HTTP/1.1 200 OK\r\nDate: {LM}\r\nETag: \"v1\"\r\n");
    let date = date_only.as_bytes();
    let lm_and_date = format!("HTTP/1.1 200 OK\r\nDate: {AFTER}\r\nLast-Modified: {LM}\r\n");
    let both = lm_and_date.as_bytes();
    let cases: [(Fields, &[u8], Outcome); 21] = [
        (&[], v, Proceed),
        (&[("If-None-Match", "\"v1\"")], v, NotModified),
        (&[("If-None-Match", "W/\"v1\"")], v, NotModified),
        (&[("If-None-Match", "\"x\", \"v1\"")], v, NotModified),
        (&[("If-None-Match", "*")], v, NotModified),
        (&[("If-None-Match", "\"v2\"")], v, Proceed),
        // If-None-Match decides alone: a matching date does not count beside it.
        (
            &[("If-None-Match", "\"v2\""), ("If-Modified-Since", LM)],
            v,
            Proceed,
        ),
        (&[("If-Modified-Since", LM)], v, NotModified),
        (&[("If-Modified-Since", AFTER)], lm, NotModified),
        (&[("If-Modified-Since", BEFORE)], lm, Proceed),
        (&[("If-Modified-Since", "yesterday")], lm, Proceed),
        // Preconditions first (RFC 9110 13.2.2).
        (&[("If-Match", "\"v1\"")], v, Proceed),
        (
            &[("If-Match", "\"v2\""), ("If-None-Match", "\"v1\"")],
            v,
            Failed,
        ),
        (&[("If-Unmodified-Since", BEFORE)], lm, Failed),
        (&[("If-Unmodified-Since", AFTER)], lm, Proceed),
        (&[("If-Modified-Since", LM)], date, NotModified),
        (&[("If-Modified-Since", AFTER)], date, NotModified),
        (&[("If-Modified-Since", BEFORE)], date, Proceed),
        // The Date stands for a Last-Modified for If-Modified-Since alone.
        (&[("If-Unmodified-Since", BEFORE)], date, Proceed),
        // A Last-Modified decides over the Date.
        (&[("If-Modified-Since", LM)], both, NotModified),
        (
            &[("If-None-Match", "\"v2\""), ("If-Modified-Since", LM)],
            date,
            Proceed,
        ),
    ];
    for (fields, v, want) in cases {
        assert_eq!(precondition(&hs(fields), 200, v), want, "{fields:?}");
    }
}

#[test]
fn a_304_to_the_client_keeps_validators_and_drops_representation_fields() {
    let got = not_modified_head(&stored());
    let want = format!(
        "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nLast-Modified: {LM}\r\n\
         Cache-Control: max-age=10\r\nX-One: a\r\nX-One: b\r\n"
    );
    assert_eq!(String::from_utf8_lossy(&got), want);
}

#[test]
fn a_206_combines_with_a_stored_response_of_the_same_strong_validator() {
    const DATE: &str = "Tue, 14 Nov 2023 22:14:20 GMT"; // LM + 60 s
    let etag = |e: &str| format!("HTTP/1.1 200 OK\r\nETag: {e}\r\nDate: {DATE}\r\n");
    let lm = |lm: &str, date: &str| {
        format!("HTTP/1.1 200 OK\r\nLast-Modified: {lm}\r\nDate: {date}\r\n")
    };
    // (stored head, the 206's fields, combined)
    let table: Vec<(String, Fields, bool)> = vec![
        (etag("\"v1\""), &[("ETag", "\"v1\"")], true),
        (etag("\"v1\""), &[("ETag", " \"v1\" ")], true),
        (etag("\"v1\""), &[("ETag", "\"v2\"")], false),
        (etag("\"v1\""), &[("ETag", "W/\"v1\"")], false),
        (etag("W/\"v1\""), &[("ETag", "W/\"v1\"")], false),
        (etag("\"v1\""), &[("Last-Modified", LM)], false),
        (etag("\"v1\""), &[], false),
        // Last-Modified: strong only at least 60 s before the stored Date.
        (lm(LM, DATE), &[("Last-Modified", LM)], true),
        (lm(LM, AFTER), &[("Last-Modified", LM)], true),
        (
            lm(LM, "Tue, 14 Nov 2023 22:14:19 GMT"),
            &[("Last-Modified", LM)],
            false,
        ),
        (lm(LM, DATE), &[("Last-Modified", BEFORE)], false),
        (
            lm(LM, DATE),
            &[("Last-Modified", LM), ("ETag", "\"v1\"")],
            false,
        ),
        (
            format!("HTTP/1.1 200 OK\r\nLast-Modified: {LM}\r\n"),
            &[("Last-Modified", LM)],
            false,
        ),
        (lm(LM, DATE), &[], false),
    ];
    for (stored, new, want) in table {
        assert_eq!(
            same_strong_validator(stored.as_bytes(), &hs(new)),
            want,
            "{stored:?} {new:?}"
        );
    }
}

#[test]
fn strong_validators_of_a_response() {
    let table: [(Fields, bool); 6] = [
        (&[("ETag", "\"v1\"")], true),
        (&[("ETag", "W/\"v1\"")], false),
        (&[("Last-Modified", LM), ("Date", AFTER)], true), // LM + 60 s
        (
            &[
                ("Last-Modified", LM),
                ("Date", "Tue, 14 Nov 2023 22:14:19 GMT"),
            ],
            false,
        ),
        (&[("Last-Modified", LM)], false),
        (&[], false),
    ];
    for (fields, want) in table {
        assert_eq!(has_strong_validator(&hs(fields)), want, "{fields:?}");
    }
}
