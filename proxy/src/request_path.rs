//! The request path without I/O, as one worker takes it: parse a head, route it on its
//! normalised path, decide its action and prepare what the action sends (the upstream head
//! for a proxied route, the whole answer for a `return`). The fuzz target `request_path`
//! (`fuzz/fuzz_targets/`) and its seed replay (below, in `cargo test`) drive the proxy's own
//! code through this, so they check what the proxy does, not a model of it.

use crate::answer::{AnswerCtx, Rng};
use crate::config::Config;
use crate::error::ProxyError;
use crate::generation::Generation;
use crate::request::{prepare_request, ClientAddr, Dispatch, HeadFields, IpText};
use bytes::BytesMut;
use shared::http::BodyKind;
use std::net::IpAddr;
use std::sync::Arc;

/// The Host an upstream head gets when the client's is not kept (`preserve_host = false` or
/// an HTTP/1.0 request without one): the exchange writes the server's name there.
pub const UPSTREAM_HOST: &str = "upstream.invalid";

/// One worker's routing and rewriting state for a config.
pub struct RequestPath {
    gen: Generation,
    rng: Rng,
}

/// What the proxy makes of one request.
#[derive(Debug)]
pub struct Decided {
    /// Bytes of the input the head took.
    pub head_len: usize,
    pub body: BodyKind,
    pub route: crate::config::RouteId,
    pub action: Prepared,
}

/// What the route's action sends.
#[derive(Debug)]
pub enum Prepared {
    /// The complete head sent upstream (Host added as the exchange adds it), with the
    /// client's body framing; `websocket`: an upgrade.
    Upstream { head: Vec<u8>, websocket: bool },
    /// The whole answer of a `return`.
    Answer(Vec<u8>),
    /// A file from a static route (answered by the file server, with I/O).
    Static,
}

impl RequestPath {
    pub fn new(cfg: Config) -> RequestPath {
        RequestPath {
            gen: Generation::new(1, Arc::new(cfg), 1),
            rng: Rng::new(1),
        }
    }

    /// The decision for the request at the start of `buf` from client `ip` (over TLS or
    /// not); `Ok(None)`: the head is incomplete; `Err`: the proxy's error answer.
    pub fn decide(
        &self,
        buf: &[u8],
        ip: IpAddr,
        https: bool,
    ) -> Result<Option<Decided>, ProxyError> {
        let mut ip = IpText::new(ip);
        ip.set_https(https);
        let ctx = AnswerCtx {
            rng: &self.rng,
            draining: false,
        };
        let mut out = BytesMut::new();
        let Some(info) = prepare_request(
            ctx,
            &self.gen,
            buf,
            &mut ClientAddr::new(ip),
            &mut out,
            &mut HeadFields::default(),
        )?
        else {
            return Ok(None);
        };
        let action = match info.dispatch {
            Dispatch::Proxy { .. } | Dispatch::Cached { .. } => {
                if !info.host_written {
                    out.extend_from_slice(b"Host: ");
                    out.extend_from_slice(UPSTREAM_HOST.as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
                Prepared::Upstream {
                    head: out.to_vec(),
                    websocket: info.websocket,
                }
            }
            Dispatch::Answered { .. } | Dispatch::Refused { .. } => Prepared::Answer(out.to_vec()),
            Dispatch::Static { .. } => Prepared::Static,
        };
        Ok(Some(Decided {
            head_len: info.head_len,
            body: info.body,
            route: info.route,
            action,
        }))
    }
}

#[cfg(test)]
mod replay {
    //! The fuzz target's check on every file of the committed seeds (`fuzz/seeds/
    //! request_path/`) and on every prefix of each, as the codec's seeds are replayed.
    include!("../../fuzz/checks/request_path.rs");

    #[test]
    fn seeds_hold_the_invariants() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/request_path");
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(seeds.len() >= 20, "{} seeds", seeds.len());
        // What the whole seeds come to: each kind of decision is reached, so the check
        // checks something of each.
        let (mut up, mut answers, mut files, mut refused) = (0, 0, 0, 0);
        for seed in seeds {
            let data = std::fs::read(&seed).unwrap();
            for end in 0..=data.len() {
                let r = std::panic::catch_unwind(|| check(&data[..end]));
                assert!(r.is_ok(), "{} cut at {end}", seed.display());
            }
            match PATH.with(|p| p.decide(&data, CLIENT, false)) {
                Ok(Some(d)) => match d.action {
                    Prepared::Upstream { .. } => up += 1,
                    Prepared::Answer(_) => answers += 1,
                    Prepared::Static => files += 1,
                },
                Ok(None) => panic!("{}: a seed is a whole head", seed.display()),
                Err(_) => refused += 1,
            }
        }
        let counts = (up, answers, files, refused);
        assert!(
            up >= 10 && answers >= 5 && files >= 1 && refused >= 3,
            "{counts:?}"
        );
    }
}

/// Replays of the loader's and the route/template layer's fuzz targets on their committed
/// seeds (and every prefix of each), as `replay` does for the request path.
#[cfg(test)]
mod replay_seeds {
    fn replay(target: &str, check: fn(&[u8])) -> usize {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/seeds")
            .join(target);
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(
            seeds.len() >= 10,
            "{}: {} seeds",
            dir.display(),
            seeds.len()
        );
        for seed in &seeds {
            let data = std::fs::read(seed).unwrap();
            // Every prefix of the small seeds; of a large one (the example config), every
            // line's end.
            let ends: Vec<usize> = if data.len() <= 400 {
                (0..=data.len()).collect()
            } else {
                let lines = data.iter().enumerate().filter(|(_, &b)| b == b'\n');
                lines.map(|(i, _)| i + 1).chain([data.len()]).collect()
            };
            for end in ends {
                let r = std::panic::catch_unwind(|| check(&data[..end]));
                assert!(r.is_ok(), "{target}: {} cut at {end}", seed.display());
            }
        }
        seeds.len()
    }

    mod config {
        include!("../../fuzz/checks/config.rs");
    }
    mod route_template {
        include!("../../fuzz/checks/route_template.rs");
    }

    #[test]
    fn config_seeds_hold_the_invariants() {
        replay("config", config::check);
    }

    #[test]
    fn route_template_seeds_hold_the_invariants() {
        replay("route_template", route_template::check);
    }
}
