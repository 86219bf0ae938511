// Request heads: never panic; a head that parses reads the same to plain httparse, and a
// prefix cut inside it is never complete.
//
// Shared by the libFuzzer target (`fuzz_targets/request_head.rs`) and the corpus replay in
// `cargo test` (`shared/tests/fuzz_replay.rs`), both through `include!`: plain `//`
// comments only, no inner attributes.

use shared::http::{limits::MAX_HEADERS_CAP, parse_request, BodyDecoder, Limits, Status};

pub fn check(data: &[u8]) {
    let limits = Limits {
        max_request_line: 256,
        max_head: 1024,
        max_headers: 16,
        ..Limits::default()
    };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let full = match parse_request(data, &mut headers, &limits) {
        Ok(Status::Complete(h)) => {
            // Differential: plain httparse reads the very same message from these bytes (a
            // request line in HTTP/1.2 to 1.9, which the codec reads as 1.1 and httparse
            // refuses, is given to httparse spelled HTTP/1.1).
            let as_11 = written_as_http11(data);
            let mut plain_headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
            let mut plain = httparse::Request::new(&mut plain_headers);
            assert_eq!(
                plain.parse(as_11.as_deref().unwrap_or(data)),
                Ok(httparse::Status::Complete(h.head_len))
            );
            assert_eq!(plain.method, Some(h.method));
            assert_eq!(plain.path, Some(h.target));
            assert_eq!(plain.version, Some(h.version as u8));
            assert_eq!(plain.headers, h.headers);
            Ok(Some((
                h.head_len,
                h.body,
                h.keep_alive,
                h.authority.map(<[u8]>::to_vec),
            )))
        }
        Ok(Status::Partial) => Ok(None),
        Err(e) => Err(e),
    };
    if let Ok(Some((head_len, body, _, _))) = &full {
        assert!(*head_len <= data.len());
        // The body decoder accepts whatever follows.
        let mut d = BodyDecoder::new(*body, &limits);
        let _ = d.decode(&data[*head_len..]);
        // A prefix cut inside the head is never complete.
        let cut = head_len / 2;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
        assert!(!matches!(
            parse_request(&data[..cut], &mut headers, &limits),
            Ok(Status::Complete(_))
        ));
    }
}

// `data` with its request line's `HTTP/1.x` (x from 2 to 9) written `HTTP/1.1`, or `None`.
fn written_as_http11(data: &[u8]) -> Option<Vec<u8>> {
    let lead = data.iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
    let lf = lead + data[lead..].iter().position(|&b| b == b'\n')?;
    let end = if data[lf - 1] == b'\r' { lf - 1 } else { lf };
    match data.get(end.checked_sub(8)?..end)? {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9'] => {
            let mut copy = data.to_vec();
            copy[end - 1] = b'1';
            Some(copy)
        }
        _ => None,
    }
}
