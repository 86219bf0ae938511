//! Streamed request bodies whose upstream answers before reading them whole, with an
//! answer that does not refuse them (a 2xx that keeps its connection): RFC 9110/9112 let a
//! client stop sending only on an error or a close, and nginx and HAProxy keep sending. So
//! the rest of the body goes on to the upstream while the answer goes to the client, both
//! at once, both to their end; then both connections stay. (Answers that refuse the body,
//! an error or a close, stop it: `early.rs`.)

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;
use tests::inproc::{config, Proxy};
use tests::raw::{read_once, read_request_head, End};

/// The request body's size in the first test (over the 64 KiB read whole first).
const BODY: usize = 200_000;

/// Patience of the scripted origin for each read of the body, and of the test for an event.
const WAIT: Duration = Duration::from_secs(5);

/// What the origin saw of one request body: the bytes, and how the reading ended (`None`:
/// it had all of them).
type Got = (usize, Option<End>);

/// Read up to `n` body bytes (`pending` holds those that came with the head), each read
/// within `WAIT`: the bytes read, and how the stream ended if it did first. A timeout is
/// reported as one, never as an end of stream.
fn read_body(s: &mut TcpStream, pending: &mut Vec<u8>, n: usize) -> Got {
    s.set_read_timeout(Some(WAIT)).unwrap();
    while pending.len() < n {
        if let Err(end) = read_once(s, pending) {
            return (pending.len(), Some(end));
        }
    }
    let got = pending.len().min(n);
    pending.drain(..got);
    (got, None)
}

/// A streaming origin on one connection: on a request head, `200` (chunked) and `start` at
/// once, then it reads the whole body (`Content-Length: BODY`) and ends the answer with
/// `got N`; what it got goes to `report`. Any other request (the client's next one, on the
/// pooled connection) gets `200 ok`. New connections are counted on `conns`.
fn streaming_origin(report: mpsc::Sender<Got>, conns: mpsc::Sender<()>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        while let Ok((mut s, _)) = l.accept() {
            let _ = conns.send(());
            let report = report.clone();
            std::thread::spawn(move || serve_streaming(&mut s, &report));
        }
    });
    addr
}

fn serve_streaming(s: &mut TcpStream, report: &mpsc::Sender<Got>) {
    let mut pending = Vec::new();
    while let Ok(head) = read_request_head(s, &mut pending) {
        if !head.starts_with(b"POST /up ") {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            continue;
        }
        let start = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nstart\r\n";
        if s.write_all(start).is_err() {
            return;
        }
        let got = read_body(s, &mut pending, BODY);
        let _ = report.send(got);
        let msg = format!("got {}", got.0);
        let end = format!("{:x}\r\n{msg}\r\n0\r\n\r\n", msg.len());
        if got.1.is_some() || s.write_all(end.as_bytes()).is_err() {
            return;
        }
    }
}

/// Read until the client's buffer holds `what` (each read within the client's own timeout,
/// which fails the test as a timeout, never as a close): the text received so far.
fn read_until(c: &mut tests::raw::Client, what: &str) -> String {
    loop {
        let text = String::from_utf8_lossy(c.buffered()).into_owned();
        if text.contains(what) {
            return text;
        }
        if let Err(end) = c.fill() {
            panic!("{end:?} before {what:?} came; got {text:?}");
        }
    }
}

/// Send a POST's head, then its `n`-byte body from another thread (the client reads the
/// answer meanwhile): the first half at once, the second only once the early answer's head
/// arrived (up to `what`), so that the answer always comes while the body is on its way.
/// The writer says whether it wrote the whole body.
fn upload_in_halves(
    c: &mut tests::inproc::Client,
    n: usize,
    what: &str,
) -> std::thread::JoinHandle<bool> {
    c.send(format!("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {n}\r\n\r\n").as_bytes());
    let (go, went) = mpsc::channel::<()>();
    let mut w = c.stream.try_clone().unwrap();
    w.set_write_timeout(Some(WAIT)).unwrap();
    let writer = std::thread::spawn(move || {
        w.write_all(&vec![b'x'; n / 2]).is_ok()
            && went.recv_timeout(WAIT).is_ok()
            && w.write_all(&vec![b'y'; n - n / 2]).is_ok()
    });
    let text = read_until(c, what);
    let head = &text[..text.find("\r\n\r\n").map_or(text.len(), |i| i + 4)];
    assert!(
        !head.to_ascii_lowercase().contains("connection: close"),
        "the early answer keeps the client connection: {head:?}"
    );
    go.send(()).unwrap();
    writer
}

/// The reproducer: the origin answers `200` (chunked, no close) on the head of a 200,000-byte
/// POST, then reads the body and finishes its answer. It must get all of the body, the client
/// all of the answer, and the client connection must then carry another request, over the
/// same upstream connection (pooled once both ended).
#[test]
fn an_early_200_gets_the_whole_body_and_keeps_both_connections() {
    let (report, got) = mpsc::channel();
    let (conns, opened) = mpsc::channel();
    let up = streaming_origin(report, conns);
    let p = Proxy::start(config(&[up]));
    let mut c = p.connect();
    let writer = upload_in_halves(&mut c, BODY, "start\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.head));
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        format!("startgot {BODY}"),
        "the whole answer, after the whole body"
    );
    assert_eq!(r.header("connection"), None, "the client connection stays");
    assert!(writer.join().unwrap(), "the client wrote its whole body");
    assert_eq!(got.recv_timeout(WAIT).unwrap(), (BODY, None));
    let next = c.get("/next");
    assert_eq!((next.status, &next.body[..]), (200, &b"ok"[..]));
    assert!(opened.recv_timeout(WAIT).is_ok());
    assert!(
        opened.try_recv().is_err(),
        "the upstream connection was pooled and reused"
    );
    p.stop();
}

/// The size of the request body and of each half of the answer in the full-duplex test.
const MIB: usize = 1 << 20;

/// An origin that answers `200` with a 2 MiB body on the request head: the first MiB before
/// it reads any of the 1 MiB request body, the second once it read all of it. What it got
/// goes to `report`.
fn answer_first_origin(report: mpsc::Sender<Got>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut pending = Vec::new();
        if read_request_head(&mut s, &mut pending).is_err() {
            return;
        }
        s.set_write_timeout(Some(WAIT)).unwrap();
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 2 * MIB);
        let half = vec![b'a'; MIB];
        if s.write_all(head.as_bytes()).is_err() || s.write_all(&half).is_err() {
            let _ = report.send((0, Some(End::TimedOut)));
            return;
        }
        let got = read_body(&mut s, &mut pending, MIB);
        let _ = report.send(got);
        let _ = s.write_all(&half);
    });
    addr
}

/// Both directions at once: the origin writes a MiB of its answer before it reads the 1 MiB
/// body and the next MiB only after, and the client writes its body while it reads the answer.
/// Relayed one after the other (either way round), each side would wait for the other for
/// ever; relayed at once, both complete.
#[test]
fn an_early_answer_and_the_body_flow_at_once() {
    let (report, got) = mpsc::channel();
    let up = answer_first_origin(report);
    let p = Proxy::start(config(&[up]));
    let mut c = p.connect();
    let writer = upload_in_halves(&mut c, MIB, "\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.head));
    assert_eq!(r.body.len(), 2 * MIB);
    assert!(writer.join().unwrap(), "the client wrote its whole body");
    assert_eq!(got.recv_timeout(WAIT).unwrap(), (MIB, None));
    p.stop();
}

/// A POST of `version` whose body stops half-way after the streaming origin's early 200,
/// through a proxy with a 300 ms body timeout: the proxy, the client, and what the origin got
/// of the body (the client's half, and how its reading ended).
fn stall_after_an_early_200(version: &str) -> (Proxy, tests::inproc::Client, Got) {
    let (report, got) = mpsc::channel();
    let (conns, _opened) = mpsc::channel();
    let up = streaming_origin(report, conns);
    let mut cfg = config(&[up]);
    cfg.timeouts.body = Duration::from_millis(300);
    let p = Proxy::start(cfg);
    let mut c = p.connect();
    let head = format!("POST /up {version}\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
    c.send(head.as_bytes());
    c.send(&vec![b'x'; BODY / 2]);
    let origin_got = got.recv_timeout(WAIT).unwrap();
    assert_eq!(origin_got.0, BODY / 2);
    (p, c, origin_got)
}

/// An early 200 does not lift the body's pace rules: a client that stops half-way through
/// gets the body timeout, the upstream connection is closed (the origin sees its end) and
/// so is the client's, its answer visibly unfinished.
#[test]
fn a_body_that_stalls_after_an_early_200_closes_both_connections() {
    let (p, mut c, (_, end)) = stall_after_an_early_200("HTTP/1.1");
    assert!(
        matches!(end, Some(End::Closed | End::Reset)),
        "the upstream connection was closed, not left waiting: {end:?}"
    );
    let rest = c.read_to_close();
    let text = String::from_utf8_lossy(&rest);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "not passed off as complete: {text:?}"
    );
    p.stop();
}

/// The same stall from an HTTP/1.0 client: its answer has no length nor chunks, only the
/// close ends it, so a clean close would pass the early answer's first chunk off as the
/// whole body. The connection must end in a reset, as an answer cut upstream does
/// (`failures.rs`, `an_http10_client_sees_a_body_cut_off_upstream_as_a_reset`). Before, the
/// client's own body timeout ended it with a FIN.
#[test]
fn an_http10_answer_cut_by_the_clients_stalled_body_ends_in_a_reset() {
    let (p, mut c, _) = stall_after_an_early_200("HTTP/1.0");
    c.stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut text = Vec::new();
    let end = loop {
        if let Err(end) = tests::raw::read_once(&mut c.stream, &mut text) {
            break end;
        }
    };
    let text = String::from_utf8_lossy(&text);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text:?}");
    assert_eq!(end, End::Reset, "the cut answer ended so: {text:?}");
    p.stop();
}

/// An origin that answers a streamed POST whole at once (`200`, chunked `hello`, keep-alive)
/// without reading its body, tells `answered`, and closes once `close` says so (as Go's
/// net/http does when a handler returns without reading the body).
fn answer_whole_then_close(answered: mpsc::Sender<()>, close: mpsc::Receiver<()>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        if read_request_head(&mut s, &mut Vec::new()).is_err() {
            return;
        }
        let whole = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        let _ = s.write_all(whole);
        let _ = answered.send(());
        let _ = close.recv_timeout(WAIT);
    });
    addr
}

#[test]
fn a_whole_answer_stays_whole_when_the_body_then_fails() {
    // The origin answered whole, then closed without reading the rest of the body: the
    // body's writes fail after the answer went. That is no failed answer: the client gets it
    // and a clean end (for an HTTP/1.0 client the close marks the end of its body, and it
    // was a reset: the whole answer looked cut off).
    for (version, end_of_answer) in [("1.0", &b"hello"[..]), ("1.1", &b"0\r\n\r\n"[..])] {
        let (answered_tx, answered) = mpsc::channel();
        let (close, close_rx) = mpsc::channel();
        let up = answer_whole_then_close(answered_tx, close_rx);
        let p = Proxy::start(config(&[up]));
        let mut c = TcpStream::connect(p.addr).unwrap();
        c.set_read_timeout(Some(WAIT)).unwrap();
        let head = format!("POST /up HTTP/{version}\r\nHost: t\r\nContent-Length: {BODY}\r\n\r\n");
        c.write_all(head.as_bytes()).unwrap();
        c.write_all(&vec![b'x'; 50_000]).unwrap();
        assert_eq!(
            answered.recv_timeout(WAIT),
            Ok(()),
            "HTTP/{version}: no answer"
        );
        let mut got = Vec::new();
        while !got.ends_with(end_of_answer) {
            if let Err(end) = read_once(&mut c, &mut got) {
                panic!(
                    "HTTP/{version}: {end:?} after {:?}",
                    String::from_utf8_lossy(&got)
                );
            }
        }
        close.send(()).unwrap();
        // The rest of the body, into a connection the origin closed.
        let mut w = c.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            for _ in 0..15 {
                if w.write_all(&[b'y'; 10_000]).is_err() {
                    break;
                }
            }
        });
        let end = loop {
            if let Err(end) = read_once(&mut c, &mut got) {
                break end;
            }
        };
        writer.join().unwrap();
        let text = String::from_utf8_lossy(&got);
        assert_eq!(end, End::Closed, "HTTP/{version}: {text:?}");
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\n"),
            "HTTP/{version}: {text:?}"
        );
        p.stop();
    }
}
