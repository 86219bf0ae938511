//! The human report on stdout: ab's fields, names and meanings first (so scripts and people
//! that read ab's output read ours), then what ab lacks: http_load's connect and first-response
//! times and bad byte counts, wrk's socket-error and "Non-2xx or 3xx responses" lines, a count
//! per status code, the per-URL
//! breakdown, the target rate in `--rate` mode with the uncorrected percentiles, what was sent
//! (method, HTTP version, keep-alive: ab speaks HTTP/1.0, so byte counts match ab's only with
//! `--http1.0`), and the source addresses `--close` spread its connects over.
//!
//! ab's meanings kept exactly: "Keep-Alive requests" counts responses that kept their
//! connection open (each connection's first included), "Total transferred" every byte read,
//! "HTML transferred" body bytes, "Total body sent" (with `--body`) every request byte written.
//!
//! Departures from ab, on purpose: times are printed in milliseconds with three decimals
//! (ab's whole milliseconds read 0 for every loopback request, as in the seeds), the percentile
//! table goes on to 99.9 %, 99.99 % and the longest request, and the failure breakdown and the
//! Write errors, Non-2xx and Keep-Alive lines are printed even when zero.
//!
//! A pure function of [`RunResult`]: no I/O, no clock, so it is tested on synthetic results.

use crate::figures::{
    achieved_rate, percent_label, rate_digits, Derived, TimeRow, Times, PERCENTILES,
};
use crate::stats::{LoadMode, RunResult, URL_HIST_SIGFIG};
use std::fmt::Write as _;

/// Microseconds to milliseconds.
fn ms(us: f64) -> f64 {
    us / 1000.0
}

/// The human report.
pub fn render(r: &RunResult) -> String {
    let mut s = String::with_capacity(4096);
    server_and_document(&mut s, r);
    totals(&mut s, r);
    if r.totals.completed > 0 {
        connection_times(&mut s, r);
    }
    // Extras: what wrk and http_load add.
    s.push('\n');
    if let Some(target) = r.target_rate() {
        rate(&mut s, r, target);
    }
    extras(&mut s, r);
    what_was_sent(&mut s, r);
    if r.urls.len() > 1 {
        url_table(&mut s, r);
    }
    run_context(&mut s, r);
    s
}

/// ab's header block: the server and the document.
fn server_and_document(s: &mut String, r: &RunResult) {
    let first = r.urls.first();
    let _ = writeln!(
        s,
        "Server Software:        {}",
        r.server_software.as_deref().unwrap_or("")
    );
    let _ = writeln!(
        s,
        "Server Hostname:        {}",
        first.map_or("", |u| u.host.as_str())
    );
    let _ = writeln!(s, "Server Port:            {}", first.map_or(0, |u| u.port));
    if let Some(p) = &r.tls_protocol {
        let _ = writeln!(s, "SSL/TLS Protocol:       {p}");
    }
    s.push('\n');
    // ab names one document; with several URLs say that this one is only the first.
    let _ = writeln!(
        s,
        "Document Path:          {}{}",
        first.map_or("", |u| u.path.as_str()),
        if r.urls.len() > 1 {
            format!(
                " (the first of {} URLs: see the per-URL breakdown)",
                r.urls.len()
            )
        } else {
            String::new()
        }
    );
    if r.accept_variable_length {
        s.push_str("Document Length:        Variable\n");
    } else {
        match r.document_length() {
            Some(n) => {
                let _ = writeln!(s, "Document Length:        {n} bytes");
            }
            None => s.push_str("Document Length:        unknown (no complete response)\n"),
        }
    }
    s.push('\n');
}

/// ab's totals: concurrency, time, counts, bytes and the derived rates.
fn totals(s: &mut String, r: &RunResult) {
    let t = &r.totals;
    let f = &t.failures;
    let d = Derived::of(r);
    if r.pipeline > 1 {
        let _ = writeln!(
            s,
            "Concurrency Level:      {} ({} connections x {} pipelined)",
            d.concurrency, r.concurrency, r.pipeline
        );
    } else {
        let _ = writeln!(s, "Concurrency Level:      {}", r.concurrency);
    }
    let _ = writeln!(
        s,
        "Time taken for tests:   {:.3} seconds",
        r.elapsed.as_secs_f64()
    );
    let _ = writeln!(s, "Complete requests:      {}", t.completed);
    let _ = writeln!(s, "Failed requests:        {}", f.ab_failed());
    let _ = writeln!(
        s,
        "   (Connect: {}, Receive: {}, Length: {}, Exceptions: {})",
        f.connect,
        f.receive(),
        f.length,
        f.exceptions()
    );
    if r.drain.is_some() || f.unanswered > 0 {
        // A failure kind ab does not have: in flight at the stop, unanswered after the drain.
        let _ = writeln!(s, "   (Unanswered at end: {})", f.unanswered);
    }
    let _ = writeln!(s, "Write errors:           {}", f.write);
    if t.completed == 0 && t.attempts > 0 {
        // ab's "Failed requests" leaves write errors out: say plainly that nothing worked.
        let _ = writeln!(
            s,
            "   (no request completed: {} attempts, {} failed: connect {}, receive {}, \
             write {}, timeout {}, unanswered {})",
            t.attempts,
            f.not_completed(),
            f.connect,
            f.receive(),
            f.write,
            f.timeout,
            f.unanswered
        );
    }
    if t.retried > 0 {
        // RFC 9112 9.3.2: the server closed before taking them; sent again, not attempts.
        let _ = writeln!(s, "Retried requests:       {}", t.retried);
    }
    if t.protocol_errors > 0 {
        let _ = writeln!(s, "Protocol errors:        {}", t.protocol_errors);
    }
    let _ = writeln!(s, "Non-2xx responses:      {}", t.non_2xx);
    let _ = writeln!(s, "Keep-Alive requests:    {}", t.keep_alive);
    let _ = writeln!(s, "Total transferred:      {} bytes", t.bytes_received);
    if r.sends_body {
        // ab prints it (without a unit) when it posts: every request byte written, heads too.
        let _ = writeln!(s, "Total body sent:        {}", t.bytes_sent);
    }
    let _ = writeln!(s, "HTML transferred:       {} bytes", t.body_bytes);
    let _ = writeln!(
        s,
        "Requests per second:    {:.2} [#/sec] (mean)",
        d.requests_per_second
    );
    let _ = writeln!(
        s,
        "Time per request:       {:.3} [ms] (mean)",
        d.time_per_request_ms
    );
    let _ = writeln!(
        s,
        "Time per request:       {:.3} [ms] (mean, across all concurrent requests)",
        d.time_per_request_all_ms
    );
    let _ = writeln!(
        s,
        "Transfer rate:          {:.2} [Kbytes/sec] received",
        d.transfer_rate_kbytes
    );
    if r.sends_body {
        let _ = writeln!(
            s,
            "                        {:.2} kb/s sent",
            d.sent_rate_kbytes
        );
        let _ = writeln!(
            s,
            "                        {:.2} kb/s total",
            d.transfer_rate_kbytes + d.sent_rate_kbytes
        );
    }
}

/// ab's "Connection Times (ms)" table and percentiles.
fn connection_times(s: &mut String, r: &RunResult) {
    s.push_str("\nConnection Times (ms)\n");
    let _ = writeln!(
        s,
        "{:12}{:>7} {:>7}[+/-sd] {:>8} {:>9}",
        "", "min", "mean", "median", "max"
    );
    let (h, e) = (&r.hist, &r.hist.sums);
    for (name, t) in [
        ("Connect:", Times::new(&h.connect, &e.connect)),
        ("Processing:", Times::new(&h.processing, &e.processing)),
        ("Waiting:", Times::new(&h.waiting, &e.waiting)),
        ("Total:", Times::new(&h.total, &e.total)),
    ] {
        let row = TimeRow::of(t);
        let _ = writeln!(
            s,
            "{name:<12}{:>7.3} {:>7.3} {:>6.3} {:>8.3} {:>9.3}",
            row.min, row.mean, row.sd, row.median, row.max
        );
    }
    s.push_str("\nPercentage of the requests served within a certain time (ms)\n");
    percentile_table(s, Times::new(&r.hist.total, &r.hist.sums.total));
}

/// `--rate`: the target against the achieved rate, and the uncorrected percentiles.
fn rate(s: &mut String, r: &RunResult, target: f64) {
    let t = &r.totals;
    let achieved = achieved_rate(r);
    let (target_text, achieved_text) = (rate_digits(target), rate_digits(achieved));
    let _ = writeln!(s, "Target rate:            {target_text} [#/sec]");
    let _ = writeln!(s, "Achieved rate:          {achieved_text} [#/sec]");
    if r.rate_reached() == Some(false) {
        // Sent on time and failed (refused connects, say): more connections do not help.
        let why = if r.sent_at_rate() == Some(true) {
            let failed = t.attempts.saturating_sub(t.completed);
            format!(
                "the requests were sent at the rate, but {failed} of the {} failed",
                t.attempts
            )
        } else {
            "add connections (-c) or the server is saturated".to_string()
        };
        let _ = writeln!(
            s,
            "WARNING: target rate NOT reached: {achieved_text} of {target_text} req/s ({:.1}%); \
             {why}",
            if target > 0.0 {
                achieved / target * 100.0
            } else {
                0.0
            }
        );
    }
    if t.completed > 0 {
        s.push_str(
            "\nUncorrected percentages (ms, from each request's actual send time, \
             not corrected for coordinated omission)\n",
        );
        percentile_table(s, Times::new(&r.hist.uncorrected, &r.hist.sums.uncorrected));
    }
    lateness(s, r);
    s.push('\n');
}

/// `--rate`: the generator's own send lateness, and a warning when it is a noticeable part
/// of the corrected latency.
fn lateness(s: &mut String, r: &RunResult) {
    let late = &r.hist.send_lateness;
    let pacing = if r.spin {
        "--spin: busy-polled to each send time"
    } else {
        "timer, woken a tick early (--spin paces exactly, for a core)"
    };
    if late.is_empty() {
        let _ = writeln!(
            s,
            "\nSend lateness: none measured (no send waited for its time; pacing: {pacing})"
        );
    } else {
        let _ = writeln!(
            s,
            "\nSend lateness (ms, actual minus intended send time, {} sends that waited for \
             their time; the generator's own delay, inside the corrected figures; pacing: \
             {pacing})",
            late.len()
        );
        let late = Times::new(late, &r.hist.sums.send_lateness);
        percentile_rows(s, late, "latest send");
    }
    if let Some(p99) = crate::figures::late_sender(r) {
        let _ = writeln!(
            s,
            "WARNING: the generator sent late: corrected latency includes up to {:.3} ms of \
             its own delay; see --spin",
            ms(p99 as f64)
        );
    }
}

/// http_load's connect and first-response times and bad byte counts, wrk's socket errors,
/// the status codes, the drain at the stop.
fn extras(s: &mut String, r: &RunResult) {
    let t = &r.totals;
    let f = &t.failures;
    let (h, e) = (&r.hist, &r.hist.sums);
    let cpc = Times::new(&h.connect_per_connection, &e.connect_per_connection);
    min_mean_max(s, "msecs/connect", cpc);
    tls_lines(s, r);
    min_mean_max(
        s,
        "msecs/first-response",
        Times::new(&h.waiting, &e.waiting),
    );
    if !r.accept_variable_length {
        let _ = writeln!(s, "{} bad byte counts", r.bad_byte_counts());
    }
    let _ = writeln!(
        s,
        "Socket errors: connect {}, read {}, write {}, timeout {}",
        f.connect,
        f.receive(),
        f.write,
        f.timeout
    );
    // wrk's count: status above 399 (ab's "Non-2xx responses" counts redirects too).
    let wrk_errors: u64 = t.status.iter().filter(|s| s.0 > 399).map(|s| s.1).sum();
    let _ = writeln!(s, "Non-2xx or 3xx responses: {wrk_errors}");
    if t.status.is_empty() {
        s.push_str("HTTP response codes: none\n");
    } else {
        s.push_str("HTTP response codes:\n");
        for (code, n) in t.status_map() {
            let _ = writeln!(s, "  code {code} -- {n}");
        }
    }
    if let Some(d) = &r.drain {
        let _ = writeln!(
            s,
            "In flight at the stop:  {} (drained in {:.3} ms: answered ones counted, {} \
             unanswered; the load period and the rates end at the stop)",
            d.in_flight,
            d.took.as_secs_f64() * 1000.0,
            f.unanswered
        );
    }
}

/// `https://`: http_load's msecs/connect is the TCP connect alone; the handshake after it is
/// on its own line, with the full and resumed counts (ab's "Connect" column holds both).
fn tls_lines(s: &mut String, r: &RunResult) {
    let Some(t) = r.tls else {
        return;
    };
    let h = Times::new(&r.hist.tls_handshake, &r.hist.sums.tls_handshake);
    min_mean_max(s, "msecs/tls-handshake", h);
    let _ = writeln!(s, "TLS handshakes: {} full, {} resumed", t.full, t.resumed);
}

/// http_load's `msecs/...: MEAN mean, MAX max, MIN min` line (none when nothing was timed).
fn min_mean_max(s: &mut String, name: &str, t: Times<'_>) {
    if !t.is_empty() {
        let _ = writeln!(
            s,
            "{name}: {:.3} mean, {:.3} max, {:.3} min",
            ms(t.mean_us()),
            ms(t.max_us() as f64),
            ms(t.min_us() as f64)
        );
    }
}

/// What was sent and over how many connections (byte counts differ from ab's otherwise).
fn what_was_sent(s: &mut String, r: &RunResult) {
    // What was sent: byte counts differ from ab's, which speaks HTTP/1.0, unless --http1.0.
    let _ = writeln!(
        s,
        "Requests sent:          {} {}, {}",
        r.method,
        if r.http10 { "HTTP/1.0" } else { "HTTP/1.1" },
        if r.keep_alive {
            "keep-alive"
        } else {
            "a connection per request (--close)"
        }
    );
    let kept = if r.warmup.is_some() && r.keep_alive {
        // Keep-alive connections opened in the warm-up carry on into the measured run.
        " (besides the warm-up's, kept open)"
    } else {
        ""
    };
    let _ = writeln!(s, "Connections opened:     {}{kept}", r.connections_opened);
    if !r.keep_alive {
        if r.source_addresses > 0 {
            let _ = writeln!(
                s,
                "Source addresses:       {} (127.0.0.0/8, connects spread over them)",
                r.source_addresses
            );
        } else {
            s.push_str("Source addresses:       1 (the kernel's choice)\n");
        }
    }
}

/// Workers, warm-up, interruption.
fn run_context(s: &mut String, r: &RunResult) {
    let _ = writeln!(
        s,
        "Workers:                {} ({}; {})",
        r.workers, r.driver, r.pinning
    );
    if let Some(w) = r.warmup {
        let _ = writeln!(
            s,
            "Warm-up:                {} (not counted)",
            shared::units::format_duration(w)
        );
    }
    if r.interrupted {
        s.push_str(
            "Interrupted:            yes (Ctrl-C or SIGTERM); the figures cover what was done\n",
        );
    }
}

/// ab's percentile table, extended with 99.9 and 99.99, then the longest request.
fn percentile_table(s: &mut String, t: Times<'_>) {
    percentile_rows(s, t, "longest request");
}

/// The percentile rows, the 100 % row labelled `last`.
fn percentile_rows(s: &mut String, t: Times<'_>, last: &str) {
    for &p in PERCENTILES {
        let _ = writeln!(
            s,
            " {:>7} {:>9.3}",
            percent_label(p),
            ms(t.percentile_us(p) as f64)
        );
    }
    let _ = writeln!(s, " {:>7} {:>9.3} ({last})", "100%", ms(t.max_us() as f64));
}

/// The per-URL breakdown (with `--urls`).
fn url_table(s: &mut String, r: &RunResult) {
    s.push_str("\nPer-URL breakdown:\n");
    let _ = writeln!(
        s,
        "  {:>9} {:>7} {:>8} {:>11} {:>9} {:>9} {:>9}  URL",
        "Complete", "Failed", "Non-2xx", "Doc length", "Mean ms", "Min ms", "Max ms"
    );
    for u in &r.urls {
        let c = &u.counts;
        let len = u
            .document_length
            .map_or_else(|| "-".to_string(), |n| n.to_string());
        let _ = writeln!(
            s,
            "  {:>9} {:>7} {:>8} {:>11} {:>9.3} {:>9.3} {:>9.3}  {}",
            c.completed,
            c.failures.ab_failed() + c.failures.write,
            c.non_2xx,
            len,
            ms(u.latency.mean_us()),
            ms(u.latency.min() as f64),
            ms(u.latency.max_us as f64),
            u.url
        );
    }
    let _ = writeln!(
        s,
        "\nPer-URL percentiles (ms, total time; {URL_HIST_SIGFIG} significant digits):"
    );
    let _ = writeln!(
        s,
        "  {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  URL",
        "50%", "90%", "99%", "99.9%", "100%", "Count"
    );
    for u in &r.urls {
        let t = Times::new(&u.hist, &u.latency);
        let at = |p: f64| ms(t.percentile_us(p) as f64);
        let _ = writeln!(
            s,
            "  {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9}  {}",
            at(50.0),
            at(90.0),
            at(99.0),
            at(99.9),
            ms(t.max_us() as f64),
            t.len(),
            u.url
        );
    }
    s.push('\n');
}

/// A one-line summary for logs and `compare` rounds.
pub fn summary_line(r: &RunResult) -> String {
    let d = Derived::of(r);
    format!(
        "{} complete, {} failed, {:.2} req/s, p99 {:.3} ms, {:.3} s",
        r.totals.completed,
        r.totals.failures.ab_failed() + r.totals.failures.write,
        d.requests_per_second,
        ms(Times::new(&r.hist.total, &r.hist.sums.total).percentile_us(99.0) as f64),
        r.elapsed.as_secs_f64()
    )
}

/// Whether the run was open-loop.
pub fn is_rate_mode(r: &RunResult) -> bool {
    matches!(r.mode, LoadMode::Rate { .. })
}
