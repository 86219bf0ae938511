//! Helpers for the proxy's end-to-end tests: a proxy config over given origins, and a small
//! blocking HTTP/1.1 client that reads responses with the shared codec (heads with its one
//! response reader, `parse_final_response`; bodies with its `BodyDecoder`). For bytes
//! checked by an independent parser, use `crate::raw` instead.

use crate::raw::End;
use proxy::config::{
    Action, Balance, Config, GroupId, HeaderOptions, Listener, ProxyLimits, Route, Server,
    Timeouts, UpstreamGroup,
};
use shared::http::{parse_final_response, BodyDecoder, BodyKind, RequestMethod, Status};
use shared::runtime::{DriverChoice, RuntimeConfig};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One worker, unpinned, one listener on 127.0.0.1:0, one group over `origins`, route `/`.
pub fn config(origins: &[SocketAddr]) -> Config {
    Config {
        runtime: RuntimeConfig {
            workers: 1,
            pin: false,
            pin_forced: false,
            driver: DriverChoice::Auto,
            entries: 256,
            multishot: true,
        },
        splice: true,
        steer: proxy::config::Steer::Kernel,
        listeners: vec![Listener {
            addr: "127.0.0.1:0".parse().unwrap(),
            backlog: 128,
            tls: None,
            proxy_protocol: false,
        }],
        groups: vec![group("default", origins)].into(),
        routes: vec![Route {
            host: None,
            path_prefix: "/".into(),
            action: Action::Proxy {
                group: GroupId::new(0),
                cache: None,
            },
            access: None,
            opts: None,
        }]
        .into(),
        timeouts: Timeouts {
            shutdown: Duration::from_secs(2),
            ..Timeouts::default()
        },
        headers: HeaderOptions::default(),
        limits: ProxyLimits::default(),
        admin: None,
        access_log: None,
        source: "test".into(),
        client_limits: Default::default(),
        client_steering: false,
        retry: None,
    }
}

pub fn group(name: &str, origins: &[SocketAddr]) -> UpstreamGroup {
    UpstreamGroup {
        name: name.into(),
        servers: origins
            .iter()
            .map(|a| Server {
                name: a.to_string(),
                host: a.to_string(),
                addrs: vec![*a],
                weight: 1,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
                max_conns: 0,
            })
            .collect(),
        balance: Balance::RoundRobin,
        hash_key: Default::default(),
        resolve: None,
        keepalive: 64,
        keepalive_timeout: Duration::from_secs(30),
        keepalive_requests: 1000,
        keepalive_check: proxy::config::DEFAULT_KEEPALIVE_CHECK,
        health: None,
        tls: None,
        proxy_protocol: None,
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
    /// The raw head as received, with the interim (1xx) heads skipped before it.
    pub head: Vec<u8>,
    pub chunked: bool,
}

impl Response {
    /// The first value of a header (name case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::raw::header(&self.headers, name)
    }
}

/// Patience of a [`Client`] for each read.
const READ_WAIT: Duration = Duration::from_secs(10);

/// A blocking client on one connection: a `crate::raw::Client` (its connection, its
/// buffer and how it ended; reachable through `Deref`, `c.stream` included) whose responses
/// are read with the shared codec.
pub struct Client {
    raw: crate::raw::Client,
}

impl std::ops::Deref for Client {
    type Target = crate::raw::Client;
    fn deref(&self) -> &crate::raw::Client {
        &self.raw
    }
}

impl std::ops::DerefMut for Client {
    fn deref_mut(&mut self) -> &mut crate::raw::Client {
        &mut self.raw
    }
}

impl Client {
    /// Connect (TCP_NODELAY, reads wait up to 10 s).
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(READ_WAIT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            raw: crate::raw::Client::from_stream(stream),
        }
    }

    /// Write all of `bytes`; an error fails the test.
    pub fn send(&mut self, bytes: &[u8]) {
        self.raw.send(bytes).expect("send");
    }

    /// Read exactly a `100 Continue` interim response (the proxy's answer to `Expect:
    /// 100-continue`, sent as it starts to read the body); anything else fails the test.
    pub fn expect_100(&mut self) {
        let mut cont = [0u8; 25];
        std::io::Read::read_exact(&mut self.raw.stream, &mut cont).expect("the 100 Continue");
        assert_eq!(
            &cont,
            b"HTTP/1.1 100 Continue\r\n\r\n",
            "{:?}",
            String::from_utf8_lossy(&cont)
        );
    }

    pub fn get(&mut self, path: &str) -> Response {
        self.send(&crate::raw::get(path));
        self.response()
    }

    /// Read once (within the stream's read timeout) onto the buffer: the count of bytes,
    /// 0 at EOF, or an error that says how else the read ended.
    fn fill(&mut self) -> Result<usize, String> {
        match self.raw.fill() {
            Ok(n) => Ok(n),
            Err(End::Closed) => Ok(0),
            Err(End::Reset) => Err("read: connection reset".into()),
            Err(End::TimedOut) => Err("read: timed out, the connection still open".into()),
        }
    }

    /// Read one response to a non-HEAD request; panics on a malformed or truncated one.
    pub fn response(&mut self) -> Response {
        self.try_response(RequestMethod::Other)
            .expect("a complete response")
    }

    /// Bytes received until the peer closes (EOF or a reset). Panics if 10 s pass first: a
    /// connection that stays open is not a closed one.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let r = self.raw.until_close(READ_WAIT);
        assert!(
            r.end != End::TimedOut,
            "the connection did not close: {}",
            crate::raw::show(&r)
        );
        r.bytes
    }

    /// Assert that the server closed the connection (EOF or a reset) with nothing more sent.
    /// A read timeout fails: the connection is still open.
    pub fn assert_closed(&mut self) {
        crate::raw::assert_closed_within(&mut self.raw, READ_WAIT, "inproc::Client");
    }

    /// One response; `Err` describes what went wrong (EOF mid-message included). Interim
    /// (1xx) heads are skipped by the shared reader, `parse_final_response`, as the proxy and
    /// the loader skip them.
    pub fn try_response(&mut self, method: RequestMethod) -> Result<Response, String> {
        let limits = shared::http::Limits::default();
        loop {
            let mut storage = [httparse::EMPTY_HEADER; 128];
            let buf = self.raw.buffered();
            let parsed = match parse_final_response(buf, &mut storage, method, &limits) {
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
                let head = self.raw.buffered()[..head_len].to_vec();
                self.raw.consume(head_len);
                let body = self.body(kind)?;
                return Ok(Response {
                    status,
                    headers,
                    body,
                    head,
                    chunked: kind == BodyKind::Chunked,
                });
            }
            if self.fill()? == 0 {
                return Err("closed before the response head".into());
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
            while !self.raw.buffered().is_empty() {
                let d = dec
                    .decode(self.raw.buffered())
                    .map_err(|e| format!("bad body: {e}"))?;
                body.extend_from_slice(d.data);
                let (consumed, done) = (d.consumed, d.done);
                self.raw.consume(consumed);
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
            if self.fill()? == 0 {
                return dec
                    .finish()
                    .map(|_| body)
                    .map_err(|e| format!("truncated body: {e}"));
            }
        }
    }
}
