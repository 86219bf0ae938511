//! `resolve = "30s"` on an `[upstream.NAME]` group (issue 27): its servers' host names are
//! looked up again this often (by `crate::dns`, off the workers), not only at start and at
//! each reload (nginx `server app.internal resolve` with `resolver ... valid=30s`; HAProxy
//! `server-template` with a `resolvers` section and `hold valid 30s`).
//!
//! In such a group every address a name resolves to is a server of its own (as nginx and
//! HAProxy make them), with the entry's weight, `max_fails` and `fail_timeout`: a name behind
//! which a service's instances come and go spreads the load over all of them, by the group's
//! balance method, and health and failures are tracked per address. Such a server is named
//! `ENTRY (ADDRESS)` (`app.internal:80 (10.0.0.7:80)`): in metrics, logs and health changes,
//! and for `balance = "hash"`'s ring, so a server that stays across a re-resolution keeps its
//! counts, state and keys. The Host field sent (when the client's is not kept), a probe's
//! Host and the TLS name stay the entry's host (`Server::host`). An entry written as an IP
//! address is one server named as written, as in a group without `resolve`.
//!
//! Without `resolve` nothing changes: an entry is one server whose addresses are tried in
//! order on each connect.

use super::{Server, ServerId, Table};
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::time::Duration;

/// How a group's servers are found again.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolve {
    /// Look the names up again this often.
    pub every: Duration,
    /// The `servers` entries, in order.
    pub entries: Vec<Entry>,
    /// A TLS group's `sni`, for the TLS names of servers found later.
    pub sni: Option<String>,
}

/// One `servers` entry as written, and what each of its servers takes from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The entry without its scheme (`app.internal:80`): its servers' `host`.
    pub host: String,
    /// The host name to look up, or an IP address (`literal`), and the port.
    pub lookup: (String, u16),
    /// An IP address: one server, never looked up.
    pub literal: bool,
    pub weight: u32,
    pub max_fails: u32,
    pub fail_timeout: Duration,
    pub max_conns: u32,
}

impl Entry {
    /// The servers of this entry for `addrs` (its name's addresses now): one per address
    /// not in `taken` already (two names may share an address: the first entry keeps it).
    pub fn servers(&self, addrs: &[SocketAddr], taken: &mut Vec<SocketAddr>) -> Vec<Server> {
        let server = |name: String, addrs: Vec<SocketAddr>| Server {
            name,
            host: self.host.clone(),
            addrs,
            weight: self.weight,
            max_fails: self.max_fails,
            fail_timeout: self.fail_timeout,
            max_conns: self.max_conns,
        };
        if self.literal {
            taken.extend_from_slice(addrs);
            return vec![server(self.host.clone(), addrs.to_vec())];
        }
        // In address order: a resolver that rotates its answers (round-robin DNS) gives the
        // same servers each time, so only a change of the set makes a new generation.
        let mut sorted = addrs.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut out = Vec::with_capacity(sorted.len());
        for a in sorted {
            if taken.contains(&a) {
                continue;
            }
            taken.push(a);
            out.push(server(format!("{} ({a})", self.host), vec![a]));
        }
        out
    }
}

/// A group's servers for each entry's addresses (`addrs[i]`: entry `i`'s).
pub fn servers_of(entries: &[Entry], addrs: &[Vec<SocketAddr>]) -> Table<ServerId, Server> {
    let mut taken = Vec::new();
    let mut out = Table::new();
    for (e, a) in entries.iter().zip(addrs) {
        for s in e.servers(a, &mut taken) {
            out.push(s);
        }
    }
    out
}

/// The name a TLS server is sent (SNI) and verified against: the group's `sni`, else the
/// host of the server's entry (`host`: `api.internal:443`).
pub fn tls_name(sni: Option<&str>, host: &str) -> Result<ServerName<'static>, String> {
    let name = match sni {
        Some(n) => n.to_string(),
        None => super::schema::split_upstream(host).map_or_else(|_| host.to_string(), |h| h.0),
    };
    ServerName::try_from(name.clone())
        .map_err(|_| format!("`{name}` is not a name TLS can verify (sni)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(host: &str, literal: bool) -> Entry {
        Entry {
            host: host.into(),
            lookup: (host.split(':').next().unwrap().into(), 80),
            literal,
            weight: 3,
            max_fails: 2,
            fail_timeout: Duration::from_secs(5),
            max_conns: 0,
        }
    }

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn each_address_of_a_name_is_a_server_named_by_it() {
        let entries = [entry("app.internal:80", false), entry("10.0.0.9:80", true)];
        let addrs = [
            vec![a("10.0.0.1:80"), a("10.0.0.2:80"), a("10.0.0.9:80")],
            vec![a("10.0.0.9:80")],
        ];
        let s = servers_of(&entries, &addrs);
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "app.internal:80 (10.0.0.1:80)",
                "app.internal:80 (10.0.0.2:80)",
                "app.internal:80 (10.0.0.9:80)",
                // The literal is its own server even though the name shares its address.
                "10.0.0.9:80",
            ]
        );
        let first = &s[ServerId::new(0)];
        assert_eq!(first.host, "app.internal:80");
        assert_eq!(first.addrs, [a("10.0.0.1:80")]);
        assert_eq!((first.weight, first.max_fails), (3, 2));
        // Two names with one address: the first keeps it.
        let entries = [entry("a:80", false), entry("b:80", false)];
        let s = servers_of(&entries, &[vec![a("10.0.0.1:80")], vec![a("10.0.0.1:80")]]);
        assert_eq!(s.len(), 1);
    }
}
