//! The loader's keep-alive request path allocates nothing per request in steady state.
//!
//! A counting global allocator (this test binary only, one test so nothing else runs beside
//! it) counts allocations during two runs that differ only in their request count, against a
//! server that itself allocates nothing per request. The difference is what the extra
//! requests cost: it must be (near) zero, not proportional to the 20 000 extra requests.

use loader::RunOptions;
use shared::shutdown::ShutdownFlag;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

#[global_allocator]
static GLOBAL: tests::CountingAlloc = tests::CountingAlloc::new();

/// Keep-alive server: reads a head, writes a fixed response; no allocation per request once
/// its line buffer has grown.
fn server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                let mut line = String::with_capacity(256);
                loop {
                    loop {
                        line.clear();
                        match r.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line == "\r\n" => break,
                            Ok(_) => {}
                        }
                    }
                    let resp = b"HTTP/1.1 200 OK\r\nServer: t\r\nContent-Length: 5\r\n\r\nhello";
                    if w.write_all(resp).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

fn allocations_for(url: &str, n: u64) -> u64 {
    let mut o = RunOptions::for_urls(&[url]).unwrap();
    o.connections = 2;
    o.runtime.workers = 1;
    o.requests = Some(n);
    let before = GLOBAL.count();
    let r = loader::run(&o, ShutdownFlag::new()).unwrap();
    let after = GLOBAL.count();
    assert_eq!(r.totals.completed, n);
    after - before
}

#[test]
fn keep_alive_requests_do_not_allocate() {
    let url = server();
    // Warm up the server's connection threads' buffers, and the process.
    allocations_for(&url, 100);
    let small = allocations_for(&url, 1_000);
    let big = allocations_for(&url, 21_000);
    let extra = big.saturating_sub(small);
    eprintln!("allocations: {small} for 1000 requests, {big} for 21000");
    assert!(
        extra < 200,
        "{extra} more allocations for 20000 more requests ({small} for 1000, {big} for 21000)"
    );
}
