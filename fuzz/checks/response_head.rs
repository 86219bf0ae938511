// Response heads to each kind of request method: never panic, consistent head length.
//
// Shared by the libFuzzer target (`fuzz_targets/response_head.rs`) and the corpus replay in
// `cargo test` (`shared/tests/fuzz_replay.rs`), both through `include!`: plain `//`
// comments only, no inner attributes.

use shared::http::{
    limits::MAX_HEADERS_CAP, parse_response, BodyDecoder, Limits, RequestMethod, Status,
};

pub fn check(data: &[u8]) {
    let limits = Limits {
        max_head: 1024,
        max_headers: 16,
        ..Limits::default()
    };
    for method in [
        RequestMethod::Other,
        RequestMethod::Head,
        RequestMethod::Connect,
    ] {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
        if let Ok(Status::Complete(h)) = parse_response(data, &mut headers, method, &limits) {
            assert!(h.head_len <= data.len());
            // Differential: plain httparse reads the very same message from these bytes.
            let mut plain_headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
            let mut plain = httparse::Response::new(&mut plain_headers);
            assert_eq!(
                plain.parse(data),
                Ok(httparse::Status::Complete(h.head_len))
            );
            assert_eq!(plain.code, Some(h.status));
            assert_eq!(plain.reason, Some(h.reason));
            assert_eq!(plain.version, Some(h.version as u8));
            assert_eq!(plain.headers, h.headers);
            assert!(h.status >= 100 && h.status <= 999);
            let mut d = BodyDecoder::new(h.body, &limits);
            let _ = d.decode(&data[h.head_len..]);
            let _ = d.finish();
        }
    }
}
