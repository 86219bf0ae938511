//! `[client_limits]` and a route's `allow`, `deny` and `limit`: per client address request
//! rates (nginx `limit_req ... nodelay`), concurrent connections (`limit_conn`, closed at
//! accept as HAProxy's `tcp-request connection reject`), and access rules (nginx
//! `allow`/`deny`). Every value is checked here, as it is read, so a bad one names the file,
//! line and key. What they do per request is `crate::limit`'s.

use crate::cidr::CidrList;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use std::num::NonZeroU32;
use std::time::Duration;

/// The most addresses a worker remembers per limit, unless `table_size` says otherwise: at
/// about 40 bytes an entry, 2.6 MB per limit per worker when full.
pub const DEFAULT_TABLE_SIZE: usize = 65_536;
/// The largest `table_size` accepted (about 700 MB per limit per worker: a typo beyond).
pub const MAX_TABLE_SIZE: usize = 1 << 24;

/// A request rate with its burst: `rate = "100/s"` (or `"N/m"`), `burst = 50`. A client may
/// send `burst + 1` requests at once, then one per `interval` (nginx's `limit_req` with
/// `burst` and `nodelay`: the excess over the rate is refused, never delayed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// As written: requests per second (`per_minute` false) or per minute.
    pub count: NonZeroU32,
    pub per_minute: bool,
    pub burst: u32,
}

impl RateLimit {
    /// The time one request costs: 1 s / N, or 1 min / N.
    pub fn interval(&self) -> Duration {
        let period = if self.per_minute { 60 } else { 1 };
        Duration::from_secs(period) / self.count.get()
    }
}

/// `"N/s"` or `"N/m"`, N from 1 up.
pub fn parse_rate(s: &str) -> Result<(NonZeroU32, bool), String> {
    let bad = || {
        format!("`{s}` is not a request rate: expected \"N/s\" or \"N/m\" with N at least 1 (e.g. \"100/s\", \"30/m\")")
    };
    let (n, unit) = s.trim().split_once('/').ok_or_else(bad)?;
    let per_minute = match unit {
        "s" => false,
        "m" => true,
        _ => return Err(bad()),
    };
    let n: u32 = n.parse().map_err(|_| bad())?;
    Ok((NonZeroU32::new(n).ok_or_else(bad)?, per_minute))
}

/// `[client_limits]` as the file writes it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientLimitsEntry {
    #[serde(default, deserialize_with = "de_rate")]
    pub rate: Option<(NonZeroU32, bool)>,
    #[serde(default, deserialize_with = "de_burst")]
    pub burst: Option<u32>,
    #[serde(default)]
    pub connections: Option<NonZeroU32>,
    #[serde(default, deserialize_with = "de_table_size")]
    pub table_size: Option<usize>,
}

/// A route's `limit = { rate = "10/s", burst = 5 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteLimitEntry {
    #[serde(deserialize_with = "de_required_rate")]
    pub rate: (NonZeroU32, bool),
    #[serde(default, deserialize_with = "de_burst")]
    pub burst: Option<u32>,
}

impl RouteLimitEntry {
    pub fn limit(&self) -> RateLimit {
        RateLimit {
            count: self.rate.0,
            per_minute: self.rate.1,
            burst: self.burst.unwrap_or(0),
        }
    }
}

/// The runtime `[client_limits]`: each part off unless configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientLimits {
    pub rate: Option<RateLimit>,
    /// Concurrent connections per client address.
    pub connections: Option<u32>,
    /// Addresses a worker remembers per rate limit (least recently seen forgotten first).
    pub table_size: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        ClientLimits {
            rate: None,
            connections: None,
            table_size: DEFAULT_TABLE_SIZE,
        }
    }
}

impl ClientLimitsEntry {
    /// The runtime value; `Err`: a key that needs another (burst without rate).
    pub fn resolve(&self) -> Result<ClientLimits, (&'static str, String)> {
        if self.burst.is_some() && self.rate.is_none() {
            let m = "`burst` needs a `rate` (e.g. rate = \"100/s\")".to_string();
            return Err(("client_limits.burst", m));
        }
        Ok(ClientLimits {
            rate: self.rate.map(|(count, per_minute)| RateLimit {
                count,
                per_minute,
                burst: self.burst.unwrap_or(0),
            }),
            connections: self.connections.map(NonZeroU32::get),
            table_size: self.table_size.unwrap_or(DEFAULT_TABLE_SIZE),
        })
    }
}

/// A route's access rules and its own rate limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Refused first, whatever `allow` says.
    pub deny: CidrList,
    /// When not empty: only these (nginx's `allow ...; deny all;`).
    pub allow: CidrList,
    pub limit: Option<RateLimit>,
}

impl Access {
    /// Whether `ip` may use the route: not denied, and allowed when an allow list exists.
    pub fn permits(&self, ip: std::net::IpAddr) -> bool {
        !self.deny.contains(ip) && (self.allow.is_empty() || self.allow.contains(ip))
    }
}

fn de_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(NonZeroU32, bool)>, D::Error> {
    de_required_rate(d).map(Some)
}

fn de_required_rate<'de, D: Deserializer<'de>>(d: D) -> Result<(NonZeroU32, bool), D::Error> {
    parse_rate(&String::deserialize(d)?).map_err(D::Error::custom)
}

fn de_burst<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let n = i64::deserialize(d)?;
    u32::try_from(n).map(Some).map_err(|_| {
        D::Error::custom(format!(
            "burst must be 0 or more (at most {}), not {n}",
            u32::MAX
        ))
    })
}

fn de_table_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    let n = i64::deserialize(d)?;
    match usize::try_from(n) {
        Ok(v) if (1..=MAX_TABLE_SIZE).contains(&v) => Ok(Some(v)),
        _ => Err(D::Error::custom(format!(
            "table_size must be between 1 and {MAX_TABLE_SIZE} addresses, not {n}"
        ))),
    }
}

/// `allow`/`deny`: a list of addresses and CIDR ranges.
pub fn de_cidrs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CidrList>, D::Error> {
    let items = Vec::<String>::deserialize(d)?;
    CidrList::parse(&items).map(Some).map_err(D::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_n_per_second_or_minute() {
        for (s, n, m, interval_ms) in [
            ("100/s", 100, false, 10),
            ("1/s", 1, false, 1000),
            ("30/m", 30, true, 2000),
            (" 4/s ", 4, false, 250),
        ] {
            let (count, per_minute) = parse_rate(s).unwrap();
            assert_eq!((count.get(), per_minute), (n, m), "{s}");
            let r = RateLimit {
                count,
                per_minute,
                burst: 0,
            };
            assert_eq!(r.interval(), Duration::from_millis(interval_ms), "{s}");
        }
        for bad in [
            "10/x", "0/s", "-1/s", "10", "/s", "ten/s", "10/S", "1.5/s", "",
        ] {
            let e = parse_rate(bad).unwrap_err();
            assert!(e.contains("N/s"), "{bad}: {e}");
        }
    }

    const HEAD: &str = "[[listen]]\naddr = \"127.0.0.1:0\"\n";
    const ROUTE: &str = "[[route]]\npath = \"/\"\nreturn = { status = 200 }\n";

    #[test]
    fn values_are_read_with_their_defaults() {
        let text = format!(
            "{HEAD}[client_limits]\nrate = \"30/m\"\nconnections = 8\n{ROUTE}\
             allow = [\"10.0.0.0/8\", \"::1\"]\ndeny = [\"10.0.0.9\"]\nlimit = {{ rate = \"5/s\" }}\n"
        );
        let cfg = crate::config::from_toml("p.toml", &text).unwrap();
        let l = &cfg.client_limits;
        let rate = l.rate.unwrap();
        assert_eq!(
            (rate.count.get(), rate.per_minute, rate.burst),
            (30, true, 0)
        );
        assert_eq!((l.connections, l.table_size), (Some(8), DEFAULT_TABLE_SIZE));
        let a = cfg.routes[crate::config::RouteId::new(0)]
            .access
            .as_ref()
            .unwrap();
        assert_eq!((a.allow.0.len(), a.deny.0.len()), (2, 1));
        assert_eq!(a.limit.map(|l| (l.count.get(), l.burst)), Some((5, 0)));
        assert!(a.permits("10.0.0.1".parse().unwrap()) && !a.permits("10.0.0.9".parse().unwrap()));
        let none = crate::config::from_toml("p.toml", &format!("{HEAD}{ROUTE}")).unwrap();
        assert_eq!(none.client_limits, ClientLimits::default());
        assert!(none.routes[crate::config::RouteId::new(0)].access.is_none());
    }

    #[test]
    fn bad_values_name_the_file_line_and_key() {
        for (tail, want) in [
            ("[client_limits]\nrate = \"10/x\"\n", "p.toml:4: key `client_limits.rate`: `10/x` is not a request rate"),
            ("[client_limits]\nrate = \"0/s\"\n", "p.toml:4: key `client_limits.rate`"),
            ("[client_limits]\nrate = 10\n", "p.toml:4: key `client_limits.rate`"),
            ("[client_limits]\nrate = \"1/s\"\nburst = -1\n", "p.toml:5: key `client_limits.burst`: burst must be 0 or more"),
            ("[client_limits]\nconnections = 0\n", "p.toml:4: key `client_limits.connections`"),
            ("[client_limits]\ntable_size = 0\n", "p.toml:4: key `client_limits.table_size`: table_size must be between 1"),
            ("[client_limits]\nrates = \"1/s\"\n", "unknown field `rates`"),
            ("[client_limits]\nburst = 5\n", "key `client_limits.burst`: `burst` needs a `rate`"),
            ("allow = [\"10.0.0.0/33\"]\n", "p.toml:6: key `route[0].allow`: `10.0.0.0/33` is not an address or CIDR block: the prefix length must be 0 to 32"),
            ("deny = [\"localhost\"]\n", "p.toml:6: key `route[0].deny`: `localhost` is not an address or CIDR block"),
            ("deny = [\"10.1.0.0/8\"]\n", "host bits are set"),
            ("allow = \"10.0.0.0/8\"\n", "p.toml:6: key `route[0].allow`"),
            ("limit = { rate = \"10/x\" }\n", "p.toml:6: key `route[0].limit.rate`: `10/x` is not a request rate"),
            ("limit = { rate = \"1/s\", burst = -1 }\n", "p.toml:6: key `route[0].limit.burst`: burst must be 0 or more"),
            ("limit = { burst = 1 }\n", "p.toml:6: key `route[0].limit`: missing field `rate`"),
        ] {
            let text = if tail.starts_with('[') {
                format!("{HEAD}{tail}{ROUTE}")
            } else {
                format!("{HEAD}{ROUTE}{tail}")
            };
            let e = crate::config::from_toml("p.toml", &text).unwrap_err().to_string();
            assert!(e.contains(want), "{tail}: {e}");
            assert!(e.starts_with("p.toml"), "{tail}: {e}");
        }
    }
}
