//! The flags of wrk, wrk2 and ab that ours do not already spell the same way, so that their
//! command lines run unchanged (the table is in docs/LOADER.md). `-c -n -d -k -H -T -i -l -m
//! -q --timeout -R` are ours already; this adds the rest and turns it into our flags.
//!
//! Two letters mean different things in two tools: `-t` (wrk: threads; ab: a time limit in
//! seconds) and `-s` (wrk: a Lua script; ab: the response timeout in seconds). The rule:
//! **with `-d` they are wrk's, without `-d` they are ab's.** Every wrk command line in its
//! README and wrk2's has `-d` (its run length); ab has no `-d`.

use super::LoadArgs;
use crate::LoadError;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// ab's `-t` without `-n`: "This implies a -n 50000 internally" (ab's man page).
pub const AB_TIME_LIMIT_REQUESTS: u64 = 50_000;

/// ab's concurrency when `-c` is not given.
const AB_CONNECTIONS: u32 = 1;
/// wrk's connections and timeout when `-c` and `--timeout` are not given.
const WRK_CONNECTIONS: u32 = 10;
const WRK_TIMEOUT: Duration = Duration::from_secs(2);

/// wrk's, wrk2's and ab's flags that are not ours under the same name.
#[derive(Debug, Clone, Default, Args)]
pub struct CompatArgs {
    /// wrk: threads, when -d is given; ab: time limit in seconds, when it is not (with no
    /// -n, at most 50000 requests, as ab)
    // Not with --stages, which sets the run's length: wrk's threads need -d, which --stages
    // refuses, and ab's time limit would be a second length.
    #[arg(short = 't', value_name = "N|SECONDS", conflicts_with = "stages")]
    pub t: Option<String>,
    /// ab: seconds to wait for each response (as --timeout; without -d). wrk's -s SCRIPT is
    /// refused: Lua scripts are not supported
    #[arg(short = 's', value_name = "SECONDS")]
    pub s: Option<String>,
    /// wrk: print wrk's latency distribution (50, 75, 90, 99%) after the report
    #[arg(long)]
    pub latency: bool,
    /// ab: POST this file (as --body FILE); the type with -T (text/plain without, as ab)
    #[arg(short = 'p', value_name = "FILE", conflicts_with_all = ["body", "put_file"])]
    pub post_file: Option<PathBuf>,
    /// ab: PUT this file; the type with -T (text/plain without, as ab)
    #[arg(short = 'u', value_name = "FILE", conflicts_with = "body")]
    pub put_file: Option<PathBuf>,
    /// ab: a "Cookie: NAME=VALUE" header (repeatable)
    #[arg(short = 'C', value_name = "NAME=VALUE")]
    pub cookies: Vec<String>,
    /// ab: Basic authentication, "Authorization: Basic base64(USER:PASSWORD)"
    #[arg(short = 'A', value_name = "USER:PASSWORD")]
    pub auth: Option<String>,
    /// ab: write the time (ms) within which 0..100% of the requests were served, as CSV
    #[arg(short = 'e', value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// ab: write every request's times as gnuplot TSV (the first 1000000 per worker)
    #[arg(short = 'g', value_name = "FILE")]
    pub gnuplot: Option<PathBuf>,
}

/// What the compatible flags ask of the output, beside the run itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompatOutput {
    /// wrk's `--latency` block.
    pub latency: bool,
    /// ab's `-e`.
    pub csv: Option<PathBuf>,
    /// ab's `-g`.
    pub gnuplot: Option<PathBuf>,
    /// Notes for stderr once the run is done: the defaults of the tool whose command line
    /// this is, where they applied; -c capped at the requests.
    pub notes: Vec<String>,
}

impl CompatArgs {
    /// Turn the compatible flags into ours on `load` (a copy of the parsed flags), and say
    /// what they ask of the output. Errors name the flag.
    pub fn apply(&self, load: &mut LoadArgs) -> Result<CompatOutput, LoadError> {
        let invalid = |m: String| Err(LoadError::Invalid(m));
        let wrk = load.duration.is_some();
        let peer_defaults = self.peer_defaults(load);
        if let Some(t) = &self.t {
            if wrk {
                let n = t.parse::<u16>().ok().filter(|n| (1..=1024).contains(n));
                let Some(n) = n else {
                    return invalid(format!("-t {t}: wrk's thread count, 1 to 1024 (with -d)"));
                };
                if load.runtime.workers.is_some_and(|w| w != n) {
                    return invalid(format!("-t {t} disagrees with --threads/--workers"));
                }
                load.runtime.workers = Some(n);
            } else {
                let limit = match ab_seconds(t) {
                    Some(Ok(limit)) => limit,
                    Some(Err(why)) => {
                        return invalid(format!("-t {t}: {why} (ab's time limit in seconds)"))
                    }
                    None => {
                        return invalid(format!(
                            "-t {t}: ab's time limit in seconds (without -d; with -d, -t is \
                             wrk's thread count)"
                        ))
                    }
                };
                load.duration = Some(limit);
                load.requests.get_or_insert(AB_TIME_LIMIT_REQUESTS);
            }
        }
        if let Some(s) = &self.s {
            match ab_seconds(s) {
                Some(Ok(timeout)) if !wrk => load.timeout = Some(timeout),
                Some(Err(why)) if !wrk => {
                    return invalid(format!("-s {s}: {why} (ab's response timeout in seconds)"))
                }
                _ => {
                    return invalid(format!(
                        "-s {s}: wrk's Lua scripts are not supported; use -H for headers, -m \
                         and --body (or -p/-u) for the method and body, --urls for several URLs \
                         (-s SECONDS is ab's response timeout, without -d)"
                    ))
                }
            }
        }
        self.apply_request(load)?;
        Ok(CompatOutput {
            latency: self.latency,
            csv: self.csv.clone(),
            gnuplot: self.gnuplot.clone(),
            notes: peer_defaults.into_iter().collect(),
        })
    }

    /// A command line with a flag only ab has, or one only wrk has (and none of the other's),
    /// is that tool's: its users expect its defaults, which are set on `load` where not given
    /// (ab: -c 1; wrk: -c 10, --timeout 2s; ab's timeout is ours). Says which, if any applied.
    /// Called before -t and -s are turned into ours (ab's -t sets -d).
    fn peer_defaults(&self, load: &mut LoadArgs) -> Option<String> {
        let wrk = load.duration.is_some();
        let ab_flags = [
            (load.keepalive, "-k"),
            (self.t.is_some() && !wrk, "-t"),
            (self.s.is_some() && !wrk, "-s"),
            (self.post_file.is_some(), "-p"),
            (self.put_file.is_some(), "-u"),
            (!self.cookies.is_empty(), "-C"),
            (self.auth.is_some(), "-A"),
            (self.csv.is_some(), "-e"),
            (self.gnuplot.is_some(), "-g"),
        ];
        let wrk_flags = [(self.t.is_some() && wrk, "-t"), (self.latency, "--latency")];
        let first = |flags: &[(bool, &'static str)]| flags.iter().find(|f| f.0).map(|f| f.1);
        let (tool, flag, connections, timeout) = match (first(&ab_flags), first(&wrk_flags)) {
            (Some(flag), None) => ("ab", flag, AB_CONNECTIONS, None),
            (None, Some(flag)) => ("wrk", flag, WRK_CONNECTIONS, Some(WRK_TIMEOUT)),
            _ => return None,
        };
        let (mut theirs, mut ours) = (Vec::new(), Vec::new());
        if load.connections.is_none() {
            load.connections = Some(connections);
            theirs.push(format!("-c {connections}"));
            ours.push(format!("-c {}", crate::options::DEFAULT_CONNECTIONS));
        }
        if let Some(t) = timeout.filter(|_| load.timeout.is_none()) {
            load.timeout = Some(t);
            theirs.push(format!("--timeout {}", shared::units::format_duration(t)));
            ours.push(format!(
                "--timeout {}",
                shared::units::format_duration(crate::options::DEFAULT_TIMEOUT)
            ));
        }
        (!theirs.is_empty()).then(|| {
            format!(
                "{tool}'s command line ({flag}): {tool}'s {} (the loader's own: {})",
                theirs.join(", "),
                ours.join(", ")
            )
        })
    }

    /// ab's `-p`, `-u`, `-C` and `-A`: the body and method, and headers.
    fn apply_request(&self, load: &mut LoadArgs) -> Result<(), LoadError> {
        let bodies = [
            (&self.post_file, "-p", "POST"),
            (&self.put_file, "-u", "PUT"),
        ];
        if let Some((_, flag, method)) = bodies.iter().find(|b| b.0.is_some() && load.head) {
            // ab: "Cannot mix HEAD with other methods". Dropping -i would send a method the
            // user did not ask for; keeping it, a HEAD with a body.
            return Err(LoadError::Invalid(format!(
                "-i sends HEAD requests, {flag} a {method} with a body: give one of them"
            )));
        }
        if let Some(f) = &self.post_file {
            load.body = Some(f.clone());
            load.method.get_or_insert_with(|| "POST".into());
        }
        if let Some(f) = &self.put_file {
            load.body = Some(f.clone());
            load.method.get_or_insert_with(|| "PUT".into());
        }
        let typed = load.headers.iter().any(|h| {
            h.split_once(':')
                .is_some_and(|(n, _)| n.trim().eq_ignore_ascii_case("content-type"))
        });
        if (self.post_file.is_some() || self.put_file.is_some()) && !typed {
            // ab's type for a body without -T (--body's own is application/octet-stream).
            load.content_type.get_or_insert_with(|| "text/plain".into());
        }
        for c in &self.cookies {
            load.headers.push(format!("Cookie: {c}"));
        }
        if let Some(a) = &self.auth {
            if !a.contains(':') {
                return Err(LoadError::Invalid(format!(
                    "-A {a}: expected USER:PASSWORD"
                )));
            }
            let b64 = shared::base64::encode(a.as_bytes());
            load.headers.push(format!("Authorization: Basic {b64}"));
        }
        Ok(())
    }
}

/// ab's seconds (`5`, `0.5`): `None` when `s` is no number, else the duration or what is
/// wrong with it.
fn ab_seconds(s: &str) -> Option<Result<Duration, &'static str>> {
    let v: f64 = s.parse().ok().filter(|v: &f64| !v.is_nan())?;
    Some(match Duration::try_from_secs_f64(v) {
        // Below a nanosecond rounds to zero: -d's and --timeout's words for a zero.
        _ if v <= 0.0 => Err("must be more than zero"),
        Ok(d) if d.is_zero() => Err("must be more than zero"),
        Ok(d) if v < 1e9 => Ok(d),
        _ => Err("must be less than 1e9 seconds"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::Parser;

    fn applied(args: &[&str]) -> Result<(LoadArgs, CompatOutput), LoadError> {
        let argv = std::iter::once("loader").chain(args.iter().copied());
        let cli = Cli::try_parse_from(argv).expect("parses");
        let mut load = cli.load.clone();
        let out = cli.compat.apply(&mut load)?;
        Ok((load, out))
    }

    #[test]
    fn t_and_s_follow_the_rule_wrk_with_d_ab_without() {
        let (l, _) = applied(&["-t4", "-c64", "-d10s", "--latency", "http://h/"]).unwrap();
        assert_eq!(l.runtime.workers, Some(4));
        assert_eq!(l.duration, Some(Duration::from_secs(10)));
        let (l, _) = applied(&["-t", "30", "-c", "10", "http://h/"]).unwrap();
        assert_eq!(l.runtime.workers, None);
        assert_eq!(l.duration, Some(Duration::from_secs(30)));
        assert_eq!(l.requests, Some(AB_TIME_LIMIT_REQUESTS));
        let (l, _) = applied(&["-n", "100", "-t", "5", "-s", "2", "http://h/"]).unwrap();
        assert_eq!(l.requests, Some(100));
        assert_eq!(l.timeout, Some(Duration::from_secs(2)));
        let e = applied(&["-d", "1s", "-s", "x.lua", "http://h/"]).unwrap_err();
        assert!(
            e.to_string().contains("Lua scripts are not supported"),
            "{e}"
        );
        assert!(applied(&["-s", "x.lua", "http://h/"]).is_err());
        assert!(applied(&["-d", "1s", "-t", "0", "http://h/"]).is_err());
        assert!(applied(&["-t", "4", "--threads", "2", "-d", "1", "http://h/"]).is_err());
    }

    /// ab's seconds below a nanosecond round to a zero load period or timeout, which -d and
    /// --timeout refuse: refused here too, in their words.
    #[test]
    fn ab_seconds_that_round_to_zero_are_refused() {
        for args in [
            &["-t", "0.0000000001", "http://h/"][..],
            &["-t", "0", "http://h/"][..],
            &["-s", "0.0000000001", "http://h/"][..],
            &["-s", "0", "http://h/"][..],
        ] {
            let e = applied(args).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{} {}: ", args[0], args[1])), "{e}");
            assert!(e.contains("must be more than zero"), "{e}");
        }
        let (l, _) = applied(&["-t", "1e-9", "-s", "1e-9", "http://h/"]).unwrap();
        assert_eq!(l.duration, Some(Duration::from_nanos(1)));
        assert_eq!(l.timeout, Some(Duration::from_nanos(1)));
    }

    /// The options a command line runs with, its compatible flags applied.
    fn run_options(args: &[&str]) -> crate::RunOptions {
        let url = "http://127.0.0.1:1/";
        let (load, _) = applied(&[args, &[url]].concat()).unwrap();
        load.to_options(&[url.to_string()]).unwrap()
    }

    /// Where a command line is unambiguously ab's (a flag only ab has) or wrk's (-t with -d,
    /// --latency), the peer's defaults apply: ab's -c 1; wrk's -c 10 and --timeout 2s.
    /// Otherwise, or given, the loader's own.
    #[test]
    fn a_peers_command_line_runs_with_the_peers_defaults() {
        let got = |args: &[&str]| {
            let o = run_options(args);
            (o.connections, o.timeout.as_secs())
        };
        assert_eq!(got(&["-n", "200"]), (50, 30));
        assert_eq!(got(&["-k", "-n", "200"]), (1, 30));
        assert_eq!(got(&["-n", "200", "-p", "Cargo.toml"]), (1, 30));
        assert_eq!(got(&["-t", "1", "-C", "a=1"]), (1, 30));
        assert_eq!(got(&["-n", "200", "-e", "x.csv"]), (1, 30));
        assert_eq!(got(&["-k", "-c", "8", "-n", "200"]), (8, 30));
        assert_eq!(got(&["-d", "1s"]), (50, 30));
        assert_eq!(got(&["-t2", "-d", "1s"]), (10, 2));
        assert_eq!(got(&["--latency", "-d", "1s"]), (10, 2));
        assert_eq!(got(&["--latency", "-d", "1s", "--timeout", "5s"]), (10, 5));
        assert_eq!(got(&["-t2", "-c", "64", "-d", "1s"]), (64, 2));
        // Both tools' flags: neither's.
        assert_eq!(got(&["-k", "--latency", "-d", "1s"]), (50, 30));
    }

    #[test]
    fn ab_request_flags_become_ours() {
        let (l, _) = applied(&["-p", "b.json", "-T", "application/json", "http://h/"]).unwrap();
        assert_eq!(l.body, Some(PathBuf::from("b.json")));
        assert_eq!(l.method.as_deref(), Some("POST"));
        assert_eq!(l.content_type.as_deref(), Some("application/json"));
        // ab's type without -T (--body's stays application/octet-stream).
        let (l, _) = applied(&["-p", "b.json", "http://h/"]).unwrap();
        assert_eq!(l.content_type.as_deref(), Some("text/plain"));
        let (l, _) = applied(&["--body", "b.json", "http://h/"]).unwrap();
        assert_eq!(l.content_type, None);
        let (l, _) = applied(&[
            "-u",
            "b",
            "-C",
            "a=1",
            "-C",
            "b=2",
            "-A",
            "u:p",
            "http://h/",
        ])
        .unwrap();
        assert_eq!(l.method.as_deref(), Some("PUT"));
        assert_eq!(
            l.headers,
            ["Cookie: a=1", "Cookie: b=2", "Authorization: Basic dTpw"]
        );
        let (_, o) = applied(&["-e", "p.csv", "-g", "g.tsv", "http://h/"]).unwrap();
        assert_eq!(o.csv, Some(PathBuf::from("p.csv")));
        assert_eq!(o.gnuplot, Some(PathBuf::from("g.tsv")));
        assert!(applied(&["-A", "nocolon", "http://h/"]).is_err());
    }
}
