#!/usr/bin/env python3
"""Hold N idle client connections on a proxy and print what each costs it in resident memory.

Used by benches/idle_memory.sh (see there). For one state of the connections:
  fresh      connected, nothing sent
  keepalive  one keep-alive GET answered, then nothing
  tls        HTTPS: handshake done, nothing sent
  tls-keepalive  HTTPS: one keep-alive GET answered, then nothing
the proxy's VmRSS is read (/proc/PID/status) before the crowd connects and once the proxy holds
every connection (its descriptors counted in /proc/PID/fd) and its RSS has settled; the delta
divided by N is printed, with the time a new client's request takes while the crowd is held.
Clients bind source addresses spread over 127.0.0.0/8 (as the loader's --close does), so N is
not bounded by one address's ephemeral ports.
"""

import argparse
import os
import resource
import selectors
import socket
import ssl
import sys
import time

IP_BIND_ADDRESS_NO_PORT = 24


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def settled_rss(pid, secs=5.0):
    """RSS once two reads 200 ms apart agree (or after `secs`)."""
    last, end = rss_kib(pid), time.monotonic() + secs
    while time.monotonic() < end:
        time.sleep(0.2)
        now = rss_kib(pid)
        if now == last:
            return now
        last = now
    return last


def source(i):
    # 127.0.0.1 .. 127.0.0.255, 127.0.1.0 ...: never 127.0.0.0 itself; 250 clients per address.
    host = i // 250 + 1
    return f"127.{(host >> 16) & 255}.{(host >> 8) & 255}.{host & 255}"


def request(path):
    return f"GET {path} HTTP/1.1\r\nHost: idle\r\n\r\n".encode()


def read_response(s):
    """Read one response with a Content-Length body; return its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError(f"closed before the response head: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("closed mid-body")
        body += chunk
    return int(head.split(b" ")[1])


def connect_all(addr, n, tls, timeout=60.0):
    """N connections, connected (and handshaked for TLS), blocking sockets."""
    host, port = addr.rsplit(":", 1)
    ctx = None
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    socks = []
    sel = selectors.DefaultSelector()
    for i in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((source(i), 0))
        s.setblocking(False)
        err = s.connect_ex((host, int(port)))
        if err not in (0, 115):  # EINPROGRESS
            raise RuntimeError(f"connect {i}: {os.strerror(err)}")
        sel.register(s, selectors.EVENT_WRITE)
        socks.append(s)
    pending, end = n, time.monotonic() + timeout
    while pending:
        if time.monotonic() > end:
            raise RuntimeError(f"{pending} connects still pending")
        for key, _ in sel.select(1.0):
            s = key.fileobj
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise RuntimeError(f"connect: {os.strerror(err)}")
            sel.unregister(s)
            pending -= 1
    sel.close()
    for s in socks:
        s.setblocking(True)
        s.settimeout(timeout)
    if ctx:
        socks = [ctx.wrap_socket(s, server_hostname="localhost") for s in socks]
    return socks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True, help="the proxy's process id")
    ap.add_argument("--addr", required=True, help="the proxy's listener, 127.0.0.1:PORT")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--mode", choices=["fresh", "keepalive", "tls", "tls-keepalive"], default="fresh")
    ap.add_argument("--path", default="/64", help="what a keep-alive client asks for")
    ap.add_argument("--warm", type=int, default=200, help="clients connected and closed first")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.n + 100 > hard:
        sys.exit(f"idle_clients: {args.n} clients need an open-files limit above {args.n + 100} (hard limit {hard}): raise it with ulimit -Hn")
    tls = args.mode.startswith("tls")
    keepalive = args.mode.endswith("keepalive")

    def crowd(n):
        socks = connect_all(args.addr, n, tls)
        if keepalive:
            for s in socks:
                s.sendall(request(args.path))
                status = read_response(s)
                if status != 200:
                    raise RuntimeError(f"status {status}")
        return socks

    def held(base_fds, n):
        end = time.monotonic() + 60
        while fds(args.pid) < base_fds + n:
            if time.monotonic() > end:
                raise RuntimeError(f"the proxy holds {fds(args.pid) - base_fds} of {n} connections")
            time.sleep(0.05)

    # Warm-up: the worker's pools and first allocations are not what a client costs.
    warm = crowd(args.warm)
    for s in warm:
        s.close()
    base_fds = fds(args.pid)
    time.sleep(0.5)
    base_fds = fds(args.pid)
    before = settled_rss(args.pid)
    socks = crowd(args.n)
    held(base_fds, args.n)
    after = settled_rss(args.pid)
    per = (after - before) * 1024 / args.n
    # A new client while the crowd is held: answered, and how fast.
    t = time.monotonic()
    probe = connect_all(args.addr, 1, tls)[0]
    probe.sendall(request(args.path))
    status = read_response(probe)
    probe_ms = (time.monotonic() - t) * 1000
    probe.close()
    print(f"{args.mode}: {args.n} idle connections: RSS {before} -> {after} KiB, "
          f"{per:.0f} bytes per connection; a new client meanwhile: {status} in {probe_ms:.1f} ms")
    for s in socks:
        s.close()
    end = time.monotonic() + 30
    while fds(args.pid) > base_fds and time.monotonic() < end:
        time.sleep(0.05)
    # The workers give their pools' unused buffers back on a 1 s tick (and idle upstream
    # connections beyond `keepalive` after a second idle): read once two ticks have passed.
    time.sleep(2.5)
    closed = settled_rss(args.pid)
    print(f"{args.mode}: after they closed: RSS {closed} KiB ({closed - before:+d} KiB from before)")


if __name__ == "__main__":
    main()
