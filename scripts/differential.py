#!/usr/bin/env python3
"""Differential run: malformed and borderline requests through nginx and through our proxy,
each in front of the same capturing origin. Per request: the statuses the client got and the
bytes the origin received (normalised: the request line, the fields but the ones each proxy
writes itself, the body). Prints the requests where the two differ; see differential.sh."""
import os, re, socket, subprocess, sys, tempfile, threading, time

OUR_BIN, NGINX = sys.argv[1], sys.argv[2]
QUIET = 0.6  # seconds of silence that end a read (nothing a case waits for is slower)

# ---- the capturing origin -------------------------------------------------------------
captured, lock = [], threading.Lock()

def read_request(conn, buf):
    """One request (head and body by its framing) from conn; (raw, rest) or None."""
    while b"\r\n\r\n" not in buf:
        d = conn.recv(65536)
        if not d:
            return None
        buf += d
    end = buf.index(b"\r\n\r\n") + 4
    head = buf[:end]
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        if b":" in line:
            k, v = line.split(b":", 1)
            fields.setdefault(k.strip().lower(), []).append(v.strip())
    body_at = end
    if b"chunked" in b",".join(fields.get(b"transfer-encoding", [])).lower():
        at = body_at
        while True:
            while b"\r\n" not in buf[at:]:
                d = conn.recv(65536)
                if not d:
                    return None
                buf += d
            eol = buf.index(b"\r\n", at)
            size = int(buf[at:eol].split(b";")[0] or b"0", 16)
            at = eol + 2
            if size == 0:
                while b"\r\n\r\n" not in buf[at - 2:]:
                    d = conn.recv(65536)
                    if not d:
                        return None
                    buf += d
                at = buf.index(b"\r\n\r\n", at - 2) + 4
                break
            while len(buf) < at + size + 2:
                d = conn.recv(65536)
                if not d:
                    return None
                buf += d
            at += size + 2
        return buf[:at], buf[at:]
    n = int(fields.get(b"content-length", [b"0"])[0] or b"0")
    while len(buf) < body_at + n:
        d = conn.recv(65536)
        if not d:
            return None
        buf += d
    return buf[:body_at + n], buf[body_at + n:]

def serve(conn):
    buf = b""
    conn.settimeout(10)
    try:
        while True:
            r = read_request(conn, buf)
            if r is None:
                return
            raw, buf = r
            with lock:
                captured.append(raw)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except Exception:
        pass
    finally:
        conn.close()

origin = socket.socket()
origin.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
origin.bind(("127.0.0.1", 0))
origin.listen(128)
OPORT = origin.getsockname()[1]
threading.Thread(target=lambda: [threading.Thread(target=serve, args=(c,), daemon=True).start()
                                 for c, _ in iter(origin.accept, None)], daemon=True).start()

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

# ---- the two proxies ------------------------------------------------------------------
tmp = tempfile.mkdtemp(prefix="differential.")
NPORT, PPORT = free_port(), free_port()
conf = f"""
worker_processes 1; daemon off; error_log {tmp}/error.log; pid {tmp}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
  access_log off; client_body_temp_path {tmp}; proxy_temp_path {tmp};
  fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};
  client_header_timeout 2s; client_body_timeout 2s;
  server {{
    listen 127.0.0.1:{NPORT};
    location / {{
      proxy_pass http://127.0.0.1:{OPORT};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_request_buffering off; proxy_buffering off;
    }}
  }}
}}
"""
open(f"{tmp}/nginx.conf", "w").write(conf)
procs = [subprocess.Popen([NGINX, "-c", f"{tmp}/nginx.conf", "-p", tmp], stderr=subprocess.DEVNULL),
         subprocess.Popen([OUR_BIN, "--listen", f"127.0.0.1:{PPORT}", "--upstream", f"127.0.0.1:{OPORT}",
                           "--workers", "1", "--no-pin", "--header-timeout", "2s", "--body-timeout", "2s"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]

def wait_port(p):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", p), timeout=0.2).close(); return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {p}")

# ---- the requests ---------------------------------------------------------------------
def cases():
    H = b"Host: t\r\n"
    out = []
    def add(name, raw): out.append((name, raw))
    for m in [b"GET", b"get", b"G@T", b"PUT", b"DELETE", b"OPTIONS", b"TRACE", b"PATCH", b"M" * 40,
              b"CONNECT", b"PRI", b"HEAD", b"POST", b"FOO", b"GET\x00"]:
        add(b"method " + m[:12], m + b" / HTTP/1.1\r\n" + H + b"\r\n")
    for t in [b"*", b"http://t/a", b"http://other/a", b"https://t/a", b"t:80", b"/a#frag", b"/a b",
              b"/%00", b"/../../etc/passwd", b"/a/./b/../c", b"//a", b"/%2e%2e/a", b"/\xff",
              b"/a?b=c&d", b"/a?", b"a", b"/" + b"a" * 9000, b"/%zz", b"/a\tb", b"http://t",
              b"http://t:99999/", b"http://user@t/", b"/?%", b"/%2F"]:
        add(b"target " + t[:30], b"GET " + t + b" HTTP/1.1\r\n" + H + b"\r\n")
    for v in [b"HTTP/1.0", b"HTTP/1.2", b"HTTP/2.0", b"HTTP/0.9", b"http/1.1", b"HTTP/1.1 ", b"HTTP/1",
              b"HTTP/1.10", b"HTTP/3", b"HTTPS/1.1", b""]:
        add(b"version " + v, b"GET / " + v + b"\r\n" + H + b"\r\n")
    add(b"no version no space", b"GET /\r\n\r\n")
    add(b"two spaces", b"GET  / HTTP/1.1\r\n" + H + b"\r\n")
    add(b"leading CRLF", b"\r\nGET / HTTP/1.1\r\n" + H + b"\r\n")
    add(b"leading CRLFx3", b"\r\n\r\n\r\nGET / HTTP/1.1\r\n" + H + b"\r\n")
    add(b"bare LF", b"GET / HTTP/1.1\nHost: t\n\n")
    add(b"bare CR", b"GET / HTTP/1.1\rHost: t\r\r")
    add(b"mixed LF", b"GET / HTTP/1.1\r\nHost: t\n\r\n")
    # Host
    for h in [b"", b"Host: t\r\nHost: t\r\n", b"Host: t\r\nHost: u\r\n", b"Host:\r\n", b"Host: t:81\r\n",
              b"Host: t:\r\n", b"Host: t:x\r\n", b"Host: a b\r\n", b"Host: a/b\r\n", b"Host: [::1]\r\n",
              b"Host: [::1\r\n", b"Host: T.\r\n", b"Host: t..\r\n", b"Host: \xff\r\n", b"Host: t@u\r\n",
              b"Host: -t\r\n", b"host: t\r\n", b"HOST: t\r\n", b"Host : t\r\n", b" Host: t\r\n"]:
        add(b"host " + h[:20], b"GET / HTTP/1.1\r\n" + h + b"\r\n")
    add(b"1.0 no host", b"GET / HTTP/1.0\r\n\r\n")
    add(b"absolute vs host", b"GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n")
    # fields
    for f in [b"X: a\r\n b\r\n", b"X:\ta\r\n", b"X\t: a\r\n", b"NoColon\r\n", b": empty\r\n", b"X: a\x00b\r\n",
              b"X: a\x7fb\r\n", b"X: \xffa\r\n", b"X y: a\r\n", b"X(y): a\r\n", b"X: " + b"a" * 70000 + b"\r\n",
              b"".join(b"X%d: a\r\n" % i for i in range(150)), b"X:a\r\n", b"X: a \r\n", b"X: a\rb\r\n",
              b"Proxy-Connection: keep-alive\r\n", b"Keep-Alive: 5\r\n", b"TE: trailers\r\n",
              b"Connection: X-Foo\r\nX-Foo: 1\r\n", b"Connection: Host\r\n", b"Forwarded: for=1\r\n",
              b"X-Forwarded-For: 1.2.3.4\r\n", b"X-Forwarded-Host: evil\r\n", b"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AA\r\n",
              b"Upgrade: websocket\r\nConnection: Upgrade\r\n", b"Expect: 100-continue\r\n", b"Expect: foo\r\n",
              b"Trailer: X\r\n", b"Content-Type: text/plain\r\n", b"Cookie: a=b\r\nCookie: c=d\r\n",
              b"Connection: close\r\n", b"Connection: keep-alive\r\n", b"Via: 1.1 x\r\n", b"Max-Forwards: 0\r\n"]:
        add(b"field " + f[:24], b"GET / HTTP/1.1\r\n" + H + f + b"\r\n")
    # framing
    P = b"POST / HTTP/1.1\r\n" + H
    for name, fr in [
        (b"CL 5", b"Content-Length: 5\r\n\r\nhello"),
        (b"CL 0", b"Content-Length: 0\r\n\r\n"),
        (b"CL+TE", b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE+CL", b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"CL twice same", b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
        (b"CL list same", b"Content-Length: 5, 5\r\n\r\nhello"),
        (b"CL twice diff", b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        (b"CL +5", b"Content-Length: +5\r\n\r\nhello"),
        (b"CL 05", b"Content-Length: 05\r\n\r\nhello"),
        (b"CL -1", b"Content-Length: -1\r\n\r\n"),
        (b"CL 0x5", b"Content-Length: 0x5\r\n\r\nhello"),
        (b"CL 5 space", b"Content-Length: 5 \r\n\r\nhello"),
        (b"CL 5a", b"Content-Length: 5a\r\n\r\nhello"),
        (b"CL huge", b"Content-Length: 99999999999999999999\r\n\r\n"),
        (b"CL empty", b"Content-Length:\r\n\r\n"),
        (b"CL short", b"Content-Length: 10\r\n\r\nhello"),
        (b"CL long", b"Content-Length: 3\r\n\r\nhello"),
        (b"TE chunked", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE Chunked", b"Transfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE twice", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE chunked,chunked", b"Transfer-Encoding: chunked, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE identity", b"Transfer-Encoding: identity\r\n\r\n"),
        (b"TE gzip,chunked", b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE chunked,gzip", b"Transfer-Encoding: chunked, gzip\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE xchunked", b"Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE chunked sp", b"Transfer-Encoding: chunked \r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE tab chunked", b"Transfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        (b"TE empty", b"Transfer-Encoding:\r\n\r\n"),
        (b"chunk ext", b"Transfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\n\r\n"),
        (b"chunk ext quoted", b"Transfer-Encoding: chunked\r\n\r\n5;a=\"b;c\"\r\nhello\r\n0\r\n\r\n"),
        (b"chunk upper hex", b"Transfer-Encoding: chunked\r\n\r\nA\r\nhellohello\r\n0\r\n\r\n"),
        (b"chunk 0x", b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n"),
        (b"chunk overflow", b"Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF1\r\nhello\r\n0\r\n\r\n"),
        (b"chunk no crlf", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloX0\r\n\r\n"),
        (b"chunk bare LF", b"Transfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n"),
        (b"chunk sp size", b"Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n"),
        (b"chunk -5", b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n"),
        (b"chunk trailer", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"),
        (b"chunk trailer CL", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nContent-Length: 9\r\n\r\n"),
        (b"chunk too short", b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel\r\n0\r\n\r\n"),
        (b"chunk 000", b"Transfer-Encoding: chunked\r\n\r\n000\r\n\r\n"),
        (b"chunk leading 0s", b"Transfer-Encoding: chunked\r\n\r\n0005\r\nhello\r\n0\r\n\r\n"),
    ]:
        add(b"framing " + name, P + fr)
    add(b"1.0 TE chunked", b"POST / HTTP/1.0\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    add(b"GET with body", b"GET / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhello")
    add(b"HEAD with body", b"HEAD / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n\r\nhello")
    add(b"POST no length", b"POST / HTTP/1.1\r\n" + H + b"\r\n")
    add(b"pipelined 2", b"GET /1 HTTP/1.1\r\n" + H + b"\r\nGET /2 HTTP/1.1\r\n" + H + b"\r\n")
    add(b"pipelined + garbage", b"GET /1 HTTP/1.1\r\n" + H + b"\r\nxyz\r\n\r\n")
    add(b"smuggle CL.TE", P + b"Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED")
    add(b"smuggle TE.CL", P + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n")
    add(b"smuggle TE obs", P + b"Transfer-Encoding: chunked\r\nTransfer-encoding: x\r\n\r\n0\r\n\r\n")
    add(b"close then more", b"GET /1 HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\nGET /2 HTTP/1.1\r\n" + H + b"\r\n")
    add(b"empty", b"")
    add(b"only CRLF", b"\r\n")
    add(b"binary", bytes(range(256)))
    add(b"TLS hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40)
    add(b"PRI h2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    add(b"long line", b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n" + H + b"\r\n")
    add(b"header no end", b"GET / HTTP/1.1\r\n" + H)
    return out

def exchange(port, raw):
    s = socket.create_connection(("127.0.0.1", port))
    try:
        if raw:
            s.sendall(raw)
        s.settimeout(QUIET)
        got = b""
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                return got, "open"
            except ConnectionResetError:
                return got, "reset"
            if not d:
                return got, "closed"
            got += d
    finally:
        s.close()

DROP = {b"x-forwarded-for", b"x-real-ip", b"x-forwarded-proto", b"connection", b"via"}

def normal(raw):
    """A captured request: its line, its fields but the ones the proxies write, its body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    fields = sorted((k.strip().lower(), v.strip()) for k, _, v in (l.partition(b":") for l in lines[1:])
                    if k.strip().lower() not in DROP)
    return (lines[0], tuple(fields), body)

def statuses(resp):
    return re.findall(rb"(?:^|\r\n\r\n|ok)HTTP/1\.[01] (\d{3})", resp)

def run(port, raw):
    with lock:
        captured.clear()
    resp, end = exchange(port, raw)
    time.sleep(0.05)
    with lock:
        got = [normal(r) for r in captured]
    return [s.decode() for s in statuses(resp)], end, got

def main():
    wait_port(NPORT); wait_port(PPORT)
    n = differ = 0
    for name, raw in cases():
        n += 1
        a, b = run(NPORT, raw), run(PPORT, raw)
        same_status = a[0] == b[0]
        same_origin = a[2] == b[2]
        if same_status and same_origin:
            continue
        differ += 1
        print(f"--- {name.decode('latin-1')!r}: {raw[:90]!r}")
        print(f"    nginx: status {a[0]} ({a[1]}), origin got {len(a[2])} request(s)")
        print(f"    ours:  status {b[0]} ({b[1]}), origin got {len(b[2])} request(s)")
        if not same_origin:
            for who, got in (("nginx", a[2]), ("ours", b[2])):
                for r in got:
                    print(f"      {who}: {r[0][:80]!r} {[f for f in r[1] if f[0] != b'host'][:6]} body {r[2][:40]!r}")
                    hosts = [f[1] for f in r[1] if f[0] == b"host"]
                    print(f"      {who}: host {hosts}")
    print(f"{n} requests, {differ} differ")

try:
    main()
finally:
    for p in procs:
        p.terminate()
