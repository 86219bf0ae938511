//! Large Content-Length bodies spliced from the upstream's socket to the client's
//! (`proxy/src/splice.rs`): byte-exact, never mixed between responses, never passed off as
//! complete when the upstream stops early, and the same through the relay buffer when
//! splicing is off.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

/// What the scripted origin answers to one request: a body of `len` bytes announced, of which
/// it sends `send` and then closes if `send < len`.
#[derive(Clone, Copy)]
struct Reply {
    len: usize,
    send: usize,
}

fn full(len: usize) -> Reply {
    Reply { len, send: len }
}

/// The body byte at `i` of the `n`th response: each response's bytes differ from the others'.
fn byte(n: usize, i: usize) -> u8 {
    (n * 7 + i % 251) as u8
}

/// An origin that serves `replies` in order on keep-alive connections, the head and the body
/// in separate writes (as nginx's sendfile sends them), and stops after the last.
fn origin(replies: Vec<Reply>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        let mut next = 0;
        while next < replies.len() {
            let Ok((s, _)) = l.accept() else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut s = s;
            while next < replies.len() {
                // Read one request head.
                let mut line = String::new();
                let mut got = false;
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) if line == "\r\n" => {
                            got = true;
                            break;
                        }
                        Ok(_) => {}
                    }
                }
                if !got {
                    break;
                }
                let Reply { len, send } = replies[next];
                let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
                let body: Vec<u8> = (0..send).map(|i| byte(next, i)).collect();
                next += 1;
                if s.write_all(head.as_bytes()).is_err() || s.write_all(&body).is_err() {
                    break;
                }
                if send < len {
                    // Cut short: the connection ends before the body does.
                    break;
                }
            }
        }
    });
    addr
}

/// Send a GET on `c` and read the response: its Content-Length and the body bytes that came
/// before the end of the stream (all of them when the response is whole).
fn get(c: &mut TcpStream) -> (usize, Vec<u8>) {
    c.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = c.read(&mut b).expect("response head");
        assert_eq!(
            n,
            1,
            "the connection ended inside the head: {:?}",
            tests::text(&head)
        );
        head.push(b[0]);
    }
    let head = tests::text(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a Content-Length")
        .parse()
        .unwrap();
    let mut body = vec![0u8; len];
    let mut at = 0;
    while at < len {
        match c.read(&mut body[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) => panic!("reading the body after {at} of {len} bytes: {e}"),
        }
    }
    body.truncate(at);
    (len, body)
}

fn expected(n: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| byte(n, i)).collect()
}

fn client(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

#[test]
fn large_bodies_are_spliced_byte_exact_and_the_same_without_splicing() {
    let sizes = [100_000, 16 * 1024 + 1, 3_000_000, 200_000];
    for d in tests::drivers() {
        for splice in [true, false] {
            let o = origin(sizes.iter().map(|&n| full(n)).collect());
            let mut extra = vec!["--driver", tests::driver_flag(d)];
            if !splice {
                extra.push("--no-splice");
            }
            let (p, addr) = tests::start_proxy(&[o], &extra);
            let mut c = client(addr);
            for (n, &len) in sizes.iter().enumerate() {
                let (announced, body) = get(&mut c);
                assert_eq!(announced, len);
                assert!(
                    body == expected(n, len),
                    "{d:?} splice={splice}: response {n} differs ({} bytes)",
                    body.len()
                );
            }
            let spliced = p.stats()[0].spliced.get();
            if splice {
                // The first response on a fresh upstream connection may come whole with its
                // head; from then on the connection is read for splicing.
                assert!(spliced >= 3, "{d:?}: {spliced} of 4 bodies spliced");
            } else {
                assert_eq!(spliced, 0, "{d:?}: --no-splice spliced {spliced}");
            }
        }
    }
}

#[test]
fn a_spliced_body_cut_short_is_never_passed_off_as_complete() {
    for d in tests::drivers() {
        // The second body (on the connection that splices) stops at 50,000 of 500,000 bytes.
        let o = origin(vec![
            full(100_000),
            Reply {
                len: 500_000,
                send: 50_000,
            },
            full(20_000),
        ]);
        let (p, addr) = tests::start_proxy(&[o], &["--driver", tests::driver_flag(d)]);
        let mut c = client(addr);
        let (_, body) = get(&mut c);
        assert!(body == expected(0, 100_000));
        let (announced, body) = get(&mut c);
        assert_eq!(announced, 500_000);
        assert!(
            body.len() < announced && body[..] == expected(1, 500_000)[..body.len()],
            "{d:?}: {} bytes of a cut body, not a prefix of it or not short",
            body.len()
        );
        // The connection was closed: end of stream, not a timeout.
        let mut rest = [0u8; 1];
        assert_eq!(c.read(&mut rest).expect("end of stream"), 0);
        assert!(
            p.stats()[0].spliced.get() <= 1,
            "a cut body counted as spliced"
        );
        // The proxy goes on serving, from a fresh upstream connection.
        let (_, body) = get(&mut client(addr));
        assert!(body == expected(2, 20_000), "{d:?}: the next response");
    }
}

#[test]
fn a_client_gone_mid_splice_leaves_no_bytes_for_the_next_response() {
    for d in tests::drivers() {
        let o = origin(vec![full(100_000), full(4_000_000), full(300_000)]);
        let (_p, addr) = tests::start_proxy(&[o], &["--driver", tests::driver_flag(d)]);
        let mut c = client(addr);
        let (_, body) = get(&mut c);
        assert!(body == expected(0, 100_000));
        // Ask for 4 MB, read a little and go: the pipe may be left holding bytes of it.
        c.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut some = [0u8; 1000];
        c.read_exact(&mut some).unwrap();
        drop(c);
        // The next client's response is its own, byte for byte.
        let (_, body) = get(&mut client(addr));
        assert!(body == expected(2, 300_000), "{d:?}: the next response");
    }
}
