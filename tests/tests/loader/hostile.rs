//! The loader against misbehaving servers, scripted on raw sockets: each server keeps its own
//! log (the requests it read and answered), and the loader's counts must equal it.

use crate::{opts, run};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a scripted server does with the `nth` request (from 1) of a connection.
#[derive(Debug, Clone)]
pub enum Act {
    /// Write these bytes and read the next request.
    Answer(Vec<u8>),
    /// Write these bytes, then half-close and drain what the client still sends (the
    /// lingering close of RFC 9112 9.6, as nginx does): the requests behind are never taken.
    AnswerAndClose(Vec<u8>),
    /// Write these bytes and close at once without reading the rest (a reset when the client
    /// has sent more).
    AnswerAndDrop(Vec<u8>),
}

/// A scripted server: one thread per connection; `log` counts the requests it read and
/// answered (its access log).
pub struct Scripted {
    pub url: String,
    pub log: Arc<AtomicU64>,
    pub connections: Arc<AtomicU64>,
}

impl Scripted {
    /// Serve with `script(nth, head)`; a request's body (Content-Length) is not read: the
    /// script decides whether the connection goes on.
    pub fn start(script: impl Fn(u64, &[u8]) -> Act + Send + Sync + 'static) -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", l.local_addr().unwrap());
        let log = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let script = Arc::new(script);
        let (lg, cn) = (log.clone(), connections.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                cn.fetch_add(1, Ordering::SeqCst);
                let (script, lg) = (script.clone(), lg.clone());
                std::thread::spawn(move || serve_conn(s, &*script, &lg));
            }
        });
        Scripted {
            url,
            log,
            connections,
        }
    }

    pub fn logged(&self) -> u64 {
        self.log.load(Ordering::SeqCst)
    }
}

fn serve_conn(mut s: TcpStream, script: &dyn Fn(u64, &[u8]) -> Act, log: &AtomicU64) {
    let mut buf = Vec::new();
    let mut nth = 0;
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head: Vec<u8> = buf.drain(..end + 4).collect();
        nth += 1;
        log.fetch_add(1, Ordering::SeqCst);
        match script(nth, &head) {
            Act::Answer(b) => {
                if s.write_all(&b).is_err() {
                    return;
                }
            }
            Act::AnswerAndClose(b) => {
                let _ = s.write_all(&b);
                let _ = s.shutdown(std::net::Shutdown::Write);
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                while matches!(s.read(&mut chunk), Ok(n) if n > 0) {}
                return;
            }
            Act::AnswerAndDrop(b) => {
                let _ = s.write_all(&b);
                return;
            }
        }
    }
}

pub fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

pub fn ok_close(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// nginx's `keepalive_requests 10`: every 10th response on a connection says `Connection:
/// close`, and the pipelined requests behind it are never taken. Those are sent again on a
/// new connection (RFC 9112 9.3.2), not counted as failures: Complete equals the server's log.
#[test]
fn a_clean_close_in_a_pipeline_retries_the_requests_never_taken() {
    let server = Scripted::start(|nth, _| {
        if nth % 10 == 0 {
            Act::AnswerAndClose(ok_close("ok"))
        } else {
            Act::Answer(ok("ok"))
        }
    });
    let mut o = opts(std::slice::from_ref(&server.url), 2);
    o.requests = Some(400);
    o.pipeline = 8;
    let r = run(&o);
    let t = &r.totals;
    assert_eq!(t.attempts, 400, "{t:?}");
    assert_eq!((t.completed, t.failures.total()), (400, 0), "{t:?}");
    assert_eq!(t.completed, server.logged(), "{t:?}");
    // Each connection carried ten; the ones queued behind each tenth went again.
    assert!(t.retried > 0, "{t:?}");
    assert_eq!(
        r.connections_opened,
        server.connections.load(Ordering::SeqCst)
    );
    let text = loader::report::render(&r);
    assert!(
        text.contains(&format!("Retried requests:       {}", t.retried)),
        "{text}"
    );
}

/// A keep-alive connection the server closes while idle (its keep-alive timeout), racing the
/// next request: closed before any byte of the answer, the request is sent again on a new
/// connection. Here every connection answers one request and is closed at once.
#[test]
fn a_reused_connection_closed_before_the_answer_retries_the_request() {
    let server = Scripted::start(|_, _| Act::AnswerAndDrop(ok("ok")));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(30);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!(
        (t.attempts, t.completed, t.failures.total()),
        (30, 30, 0),
        "{t:?}"
    );
    assert_eq!(server.logged(), 30, "{t:?}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 30);
    assert_eq!(r.connections_opened, 30);
    assert!(t.retried > 0, "{t:?}");
}

/// A server that answers a large upload with `413` and `Connection: close` and closes without
/// reading it: the write fails (a reset), but the answer arrived before it and is read, as curl
/// reads it: a completed non-2xx response, not a write error.
#[test]
fn an_answer_read_after_a_failed_write_is_a_completed_response() {
    let server = Scripted::start(|_, _| {
        Act::AnswerAndDrop(
            b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
                .to_vec(),
        )
    });
    let dir = tests::temp_dir("hostile-413");
    let body = dir.join("big");
    std::fs::write(&body, vec![b'x'; 16 << 20]).unwrap();
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    o.method = "POST".into();
    o.body = Some(std::fs::read(&body).unwrap().into());
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.attempts, t.completed, t.non_2xx), (3, 3, 3), "{t:?}");
    assert_eq!(t.failures.total(), 0, "{t:?}");
    assert_eq!(t.status_map().get(&413), Some(&3));
    assert_eq!(server.logged(), 3);
}

/// Bytes after a complete response that nobody asked for (a 204 with a body; a second
/// response): counted as protocol errors and the connection closed, never hidden as a
/// reconnect; their bytes are in Total transferred.
#[test]
fn bytes_after_a_response_are_protocol_errors() {
    let extra = b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello";
    let server = Scripted::start(|_, _| Act::Answer(extra.to_vec()));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(4);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.total()), (4, 0), "{t:?}");
    assert_eq!(t.protocol_errors, 4, "{t:?}");
    assert_eq!(t.bytes_received, 4 * extra.len() as u64, "{t:?}");
    assert_eq!(r.connections_opened, 4);
    let text = loader::report::render(&r);
    assert!(text.contains("Protocol errors:        4"), "{text}");

    // Two answers to one request on a keep-alive connection: the second is nobody's.
    let two = [ok("ok"), ok("ok")].concat();
    let server = Scripted::start(move |_, _| Act::Answer(two.clone()));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.total()), (3, 0), "{t:?}");
    assert_eq!((t.protocol_errors, r.connections_opened), (3, 3), "{t:?}");
    assert_eq!(t.bytes_received, 3 * 2 * ok("ok").len() as u64, "{t:?}");
}

/// A response cut short by the server: its bytes arrived and are in Total transferred,
/// though the request failed.
#[test]
fn bytes_of_failed_responses_are_transferred_bytes() {
    let cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-this";
    let server = Scripted::start(|_, _| Act::AnswerAndDrop(cut.to_vec()));
    let mut o = opts(std::slice::from_ref(&server.url), 1);
    o.requests = Some(3);
    let r = run(&o);
    let t = &r.totals;
    assert_eq!((t.completed, t.failures.read), (0, 3), "{t:?}");
    assert_eq!(t.bytes_received, 3 * cut.len() as u64, "{t:?}");
    let text = loader::report::render(&r);
    assert!(text.contains("no request completed"), "{text}");
}
