# The comparison table of scripts/tune-experiment.sh, as tab-separated rows (label, A, B), from
# two `loader compare --json` documents of scripts/experiment.sh: $a[0] run under profile A,
# $b[0] under profile B. In each document side "a" is the origin (direct), "b" the proxy.
def num(d): if . == null then "n/a"
    elif d == 0 then (round | tostring)
    else ((. * pow(10; d) | round) / pow(10; d) | tostring) end;
def cell(d; suffix): if . == null then "n/a"
    else "\(.median | num(d))\(suffix) (\(.min | num(d))-\(.max | num(d)))" end;
def proxy_cpu(kind): .watch_pids[0] as $pid
    | if $pid == null then null else .b.figures["pid_\($pid)_\(kind)_us_per_request"] end;
def failed: [(.a.rounds + .b.rounds)[] | .failed_requests + .totals.write_errors] | add;
def non2xx: [(.a.rounds + .b.rounds)[] | .totals.non_2xx] | add;
def row(name; f): [name, ($a[0] | f), ($b[0] | f)];
def ctx(name; f): ($a[0].context | f | tostring) as $x | ($b[0].context | f | tostring) as $y
    | [(if $x == $y then name else name + " *" end), $x, $y];

(
  row("direct req/s"; .a.figures.requests_per_second | cell(0; "")),
  row("proxied req/s"; .b.figures.requests_per_second | cell(0; "")),
  row("proxied / direct req/s"; .b.figures.performance_vs_a_percent | cell(1; "%")),
  row("direct p99 (ms)"; .a.figures.p99_ms | cell(3; "")),
  row("proxied p99 (ms)"; .b.figures.p99_ms | cell(3; "")),
  row("proxy CPU user (us/req)"; proxy_cpu("user") | cell(2; "")),
  row("proxy CPU kernel (us/req)"; proxy_cpu("kernel") | cell(2; "")),
  row("failed requests (sum)"; failed | tostring),
  row("non-2xx responses (sum)"; non2xx | tostring),
  ["", "", ""],
  ["context recorded by the loader (* where A and B differ)", "", ""],
  ctx("kernel"; .kernel),
  ctx("I/O driver"; .driver),
  ctx("CPUs available"; .cpus_available),
  (((($a[0].context.sysctls // {}) + ($b[0].context.sysctls // {})) | keys[]) as $k
    | ctx($k; .sysctls[$k] // "absent")),
  ctx("open files (soft/hard)"; .open_files_limit
    | if . == null then "n/a" else "\(.soft)/\(.hard)" end)
) | @tsv
