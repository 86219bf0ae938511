//! Which of a client's request fields reach the upstream as the client sent them: one list
//! for the request the proxy writes (`request::write_upstream_head`) and for the cache, whose
//! variants are those of the request the origin saw (`cache::vary`). A leaf: both import it.

use shared::http::framing::is_hop_by_hop;

fn eq(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// A client's field that no upstream request carries, whatever the configuration: the
/// hop-by-hop ones (the fields Connection names aside: `request::Named`), `Expect` (the proxy
/// answers `100-continue` itself), `HTTP2-Settings` (only for an h2c upgrade, which is never
/// forwarded, nor one hidden in a WebSocket upgrade's list: dropped even when Connection does
/// not name it), and `X-Forwarded-Host` and `Forwarded` (what a client says about the host it
/// addressed or where the request passed: not trusted, never passed on; an origin would build
/// URLs or access rules on it). The cache reads them as absent too (`cache::vary`): a variant
/// is the one of the request the origin saw.
pub fn never_forwarded(name: &str) -> bool {
    is_hop_by_hop(name)
        || eq(name, "expect")
        || eq(name, "http2-settings")
        || eq(name, "x-forwarded-host")
        || eq(name, "forwarded")
}

/// A field the proxy may write upstream from the client's address (`X-Forwarded-For`,
/// `X-Real-IP`), replacing the client's own: its value is not in the client's request, so
/// the cache cannot tell which variant of a response that varies on it a request selects
/// (`cache::vary` stores none).
pub fn written_per_client(name: &str) -> bool {
    eq(name, "x-forwarded-for") || eq(name, "x-real-ip")
}
