//! Property test with a seeded xorshift PRNG (no external crate): random bytes and random
//! splits of valid messages never panic and never disagree with the one-shot parse.

use super::*;

pub(super) struct XorShift(pub(super) u64);

impl XorShift {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const VALID: &[&[u8]] = &[
    b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\nAccept: */*\r\n\r\n",
    b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: v\r\n\r\n",
    b"PUT /x HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 4\r\n\r\nbody",
];

const RESPONSES: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.0 200 OK\r\n\r\nuntil close",
];

/// Bytes that make the parsers take interesting branches.
const ALPHABET: &[u8] = b"GET HTP/1.0\r\n:;=\"\t \0\x7f\xffHost:Content-Length:Transfer-Encoding:chunked0123456789abcdefABCDEF";

fn random_message(rng: &mut XorShift) -> Vec<u8> {
    let len = rng.below(96);
    let mut v: Vec<u8> = (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len())])
        .collect();
    // Sometimes start from a valid message and corrupt a few bytes.
    if rng.below(2) == 0 {
        v = VALID[rng.below(VALID.len())].to_vec();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(v.len());
            v[i] = match rng.below(3) {
                0 => ALPHABET[rng.below(ALPHABET.len())],
                1 => rng.next() as u8,
                _ => b'\n',
            };
        }
    }
    v
}

#[test]
fn random_inputs_never_panic_and_prefixes_agree() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let limits = Limits::default();
    for _ in 0..3000 {
        let msg = random_message(&mut rng);
        let full = req(&msg);
        if let Ok(Status::Complete(h)) = &full {
            assert_request_agrees_with_httparse(&msg, h);
        }
        if let Ok(Status::Complete(h)) = res(&msg, RequestMethod::Other) {
            assert_response_agrees_with_httparse(&msg, &h);
        }
        // A random prefix agrees with the whole: Partial before a complete head's end and
        // the same head from there on; Partial under a Partial whole (less input cannot
        // finish a head); Partial or the very same error under a failed whole.
        let n = rng.below(msg.len() + 1);
        let p = req(&msg[..n]);
        match &full {
            Ok(Status::Complete(f)) if n >= f.head_len => assert_eq!(p, full, "{msg:?} at {n}"),
            Ok(_) => assert_eq!(p, Ok(Status::Partial), "{msg:?} at {n}"),
            Err(_) if p == Ok(Status::Partial) => {}
            Err(_) => assert_eq!(p, full, "{msg:?} at {n}"),
        }
        assert_prefixes(&msg, |b| res(b, RequestMethod::Other));
        // Bodies: every kind decodes arbitrary bytes without panicking, split or not.
        for kind in [
            BodyKind::Chunked,
            BodyKind::Length(7),
            BodyKind::CloseDelimited,
        ] {
            let whole = decode_pieces(kind, &limits, &[&msg]);
            let split = decode_pieces(kind, &limits, &[&msg[..n], &msg[n..]]);
            assert_same_run(&split, &whole, &msg, &format!("{kind:?} {msg:?} at {n}"));
        }
    }
}

#[test]
fn random_splits_of_valid_messages_agree() {
    let mut rng = XorShift(42);
    let limits = Limits::default();
    for i in 0..2000 {
        let (wire, is_req) = if i % 2 == 0 {
            (VALID[rng.below(VALID.len())], true)
        } else {
            (RESPONSES[rng.below(RESPONSES.len())], false)
        };
        // One-shot: head, then body.
        let (head_len, kind) = if is_req {
            let Ok(Status::Complete(h)) = req(wire) else {
                panic!("{wire:?}")
            };
            (h.head_len, h.body)
        } else {
            let Ok(Status::Complete(h)) = res(wire, RequestMethod::Other) else {
                panic!()
            };
            (h.head_len, h.body)
        };
        let whole = decode_pieces(kind, &limits, &[&wire[head_len..]]);
        assert!(whole.result.is_ok(), "{wire:?}: {whole:?}");
        // Random cut points over the whole message, fed the way a connection would.
        let mut cuts: Vec<usize> = (0..rng.below(6))
            .map(|_| rng.below(wire.len() + 1))
            .collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut last = 0;
        for c in cuts.into_iter().chain([wire.len()]) {
            pieces.push(&wire[last..c]);
            last = c;
        }
        // Head: grow the buffer piece by piece until complete.
        let mut buf = Vec::new();
        let mut next = 0;
        let got_head_len = loop {
            let parsed = if is_req {
                req(&buf).map(|s| match s {
                    Status::Complete(h) => Some(h.head_len),
                    Status::Partial => None,
                })
            } else {
                res(&buf, RequestMethod::Other).map(|s| match s {
                    Status::Complete(h) => Some(h.head_len),
                    Status::Partial => None,
                })
            };
            match parsed {
                Ok(Some(n)) => break n,
                Ok(None) => {
                    buf.extend_from_slice(pieces[next]);
                    next += 1;
                }
                Err(e) => panic!("{wire:?}: {e:?}"),
            }
        };
        assert_eq!(got_head_len, head_len);
        let mut body_pieces: Vec<&[u8]> = vec![&buf[head_len..]];
        body_pieces.extend_from_slice(&pieces[next..]);
        assert_eq!(
            decode_pieces(kind, &limits, &body_pieces),
            whole,
            "{wire:?}"
        );
    }
}
