#!/usr/bin/env python3
"""The soak run behind scripts/soak.sh: mixed load through the proxy (keep-alive, a connection
per request, pipelined, uploads, TLS, WebSocket) for DURATION, the origin killed and
restarted every FAULT_EVERY seconds, a reload (SIGHUP) every minute; the proxy's descriptors,
resident memory and CPU per request sampled each minute. Passes when the last sample's
descriptors and anonymous RSS (RssAnon: the binary's own pages aside) are within 5% of the
first's (after a warm-up reload before the load) and every request is accounted for (sent =
answered + counted failures, per kind)."""
import base64, json, os, re, signal, socket, ssl, subprocess, sys, tempfile, threading, time

PROXY, LOADER = sys.argv[1], sys.argv[2]
DURATION = int(os.environ.get("DURATION", "600"))
RATE = os.environ.get("RATE", "50")          # requests per second, per loader
FAULT_EVERY = float(os.environ.get("FAULT_EVERY", "5"))
SAMPLE_EVERY = float(os.environ.get("SAMPLE_EVERY", "60"))
RELOAD_EVERY = float(os.environ.get("RELOAD_EVERY", "60"))
tmp = tempfile.mkdtemp(prefix="soak.")
procs = []

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(args, **kw):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(f"{tmp}/{os.path.basename(args[0])}-{len(procs)}.err", "w"), **kw)
    procs.append(p)
    return p

def wait_port(port, proc):
    for _ in range(400):
        if proc.poll() is not None:
            sys.exit(f"soak: {proc.args[0]} exited at start (see {tmp})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"soak: nothing listens on {port}")

# ---- origin, certificate, proxy --------------------------------------------------------
OPORT, PPORT, TPORT, APORT = free_port(), free_port(), free_port(), free_port()
def start_origin():
    return start([LOADER, "origin", "--listen", f"127.0.0.1:{OPORT}", "--body-size", "1024",
                  "--workers", "1", "--no-pin"])
origin = start_origin(); wait_port(OPORT, origin)
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                "-keyout", f"{tmp}/key.pem", "-out", f"{tmp}/cert.pem"], check=True, capture_output=True)
conf = f"""
[[listen]]
addr = "127.0.0.1:{PPORT}"
[[listen]]
addr = "127.0.0.1:{TPORT}"
[listen.tls]
cert = "{tmp}/cert.pem"
key = "{tmp}/key.pem"
[admin]
addr = "127.0.0.1:{APORT}"
[runtime]
workers = 2
pin = false
[timeouts]
connect = "1s"
read = "2s"
shutdown = "2s"
[upstream.app]
servers = [{{ addr = "127.0.0.1:{OPORT}", max_fails = 0 }}]
# Idle upstream connections go soon after the load: the count of descriptors at rest is exact.
keepalive_timeout = "1s"
[[route]]
path = "/"
upstream = "app"
"""
open(f"{tmp}/proxy.toml", "w").write(conf)
proxy = start([PROXY, "--config", f"{tmp}/proxy.toml"]); wait_port(PPORT, proxy)
proxy_log = f"{tmp}/{os.path.basename(PROXY)}-{len(procs) - 1}.err"

def reloaded(generation, timeout=10):
    """Wait for the proxy's line that generation `generation` took over."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if f"reload: generation {generation} " in open(proxy_log).read():
            return
        time.sleep(0.05)
    sys.exit(f"soak: the proxy did not log reload generation {generation} within {timeout} s (see {proxy_log})")

# Warm-up: a first reload touches once what every later one reuses (the reloading thread's
# stack and arena: ~80 KiB of anonymous memory on an idle proxy), which is not drift. The
# warm-up load is the first minute's, before the first sample.
proxy.send_signal(signal.SIGHUP)
reloaded(2)

# ---- samples -----------------------------------------------------------------------------
HZ = os.sysconf("SC_CLK_TCK")
def requests_total():
    s = socket.create_connection(("127.0.0.1", APORT), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        data += d
    return sum(float(v) for v in re.findall(rb"^proxy_requests_total\{[^}]*\} (\S+)$", data, re.M))

def sample():
    pid = proxy.pid
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    status = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    # The proxy's own memory: RSS without the binary's file-backed pages, which grow as code
    # paths first run (a reload, a 502, TLS) up to the binary's size and are not allocations.
    anon = int(re.search(r"RssAnon:\s+(\d+)", status).group(1))
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / HZ
    return {"t": time.time(), "fds": fds, "rss_kib": rss, "anon_kib": anon, "cpu_s": cpu,
            "requests": requests_total()}

# ---- WebSocket client ----------------------------------------------------------------------
ws = {"sent": 0, "answered": 0, "connect": 0, "handshake": 0, "echo": 0}
def ws_once():
    ws["sent"] += 1
    try:
        s = socket.create_connection(("127.0.0.1", PPORT), timeout=3)
    except OSError:
        ws["connect"] += 1; return
    try:
        key = base64.b64encode(os.urandom(16))
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " + key + b"\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            d = s.recv(4096)
            if not d:
                break
            head += d
        if not head.startswith(b"HTTP/1.1 101"):
            ws["handshake"] += 1; return
        rest = head.split(b"\r\n\r\n", 1)[1]
        # The origin echoes the bytes as they come: the very frame (masked, as a client sends).
        payload, mask = b"soak", os.urandom(4)
        frame = bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        s.sendall(frame)
        while len(rest) < len(frame):
            d = s.recv(4096)
            if not d:
                break
            rest += d
        if rest[:len(frame)] == frame:
            ws["answered"] += 1
        else:
            ws["echo"] += 1
    except OSError:
        ws["echo"] += 1
    finally:
        s.close()

# ---- the run ---------------------------------------------------------------------------------
body = f"{tmp}/upload.bin"
open(body, "wb").write(os.urandom(64 << 10))
base = [LOADER, "-d", f"{DURATION}s", "--rate", RATE, "-q", "-l", "--timeout", "3s", "--workers", "1", "--no-pin"]
kinds = {
    "keep-alive": ["-c", "4", f"http://127.0.0.1:{PPORT}/ka"],
    "close": ["-c", "2", "--close", f"http://127.0.0.1:{PPORT}/close"],
    "pipelined": ["-c", "2", "--pipeline", "4", f"http://127.0.0.1:{PPORT}/pipe"],
    "upload": ["-c", "2", "-m", "POST", "--body", body, f"http://127.0.0.1:{PPORT}/up"],
    "tls": ["-c", "2", "--insecure", f"https://127.0.0.1:{TPORT}/tls"],
}
def fd_targets():
    out = {}
    for fd in os.listdir(f"/proc/{proxy.pid}/fd"):
        try:
            out[fd] = os.readlink(f"/proc/{proxy.pid}/fd/{fd}")
        except OSError:
            pass
    return out

def sockets():
    """Every socket of the machine this script can name, `socket:[inode]` -> its kind (`tcp`
    and its state in hex, `udp`, `unix`). A TCP socket that is closed but still open in a
    process (a reset connection nobody closed) is in no table: unnamed."""
    kinds = {}
    for f, kind in (("/proc/net/tcp", "tcp"), ("/proc/net/tcp6", "tcp"), ("/proc/net/udp", "udp"),
                    ("/proc/net/udp6", "udp"), ("/proc/net/unix", "unix")):
        for line in open(f).readlines()[1:]:
            w = line.split()
            if kind == "unix":
                kinds[f"socket:[{w[6]}]"] = "unix"
            else:
                kinds[f"socket:[{w[9]}]"] = f"{kind} {w[3]}"
    return kinds

def tcp_sockets():
    """Every TCP socket of the machine as `socket:[inode]`, and those listening."""
    kinds = sockets()
    every = {k for k, v in kinds.items() if v.startswith("tcp")}
    return every, {k for k, v in kinds.items() if v == "tcp 0A"}

def at_rest(timeout=10):
    """The proxy's descriptors once it holds no TCP connection (listeners, files, rings and
    eventfds only) and the same ones 0.2 s later: a connection that is still closing (an
    accepted one whose client left shows for a moment) is not a leak, one that stays for
    `timeout` seconds is."""
    deadline = time.time() + timeout
    before = None
    while True:
        t = fd_targets()
        every, listening = tcp_sockets()
        conns = [v for v in t.values() if v in every and v not in listening]
        if (not conns and t == before) or time.time() > deadline:
            return t, len(conns)
        before = t
        time.sleep(0.2)

rest_targets, _ = at_rest()
fds_at_rest = len(rest_targets)
loaders = {k: start(base + ["--json", f"{tmp}/{k}.json"] + a) for k, a in kinds.items()}
stop = threading.Event()
faults = reloads = 0

def faulter():
    global origin, faults
    while not stop.wait(FAULT_EVERY):
        origin.kill(); origin.wait()
        faults += 1
        time.sleep(0.3)
        origin = start_origin()

def reloader():
    global reloads
    while not stop.wait(RELOAD_EVERY):
        proxy.send_signal(signal.SIGHUP); reloads += 1

def ws_loop():
    while not stop.wait(0.5):
        ws_once()

threads = [threading.Thread(target=f, daemon=True) for f in (faulter, reloader, ws_loop)]
for t in threads:
    t.start()
samples, t0 = [], time.time()
while time.time() - t0 < DURATION:
    time.sleep(min(SAMPLE_EVERY, max(0.1, DURATION - (time.time() - t0))))
    samples.append(sample())
    s = samples[-1]
    print(f"soak: {int(s['t'] - t0):4d}s  fds {s['fds']}  rss {s['rss_kib']} KiB (anon {s['anon_kib']})  cpu {s['cpu_s']:.1f}s  "
          f"requests {int(s['requests'])}", flush=True)
stop.set()
for k, p in loaders.items():
    p.wait(timeout=60)
for t in threads:
    t.join(timeout=10)
# At rest again (the clients gone, the idle upstream connections closed): the descriptors
# the proxy holds are exactly those it held before the load, or one leaked.
after_targets, conns_after = at_rest()
fds_after = len(after_targets)

# ---- the verdict ---------------------------------------------------------------------------
ok = True
print("soak: per kind: sent = answered + failures")
for k in kinds:
    t = json.load(open(f"{tmp}/{k}.json"))["totals"]
    f = t["failures"]
    counted = f["connect"] + f["read"] + f["write"] + f["timeout"] + f["parse"] + f["unanswered"]
    good = t["attempts"] == t["completed"] + counted
    ok &= good
    fails = ", ".join(f"{n} {f[n]}" for n in ("connect", "read", "write", "timeout", "parse", "unanswered") if f[n])
    print(f"  {k:11s} sent {t['attempts']:7d}  answered {t['completed']:7d} ({', '.join(f'{c}: {n}' for c, n in sorted(t['status'].items()))})"
          f"  failed {counted} ({fails or 'none'})  {'ok' if good else 'MISMATCH'}")
wgood = ws["sent"] == ws["answered"] + ws["connect"] + ws["handshake"] + ws["echo"]
ok &= wgood
print(f"  {'websocket':11s} sent {ws['sent']:7d}  answered {ws['answered']:7d}  failed: connect {ws['connect']}, "
      f"handshake {ws['handshake']}, echo {ws['echo']}  {'ok' if wgood else 'MISMATCH'}")
print(f"soak: {faults} origin faults (killed and restarted), {reloads} reloads")
if len(samples) >= 2:
    a, b = samples[0], samples[-1]
    per_req = (b["cpu_s"] - a["cpu_s"]) / max(1, b["requests"] - a["requests"]) * 1e6
    for what in ("fds", "rss_kib", "anon_kib"):
        drift = abs(b[what] - a[what]) / max(1, a[what])
        # Descriptors under load are a snapshot of the connections open at that instant (a
        # few dozen, so one or two more is over 5%): shown, and judged at rest below. The
        # memory judged is the anonymous part (RssAnon): VmRSS also counts the binary's
        # pages, faulted in as code paths first run (a debug build's grow by megabytes).
        judged = what == "anon_kib"
        good = drift <= 0.05 or not judged
        ok &= good
        note = "ok" if drift <= 0.05 else ("DRIFT" if judged else "(not judged)")
        print(f"soak: {what} under load: first {a[what]}, last {b[what]} ({drift * 100:.1f}%) {note}")
    print(f"soak: CPU per request between the first and last samples: {per_req:.0f} us")
else:
    print("soak: fewer than two samples (DURATION under 2 x SAMPLE_EVERY): no drift verdict")
good = fds_after == fds_at_rest
ok &= good
print(f"soak: fds at rest: before the load {fds_at_rest}, after it {fds_after} {'ok' if good else 'LEAK'}")
if conns_after:
    print(f"soak:   {conns_after} TCP connections still open 10 s after the load")
if not good:
    after = after_targets
    for fd in sorted(set(rest_targets) | set(after), key=int):
        if rest_targets.get(fd) != after.get(fd):
            kind = sockets().get(after.get(fd), "unnamed" if after.get(fd, "").startswith("socket") else "")
            print(f"soak:   fd {fd}: before {rest_targets.get(fd, '-')}, after {after.get(fd, '-')} {kind}")
alive = proxy.poll() is None
ok &= alive
print(f"soak: proxy {'still running' if alive else 'EXITED'}; {'PASS' if ok else 'FAIL'} (files in {tmp})")
for p in procs:
    if p.poll() is None:
        p.terminate()
sys.exit(0 if ok else 1)
