//! A `return` route allocates nothing per request in steady state: templates are parsed at
//! start and rendered into the connection's reused buffer.
//!
//! A counting global allocator (this test binary only, one test so nothing else runs beside
//! it) counts allocations of the whole process while one keep-alive client, which itself
//! allocates nothing per request, sends N and then 10×N requests. The difference must stay
//! near zero, not grow with the 9×N extra requests.

use std::io::{Read, Write};
use std::net::TcpStream;

#[global_allocator]
static GLOBAL: tests::CountingAlloc = tests::CountingAlloc::new();

const REQUEST: &[u8] = b"GET /avatar/x?u=1 HTTP/1.1\r\nHost: Img.Example.com\r\n\r\n";
const END: &[u8] = b"</html>\r\n";

/// Send `n` requests one after the other and read each whole response (it ends with the
/// tiny page's last line), checking each starts as a 302 with a Location in range.
fn requests(s: &mut TcpStream, buf: &mut [u8; 4096], n: usize) {
    for i in 0..n {
        s.write_all(REQUEST).expect("request sent");
        let mut len = 0;
        while !buf[..len].ends_with(END) {
            let got = s.read(&mut buf[len..]).expect("response read");
            assert!(got > 0, "request {i}: closed after {len} bytes");
            len += got;
        }
        let resp = &buf[..len];
        assert!(resp.starts_with(b"HTTP/1.1 302 Found\r\n"), "request {i}");
        let loc = b"Location: http://img.example.com/";
        let at = resp
            .windows(loc.len())
            .position(|w| w == loc)
            .expect("a Location");
        let digits = resp[at + loc.len()..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        assert!((1..=21).contains(&digits), "request {i}: {digits}");
    }
}

#[test]
fn return_allocates_nothing_per_request() {
    // Then again with an access rule and both rate limits on the route: once the client's
    // address is in the tables, checking it allocates nothing either.
    for guards in [
        "",
        "allow = [\"127.0.0.0/8\"]\nlimit = { rate = \"1/s\", burst = 1000000 }\n\
         [client_limits]\nrate = \"1/s\"\nburst = 1000000\nconnections = 4\n",
    ] {
        let text = format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[runtime]\nworkers = 1\npin = false\n\
             [[route]]\npath = \"/avatar/\"\n\
             return = {{ status = 302, location = \"http://img.example.com/{{random:1-21}}.png?{{query}}&h={{host}}\" }}\n{guards}"
        );
        let cfg = proxy::config::from_toml("alloc.toml", &text).expect("config");
        let p = proxy::start(cfg).expect("proxy starts");
        let mut s = TcpStream::connect(p.listen_addrs()[0]).expect("connect");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4096];
        // Warm up: buffers, pools and timers reach their steady size.
        requests(&mut s, &mut buf, 500);
        GLOBAL.assert_flat(1_000, 200, |k| requests(&mut s, &mut buf, k as usize));
        drop(s);
        p.shutdown().unwrap();
    }
}
