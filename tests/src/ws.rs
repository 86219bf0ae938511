//! A WebSocket-ish origin for tunnel tests: an upgrade gets a 101 and its bytes echoed until
//! the proxy ends the tunnel; any other request a `200` (its body the origin's `name`, or the
//! request's path without one), then a close. No framing: a tunnel carries bytes.

use std::io::{Read, Write};
use std::net::SocketAddr;

/// Start the origin on 127.0.0.1, port 0: its address.
pub fn echo_origin(name: Option<&'static str>) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the origin");
    let addr = l.local_addr().expect("the origin's address");
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let Ok(head) = crate::raw::read_request_head(&mut s, &mut Vec::new()) else {
                    return;
                };
                let head = crate::text(&head);
                if !head.contains("Upgrade: websocket") {
                    let path = head.split(' ').nth(1).unwrap_or_default();
                    let body = name.unwrap_or(path);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = s.write_all(answer.as_bytes());
                    return;
                }
                let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                            Connection: Upgrade\r\n\r\n";
                if s.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = s.read(&mut buf) {
                    if s.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}
