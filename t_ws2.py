import socket,time
P=18080
s=socket.create_connection(('127.0.0.1',P)); s.settimeout(2)
s.sendall(b'GET /a HTTP/1.1\r\nHost: a\r\n\r\n'); print(s.recv(300)[:20])
s.sendall(b'GET /a2 HTTP/1.1\r\nHost: a\r\n\r\n'); print(s.recv(300)[:20])
s.sendall(b'GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nEARLY1')
time.sleep(0.05); s.sendall(b'EARLY2'); time.sleep(0.05); s.sendall(b'x'*100000)
out=b''
try:
    while len(out)<100200:
        d=s.recv(65536)
        if not d: break
        out+=d
except Exception as e: print(e)
print(len(out), out[:120], out.count(b'x'))
