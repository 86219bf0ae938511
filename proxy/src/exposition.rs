//! The gathered snapshots rendered for readers: Prometheus text format 0.0.4 (`/metrics`) and
//! JSON (`/status`).
//!
//! Why the text format written here rather than prometheus-client's OpenMetrics encoder: the
//! crate's metric types are atomics meant to be bumped on the request path; using only its
//! encoder means a custom collector that rebuilds every family from the snapshots at each
//! scrape, a dependency for about a hundred lines of plain `write!`. Prometheus scrapes 0.0.4
//! text natively, and `scripts/check-metrics.sh` runs `promtool check metrics` on it.
//!
//! Every series is a sum over the workers (no per-worker series beside a total); `/status`
//! has both.

use crate::config::{Action, Config, GroupId, RouteId, ServerId};
use crate::metrics::{
    route_label, CacheState, Histogram, Metrics, ServerCounts, ServerState, WorkerSnapshot,
    BUCKETS_US, CACHE_STATUSES, CLASSES, FAULT_KINDS,
};
use std::fmt::Write;

/// A family read off each value of type `T`: name, type, help, the value.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> u64);

/// A label value escaped as the text format wants (backslash, double quote, newline).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn total(snaps: &[WorkerSnapshot]) -> Metrics {
    let mut m = snaps.first().map(|s| s.metrics.clone()).unwrap_or_default();
    for s in snaps.iter().skip(1) {
        m.add(&s.metrics);
    }
    m
}

/// `/metrics`: every family, summed over the workers.
pub fn prometheus(cfg: &Config, snaps: &[WorkerSnapshot]) -> String {
    let m = total(snaps);
    let mut o = String::with_capacity(16 * 1024);
    requests(&mut o, cfg, &m);
    connections(&mut o, snaps);
    upstreams(&mut o, cfg, &m, snaps);
    caches(&mut o, cfg, &m, snaps);
    limits(&mut o, cfg, &m, snaps);
    family(
        &mut o,
        "proxy_tls_handshakes_total",
        "counter",
        "TLS client handshakes by result (plain_http: plain HTTP on a TLS listener).",
    );
    for (i, result) in ["full", "resumed", "failed", "plain_http"]
        .iter()
        .enumerate()
    {
        let n: u64 = snaps.iter().map(|s| s.tls[i]).sum();
        let _ = writeln!(o, "proxy_tls_handshakes_total{{result=\"{result}\"}} {n}");
    }
    family(
        &mut o,
        "proxy_spliced_responses_total",
        "counter",
        "Response bodies moved from the upstream's socket to the client's with splice(2).",
    );
    let spliced: u64 = snaps.iter().map(|s| s.spliced).sum();
    let _ = writeln!(o, "proxy_spliced_responses_total {spliced}");
    family(
        &mut o,
        "proxy_proxy_protocol_errors_total",
        "counter",
        "Connections of PROXY protocol listeners closed without a valid header, by reason \
         (invalid: not a PROXY header; truncated: cut short by its end or the header timeout; \
         empty: nothing sent).",
    );
    for (i, reason) in ["invalid", "truncated", "empty"].iter().enumerate() {
        let n: u64 = snaps.iter().map(|s| s.proxy_protocol[i]).sum();
        let _ = writeln!(
            o,
            "proxy_proxy_protocol_errors_total{{reason=\"{reason}\"}} {n}"
        );
    }
    family(
        &mut o,
        "proxy_request_duration_seconds",
        "histogram",
        "Client request duration, from its first byte to the end of the response, by route \
         and its upstream group (empty: a return, static files, or no route).",
    );
    request_times(&mut o, cfg, &m);
    family(
        &mut o,
        "proxy_upstream_header_duration_seconds",
        "histogram",
        "Upstream time to first byte: from sending the request to its response head.",
    );
    histogram(
        &mut o,
        "proxy_upstream_header_duration_seconds",
        &m.upstream_ttfb,
    );
    family(
        &mut o,
        "proxy_access_log_dropped_total",
        "counter",
        "Access log lines dropped: a failed write, or a log that could not take them without \
         waiting (a pipe or FIFO whose reader is not reading).",
    );
    let dropped: u64 = snaps.iter().map(|s| s.access_log_dropped).sum();
    let _ = writeln!(o, "proxy_access_log_dropped_total {dropped}");
    family(&mut o, "proxy_workers", "gauge", "Workers that answered.");
    let _ = writeln!(o, "proxy_workers {}", snaps.len());
    o
}

/// What the per client limits and access rules refused (`crate::limit`).
fn limits(o: &mut String, cfg: &Config, m: &Metrics, snaps: &[WorkerSnapshot]) {
    let kinds = [
        (
            "proxy_limited_requests_total",
            "Requests refused with 429 by a rate limit ([client_limits] rate, a route's limit).",
        ),
        (
            "proxy_denied_requests_total",
            "Requests refused with 403 by a route's allow/deny.",
        ),
    ];
    for (i, (name, help)) in kinds.iter().enumerate() {
        family(o, name, "counter", help);
        for (r, counts) in m.refused.enumerate() {
            let route = esc(&route_label(cfg, Some(r)));
            let _ = writeln!(o, "{name}{{route=\"{route}\"}} {}", counts[i]);
        }
    }
    family(
        o,
        "proxy_limited_connections_total",
        "counter",
        "Connections closed at accept: their client had [client_limits] connections open.",
    );
    let n: u64 = snaps.iter().map(|s| s.limited_connections).sum();
    let _ = writeln!(o, "proxy_limited_connections_total {n}");
}

fn requests(o: &mut String, cfg: &Config, m: &Metrics) {
    family(
        o,
        "proxy_requests_total",
        "counter",
        "Requests by route and status class (499: no response sent).",
    );
    // Requests refused before routing first, and only once there is one.
    let unrouted = Some((None, &m.unrouted)).filter(|(_, c)| c.iter().any(|&n| n > 0));
    let rows = m.requests.enumerate().map(|(r, c)| (Some(r), c));
    for (route, counts) in unrouted.into_iter().chain(rows) {
        let route = esc(&route_label(cfg, route));
        for (class, n) in CLASSES.iter().zip(counts) {
            let _ = writeln!(
                o,
                "proxy_requests_total{{route=\"{route}\",code=\"{class}\"}} {n}"
            );
        }
    }
    family(
        o,
        "proxy_request_faults_total",
        "counter",
        "Requests that ended in a failure, by kind.",
    );
    for (kind, n) in FAULT_KINDS.iter().zip(m.faults.iter()) {
        let _ = writeln!(o, "proxy_request_faults_total{{kind=\"{kind}\"}} {n}");
    }
    family(
        o,
        "proxy_received_bytes_total",
        "counter",
        "Request bytes received: heads (refused ones too) and bodies as read, chunk framing included.",
    );
    let _ = writeln!(o, "proxy_received_bytes_total {}", m.bytes_in);
    family(
        o,
        "proxy_sent_bytes_total",
        "counter",
        "Response bytes sent to clients.",
    );
    let _ = writeln!(o, "proxy_sent_bytes_total {}", m.bytes_out);
}

/// One histogram per route (and one for requests refused before routing, once there is
/// one), labelled with the route and the group it proxies to.
fn request_times(o: &mut String, cfg: &Config, m: &Metrics) {
    let unrouted = Some((None, &m.unrouted_time)).filter(|(_, h)| h.count() > 0);
    let rows = m.request_time.enumerate().map(|(r, h)| (Some(r), h));
    for (route, h) in unrouted.into_iter().chain(rows) {
        let group = match route.and_then(|r| cfg.routes.get(r)).map(|r| &r.action) {
            Some(Action::Proxy { group, .. }) => cfg.groups.get(*group).map_or("", |g| &g.name),
            _ => "",
        };
        let labels = format!(
            "route=\"{}\",group=\"{}\",",
            esc(&route_label(cfg, route)),
            esc(group)
        );
        histogram_with(o, "proxy_request_duration_seconds", &labels, h);
    }
}

fn connections(o: &mut String, snaps: &[WorkerSnapshot]) {
    let sum = |f: fn(&WorkerSnapshot) -> u64| snaps.iter().map(f).sum::<u64>();
    family(
        o,
        "proxy_client_connections_open",
        "gauge",
        "Client connections open.",
    );
    let _ = writeln!(o, "proxy_client_connections_open {}", sum(|s| s.open));
    family(
        o,
        "proxy_client_connections_accepted_total",
        "counter",
        "Client connections accepted.",
    );
    let _ = writeln!(
        o,
        "proxy_client_connections_accepted_total {}",
        sum(|s| s.accepted)
    );
    family(
        o,
        "proxy_accept_errors_total",
        "counter",
        "accept(2) failures (out of descriptors, ...).",
    );
    let _ = writeln!(o, "proxy_accept_errors_total {}", sum(|s| s.accept_errors));
    family(
        o,
        "proxy_connection_panics_total",
        "counter",
        "Client connections ended by a panic in their handling (caught; the worker runs on).",
    );
    let _ = writeln!(o, "proxy_connection_panics_total {}", sum(|s| s.panics));
}

/// Labels `group="..",server=".."` of every server, in config order.
fn servers(cfg: &Config) -> Vec<(GroupId, ServerId, String)> {
    let mut v = Vec::new();
    for (g, group) in cfg.groups.enumerate() {
        for (s, server) in group.servers.enumerate() {
            let l = format!(
                "group=\"{}\",server=\"{}\"",
                esc(&group.name),
                esc(&server.name)
            );
            v.push((g, s, l));
        }
    }
    v
}

fn upstreams(o: &mut String, cfg: &Config, m: &Metrics, snaps: &[WorkerSnapshot]) {
    let all = servers(cfg);
    let counts = |g: GroupId, s: ServerId| &m.servers[g][s];
    let simple: [Family<ServerCounts>; 2] = [
        (
            "proxy_upstream_requests_total",
            "counter",
            "Requests sent to the server (every attempt).",
            |c| c.requests,
        ),
        (
            "proxy_upstream_connects_total",
            "counter",
            "New connections opened to the server.",
            |c| c.connects,
        ),
    ];
    for (name, kind, help, f) in simple {
        family(o, name, kind, help);
        for (g, s, l) in &all {
            let _ = writeln!(o, "{name}{{{l}}} {}", f(counts(*g, *s)));
        }
    }
    family(
        o,
        "proxy_upstream_responses_total",
        "counter",
        "Answers from the server, by the class of its status (not the client's).",
    );
    for (g, s, l) in &all {
        for (class, n) in CLASSES.iter().zip(counts(*g, *s).responses.iter()) {
            let _ = writeln!(
                o,
                "proxy_upstream_responses_total{{{l},code=\"{class}\"}} {n}"
            );
        }
    }
    family(
        o,
        "proxy_upstream_failures_total",
        "counter",
        "Failed attempts on the server, by kind (status: an answer dropped for a retry on its status).",
    );
    for (g, s, l) in &all {
        for (kind, n) in FAULT_KINDS.iter().zip(counts(*g, *s).failures.iter()) {
            if kind.starts_with("upstream") || *kind == "connect_timeout" || *n > 0 {
                let _ = writeln!(
                    o,
                    "proxy_upstream_failures_total{{{l},kind=\"{kind}\"}} {n}"
                );
            }
        }
        // Not a fault of the request: the client got another server's answer.
        let n = counts(*g, *s).retried_statuses;
        let _ = writeln!(
            o,
            "proxy_upstream_failures_total{{{l},kind=\"status\"}} {n}"
        );
    }
    retries(o, cfg, m);
    server_gauges(o, &all, snaps);
    family(
        o,
        "proxy_upstream_queued",
        "gauge",
        "Requests waiting for a server of the group with room (max_conns) or for a descriptor.",
    );
    for (g, group) in cfg.groups.enumerate() {
        let n: u64 = snaps.iter().filter_map(|w| w.queued.get(g)).sum();
        let _ = writeln!(
            o,
            "proxy_upstream_queued{{group=\"{}\"}} {n}",
            esc(&group.name)
        );
    }
}

/// Retries by proxied route and reason, and the failures the retry budget sent to the
/// client instead.
fn retries(o: &mut String, cfg: &Config, m: &Metrics) {
    use crate::config::route_opts::RetryReason;
    family(
        o,
        "proxy_upstream_retries_total",
        "counter",
        "Attempts after the first for a request, by route and reason.",
    );
    for (r, route) in cfg.routes.enumerate() {
        if route.action.group().is_none() {
            continue;
        }
        let label = esc(&route_label(cfg, Some(r)));
        for why in RetryReason::ALL {
            let n = m.retries[r][why.index()];
            let reason = why.name();
            let _ = writeln!(
                o,
                "proxy_upstream_retries_total{{route=\"{label}\",reason=\"{reason}\"}} {n}"
            );
        }
    }
    family(
        o,
        "proxy_retry_budget_exhausted_total",
        "counter",
        "Failures answered as they were because the worker's retry budget was spent.",
    );
    let n = m.retry_budget_exhausted;
    let _ = writeln!(o, "proxy_retry_budget_exhausted_total {n}");
}

/// What each server is like now, from every worker's state: pools, requests in flight,
/// passive and active health.
fn server_gauges(o: &mut String, all: &[(GroupId, ServerId, String)], snaps: &[WorkerSnapshot]) {
    let state =
        |g: GroupId, s: ServerId| snaps.iter().filter_map(move |w| w.servers.get(g)?.get(s));
    let gauges: [Family<ServerState>; 3] = [
        (
            "proxy_upstream_pool_idle",
            "gauge",
            "Idle keep-alive connections pooled for the server.",
            |x| x.idle,
        ),
        (
            "proxy_upstream_in_flight",
            "gauge",
            "Requests in flight on the server (connections in use).",
            |x| x.busy,
        ),
        (
            "proxy_upstream_up",
            "gauge",
            "1 if no worker has the server marked failed, else 0.",
            |x| u64::from(x.up),
        ),
    ];
    family(
        o,
        "proxy_upstream_health",
        "gauge",
        "Active health checks' verdict on the server: 1 for its state (unchecked: no checks).",
    );
    for (g, s, l) in all {
        // The verdict is the same on every worker (the checking worker tells the others).
        let now = state(*g, *s).next().map_or("unchecked", |x| x.health);
        for st in ["up", "down", "unchecked"] {
            let v = u64::from(st == now);
            let _ = writeln!(o, "proxy_upstream_health{{{l},state=\"{st}\"}} {v}");
        }
    }
    for (name, kind, help, f) in gauges {
        family(o, name, kind, help);
        for (g, s, l) in all {
            let v: u64 = if name == "proxy_upstream_up" {
                u64::from(state(*g, *s).all(|x| x.up))
            } else {
                state(*g, *s).map(f).sum()
            };
            let _ = writeln!(o, "{name}{{{l}}} {v}");
        }
    }
}

fn caches(o: &mut String, cfg: &Config, m: &Metrics, snaps: &[WorkerSnapshot]) {
    let cached: Vec<RouteId> = cfg
        .routes
        .enumerate()
        .filter(|(_, r)| {
            matches!(
                r.action,
                crate::config::Action::Proxy { cache: Some(_), .. }
            )
        })
        .map(|(i, _)| i)
        .collect();
    if cached.is_empty() {
        return;
    }
    family(
        o,
        "proxy_cache_requests_total",
        "counter",
        "Requests of cached routes by cache status.",
    );
    for &r in &cached {
        let route = esc(&route_label(cfg, Some(r)));
        for (st, n) in CACHE_STATUSES.iter().zip(m.cache[r].iter()) {
            let _ = writeln!(
                o,
                "proxy_cache_requests_total{{route=\"{route}\",status=\"{st}\"}} {n}"
            );
        }
    }
    let fams: [Family<CacheState>; 6] = [
        ("proxy_cache_entries", "gauge", "Responses stored.", |c| {
            c.entries
        }),
        (
            "proxy_cache_bytes",
            "gauge",
            "Bytes stored (heads and bodies).",
            |c| c.bytes,
        ),
        (
            "proxy_cache_evictions_total",
            "counter",
            "Entries evicted to make room.",
            |c| c.evicted,
        ),
        (
            "proxy_cache_dropped_total",
            "counter",
            "Fills dropped (over max_object, or no room).",
            |c| c.dropped,
        ),
        (
            "proxy_cache_revalidation_errors_total",
            "counter",
            "Background revalidations (stale-while-revalidate) that failed.",
            |c| c.revalidation_errors,
        ),
        (
            "proxy_cache_revalidations_skipped_total",
            "counter",
            "Background revalidations not started: the worker ran its most at once.",
            |c| c.revalidations_skipped,
        ),
    ];
    for (name, kind, help, f) in fams {
        family(o, name, kind, help);
        for &r in &cached {
            let v: u64 = snaps
                .iter()
                .filter_map(|s| s.caches.get(r)?.as_ref())
                .map(f)
                .sum();
            let route = esc(&route_label(cfg, Some(r)));
            let _ = writeln!(o, "{name}{{route=\"{route}\"}} {v}");
        }
    }
}

fn seconds(us: u64) -> String {
    format!("{}", us as f64 / 1e6)
}

fn histogram(o: &mut String, name: &str, h: &Histogram) {
    histogram_with(o, name, "", h);
}

/// `labels`: `k="v",` pairs put before `le` (empty: none).
fn histogram_with(o: &mut String, name: &str, labels: &str, h: &Histogram) {
    let mut cum = 0;
    for (i, n) in h.counts.iter().enumerate() {
        cum += n;
        let le = BUCKETS_US
            .get(i)
            .map_or_else(|| "+Inf".to_string(), |&b| seconds(b));
        let _ = writeln!(o, "{name}_bucket{{{labels}le=\"{le}\"}} {cum}");
    }
    let set = labels.trim_end_matches(',');
    let set = if set.is_empty() {
        String::new()
    } else {
        format!("{{{set}}}")
    };
    let _ = writeln!(o, "{name}_sum{set} {}", seconds(h.sum_us));
    let _ = writeln!(o, "{name}_count{set} {cum}");
}

/// `/status`: per worker and totals, as JSON.
pub fn status(cfg: &Config, snaps: &[WorkerSnapshot], draining: bool) -> String {
    use serde_json::{json, Value};
    let summary = |m: &Metrics, open: u64, accepted: u64| {
        let by_class = |m: &Metrics| {
            let mut c = [0u64; 5];
            for r in m.requests.iter().chain([&m.unrouted]) {
                for (a, b) in c.iter_mut().zip(r) {
                    *a += b;
                }
            }
            c
        };
        let c = by_class(m);
        let classes: serde_json::Map<String, Value> = CLASSES
            .iter()
            .zip(c)
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect();
        json!({
            "requests": c.iter().sum::<u64>(),
            "responses": classes,
            "bytes_in": m.bytes_in,
            "bytes_out": m.bytes_out,
            "connections_open": open,
            "connections_accepted": accepted,
        })
    };
    let m = total(snaps);
    let workers: Vec<Value> = snaps
        .iter()
        .map(|s| {
            let mut v = summary(&s.metrics, s.open, s.accepted);
            v["worker"] = json!(s.worker);
            v["state"] = json!(match (s.drained, s.draining) {
                (true, _) => "drained",
                (false, true) => "draining",
                (false, false) => "serving",
            });
            v
        })
        .collect();
    let mut totals = summary(
        &m,
        snaps.iter().map(|s| s.open).sum(),
        snaps.iter().map(|s| s.accepted).sum(),
    );
    let routes: Vec<Value> = m
        .requests
        .enumerate()
        .map(|(route, c)| {
            json!({
                "route": route_label(cfg, Some(route)),
                "requests": c.iter().sum::<u64>(),
            })
        })
        .collect();
    totals["routes"] = json!(routes);
    let upstreams: Vec<Value> = servers(cfg)
        .into_iter()
        .map(|(g, s, _)| {
            let up = snaps
                .iter()
                .all(|w| w.servers.get(g).and_then(|x| x.get(s)).is_none_or(|x| x.up));
            let c = &m.servers[g][s];
            let health = snaps
                .first()
                .and_then(|w| w.servers.get(g)?.get(s))
                .map_or("unchecked", |x| x.health);
            json!({
                "group": cfg.groups[g].name,
                "server": cfg.groups[g].servers[s].name,
                "up": up,
                "health": health,
                "requests": c.requests,
                "connects": c.connects,
                "failures": c.all_failures(),
            })
        })
        .collect();
    let v = json!({
        "state": if draining { "draining" } else { "serving" },
        "workers": workers,
        "total": totals,
        "upstreams": upstreams,
    });
    let mut s = v.to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let mut h = Histogram::default();
        h.observe(std::time::Duration::from_micros(300));
        h.observe(std::time::Duration::from_millis(2));
        h.observe(std::time::Duration::from_secs(20));
        let mut o = String::new();
        histogram(&mut o, "x", &h);
        let lines: Vec<&str> = o.lines().collect();
        assert_eq!(lines[0], r#"x_bucket{le="0.00005"} 0"#);
        assert_eq!(lines[2], r#"x_bucket{le="0.00025"} 0"#);
        assert_eq!(lines[3], r#"x_bucket{le="0.0005"} 1"#);
        assert_eq!(lines[4], r#"x_bucket{le="0.001"} 1"#);
        assert_eq!(lines[5], r#"x_bucket{le="0.0025"} 2"#);
        assert_eq!(lines[16], r#"x_bucket{le="10"} 2"#);
        assert_eq!(lines[17], r#"x_bucket{le="+Inf"} 3"#);
        assert_eq!(lines[18], "x_sum 20.0023");
        assert_eq!(lines[19], "x_count 3");
        let mut o = String::new();
        histogram_with(&mut o, "x", "route=\"/\",group=\"app\",", &h);
        assert!(
            o.starts_with("x_bucket{route=\"/\",group=\"app\",le=\"0.00005\"} 0\n"),
            "{o}"
        );
        assert!(
            o.ends_with(
                "x_sum{route=\"/\",group=\"app\"} 20.0023\nx_count{route=\"/\",group=\"app\"} 3\n"
            ),
            "{o}"
        );
        assert_eq!(esc("a\"b\\c\nd"), r#"a\"b\\c\nd"#);
    }

    #[test]
    fn every_family_is_summed_over_workers() {
        let cfg = crate::config::from_toml(
            "t",
            "[[listen]]\naddr = \"127.0.0.1:1\"\n[upstream.app]\nservers = [\"127.0.0.1:2\"]\n",
        )
        .unwrap();
        let snap = |open| {
            let mut m = Metrics::new(&cfg);
            let (r, g, s) = (RouteId::new(0), GroupId::new(0), ServerId::new(0));
            m.requests[r][1] = 3;
            m.servers[g][s].requests = 2;
            WorkerSnapshot {
                metrics: m,
                open,
                access_log_dropped: 5,
                servers: crate::config::Table::from(vec![crate::config::Table::from(vec![
                    ServerState {
                        idle: 1,
                        busy: 0,
                        up: true,
                        health: "unchecked",
                    },
                ])]),
                queued: crate::config::Table::from(vec![open]),
                ..WorkerSnapshot::default()
            }
        };
        let text = prometheus(&cfg, &[snap(1), snap(2)]);
        for line in [
            r#"proxy_requests_total{route="/",code="2xx"} 6"#,
            r#"proxy_upstream_requests_total{group="app",server="127.0.0.1:2"} 4"#,
            r#"proxy_upstream_pool_idle{group="app",server="127.0.0.1:2"} 2"#,
            r#"proxy_upstream_queued{group="app"} 3"#,
            "proxy_access_log_dropped_total 10",
            "proxy_client_connections_open 3",
            "proxy_workers 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        // Requests refused before routing: no series until there is one.
        assert!(!text.contains("(none)"));
    }
}
