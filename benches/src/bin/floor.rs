//! The floor under `benches/return_vs_nginx.sh`: a server on our runtime that does nothing but
//! read and answer. It answers every request head with the same 302 our `return` route sends
//! (256 bytes on the wire, to a random avatar 1-21), on one io_uring worker with the fast flags
//! and the proxy's listener options, reading through a multishot receive from a connection's
//! second request on, as the proxy does. It does
//! not parse, route, render templates, read the clock or keep deadlines, and closes only when
//! the client does or asks to (an HTTP/1.0 request without `keep-alive`; one with it gets no
//! `Connection: keep-alive` back, so `ab -k` is not a load for it). What it costs per
//! request is what the kernel and the runtime cost; what the proxy costs above it is the
//! proxy's own work. A measuring instrument, not a server: it never times anything out.
//!
//!   floor 127.0.0.1:8080 [--no-multishot]

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use shared::runtime::DriverKind;
use std::net::SocketAddr;

const HEAD: &[u8] = b"HTTP/1.1 302 Found\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\n\
Content-Type: text/html\r\nContent-Length: 110\r\nLocation: http://img.example.com/";
const TAIL: &[u8] = b".png\r\n\r\n<html>\r\n<head><title>302 Found</title></head>\r\n<body>\r\n\
<center><h1>302 Found</h1></center>\r\n</body>\r\n</html>\r\n";

fn main() {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = match args.next().map(|a| a.parse()) {
        Some(Ok(a)) => a,
        _ => {
            eprintln!("usage: floor ADDR:PORT [--no-multishot]");
            std::process::exit(2);
        }
    };
    let multishot = args.next().as_deref() != Some("--no-multishot");
    // The proxy's listener options: TCP_NODELAY inherited, TCP_DEFER_ACCEPT.
    let listener = shared::net::reuseport_listener(addr, 4096).and_then(|l| {
        shared::net::nodelay_listener(&l)?;
        shared::net::defer_accept_listener(&l)?;
        Ok(l)
    });
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            eprintln!("floor: cannot listen on {addr}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("floor: listening on {addr}, io_uring, multishot receives {multishot}");
    let run = shared::runtime::run_on(DriverKind::UringFast, 4096, async move {
        // The loop never ends: the block's value is why it could not start.
        let listener = match TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => return e,
        };
        let mut seed = std::process::id() as u64 | 1;
        loop {
            let Ok((s, _)) = listener.accept().await else {
                // Out of descriptors, say: don't spin.
                monoio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            };
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            monoio::spawn(serve(s, multishot, seed | 1));
        }
    });
    match run {
        Ok(e) => eprintln!("floor: {e}"),
        Err(e) => eprintln!("floor: io_uring with the fast flags is unavailable here: {e}"),
    }
    std::process::exit(1);
}

async fn serve(mut s: TcpStream, multishot: bool, mut rng: u64) {
    let mut inb: Vec<u8> = Vec::with_capacity(4096);
    let mut out: Vec<u8> = Vec::with_capacity(512);
    let mut answered = 0u64;
    loop {
        let len = inb.len();
        if inb.capacity() - len < 1024 {
            inb.reserve(4096);
        }
        let cap = inb.capacity();
        let (r, slice) = s
            .read(monoio::buf::IoBufMut::slice_mut(inb, len..cap))
            .await;
        inb = slice.into_inner();
        match r {
            Ok(n) if n > 0 => {}
            _ => return,
        }
        // Every whole head in the buffer gets an answer (pipelined ones too).
        let mut close = false;
        let mut start = 0;
        while let Some(end) = find(&inb[start..], b"\r\n\r\n") {
            let head = &inb[start..start + end];
            close |= is_http10_close(head);
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            out.extend_from_slice(HEAD);
            push_decimal(&mut out, 1 + rng % 21);
            out.extend_from_slice(TAIL);
            start += end + 4;
            answered += 1;
        }
        inb.drain(..start);
        if out.is_empty() {
            continue;
        }
        let (r, buf) = s.write_all(out).await;
        out = buf;
        out.clear();
        if r.is_err() || close {
            return;
        }
        if multishot && answered == 1 {
            s.enable_multishot_recv();
        }
    }
}

/// HTTP/1.0 without `keep-alive` anywhere in the head: answered, then closed (ab without -k).
fn is_http10_close(head: &[u8]) -> bool {
    let line_end = find(head, b"\r\n").unwrap_or(head.len());
    head[..line_end].ends_with(b"HTTP/1.0")
        && !head
            .windows(10)
            .any(|w| w.eq_ignore_ascii_case(b"keep-alive"))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn push_decimal(out: &mut Vec<u8>, n: u64) {
    if n >= 10 {
        out.push(b'0' + (n / 10) as u8);
    }
    out.push(b'0' + (n % 10) as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http10_without_keep_alive_closes() {
        assert!(is_http10_close(b"GET /avatar HTTP/1.0\r\nHost: a"));
        assert!(!is_http10_close(
            b"GET /avatar HTTP/1.0\r\nConnection: Keep-Alive"
        ));
        assert!(!is_http10_close(b"GET /avatar HTTP/1.1\r\nHost: a"));
        assert!(!is_http10_close(b"GET /HTTP/1.0 HTTP/1.1\r\nHost: a"));
    }

    #[test]
    fn numbers_1_to_21_are_written_whole() {
        for n in 1..=21u64 {
            let mut out = Vec::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }
}
