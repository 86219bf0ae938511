//! Helpers for the proxy's end-to-end tests: a proxy config over given origins, and a small
//! blocking HTTP/1.1 client that reads responses with the shared codec.
#![allow(dead_code)]

use proxy::config::{
    Action, Balance, Config, HeaderOptions, Listener, ProxyLimits, Route, Server, Timeouts,
    UpstreamGroup,
};
use shared::http::{parse_response, BodyDecoder, BodyKind, RequestMethod, Status};
use shared::runtime::{DriverChoice, RuntimeConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One worker, unpinned, one listener on 127.0.0.1:0, one group over `origins`, route `/`.
pub fn config(origins: &[SocketAddr]) -> Config {
    Config {
        runtime: RuntimeConfig {
            workers: 1,
            pin: false,
            driver: DriverChoice::Auto,
            entries: 256,
        },
        listeners: vec![Listener {
            addr: "127.0.0.1:0".parse().unwrap(),
            backlog: 128,
        }],
        groups: vec![group("default", origins)],
        routes: vec![Route {
            host: None,
            path_prefix: "/".into(),
            action: Action::Proxy { group: 0 },
        }],
        timeouts: Timeouts {
            shutdown: Duration::from_secs(2),
            ..Timeouts::default()
        },
        headers: HeaderOptions::default(),
        limits: ProxyLimits::default(),
        source: "test".into(),
    }
}

pub fn group(name: &str, origins: &[SocketAddr]) -> UpstreamGroup {
    UpstreamGroup {
        name: name.into(),
        servers: origins
            .iter()
            .map(|a| Server {
                name: a.to_string(),
                addrs: vec![*a],
                weight: 1,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
            })
            .collect(),
        balance: Balance::RoundRobin,
        keepalive: 64,
        keepalive_timeout: Duration::from_secs(30),
        keepalive_requests: 1000,
    }
}

/// A started proxy and its address; shut down on drop.
pub struct Proxy {
    pub addr: SocketAddr,
    running: Option<proxy::Running>,
}

impl Proxy {
    pub fn start(cfg: Config) -> Proxy {
        let running = proxy::start(cfg).expect("proxy starts");
        Proxy {
            addr: running.listen_addrs()[0],
            running: Some(running),
        }
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    pub fn running(&self) -> &proxy::Running {
        self.running.as_ref().unwrap()
    }

    pub fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().expect("clean shutdown");
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            let _ = r.shutdown();
        }
    }
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The raw head as received.
    pub head: Vec<u8>,
    pub chunked: bool,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A blocking client on one connection.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
        self.response()
    }

    fn fill(&mut self) -> std::io::Result<usize> {
        let mut tmp = [0u8; 65536];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(n) => {
                    self.buf.extend_from_slice(&tmp[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Read one response to a non-HEAD request; panics on a malformed or truncated one.
    pub fn response(&mut self) -> Response {
        self.try_response(RequestMethod::Other)
            .expect("a complete response")
    }

    /// Bytes received until the peer closes (or the read timeout).
    pub fn read_to_close(&mut self) -> Vec<u8> {
        while let Ok(n) = self.fill() {
            if n == 0 {
                break;
            }
        }
        std::mem::take(&mut self.buf)
    }

    /// Whether the server closed the connection (EOF with nothing more).
    pub fn is_closed(&mut self) -> bool {
        self.buf.is_empty() && matches!(self.fill(), Ok(0) | Err(_))
    }

    /// One response; `Err` describes what went wrong (EOF mid-message included).
    pub fn try_response(&mut self, method: RequestMethod) -> Result<Response, String> {
        let limits = shared::http::Limits::default();
        loop {
            let mut storage = [httparse::EMPTY_HEADER; 128];
            let parsed = match parse_response(&self.buf, &mut storage, method, &limits) {
                Ok(Status::Complete(h)) => Some((
                    h.status,
                    h.headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_string(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect::<Vec<_>>(),
                    h.head_len,
                    h.body,
                )),
                Ok(Status::Partial) => None,
                Err(e) => return Err(format!("bad response head: {e}")),
            };
            if let Some((status, headers, head_len, kind)) = parsed {
                if (100..200).contains(&status) && status != 101 {
                    self.buf.drain(..head_len);
                    continue;
                }
                let head = self.buf[..head_len].to_vec();
                self.buf.drain(..head_len);
                let body = self.body(kind)?;
                return Ok(Response {
                    status,
                    headers,
                    body,
                    head,
                    chunked: kind == BodyKind::Chunked,
                });
            }
            match self.fill() {
                Ok(0) => return Err("closed before the response head".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    fn body(&mut self, kind: BodyKind) -> Result<Vec<u8>, String> {
        if kind == BodyKind::Tunnel {
            return Ok(Vec::new());
        }
        let mut dec = BodyDecoder::new(kind, &shared::http::Limits::default());
        let mut body = Vec::new();
        loop {
            while !self.buf.is_empty() {
                let d = dec
                    .decode(&self.buf)
                    .map_err(|e| format!("bad body: {e}"))?;
                body.extend_from_slice(d.data);
                let (consumed, done) = (d.consumed, d.done);
                self.buf.drain(..consumed);
                if done {
                    return Ok(body);
                }
                if consumed == 0 {
                    break;
                }
            }
            if dec.is_done() {
                return Ok(body);
            }
            match self.fill() {
                Ok(0) => {
                    return dec
                        .finish()
                        .map(|_| body)
                        .map_err(|e| format!("truncated body: {e}"))
                }
                Ok(_) => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }

    /// Raw bytes already buffered (after a tunnel's 101, for example).
    pub fn take_buffered(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// An address nothing listens on (bound, then closed).
pub fn dead_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}
