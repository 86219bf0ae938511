use std::time::Duration;
#[test]
fn closed_port_refuses_and_can_be_revived() {
    let p = tests::ClosedPort::new();
    let e = std::net::TcpStream::connect(p.addr()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    let o = shared::origin::Origin::start_on(Default::default(), p.addr(), 1).unwrap();
    let mut c = tests::raw::Client::connect(p.addr());
    c.send(&tests::raw::get("/")).unwrap();
    assert_eq!(c.response(Duration::from_secs(5)).unwrap().status, 200);
    drop(c);
    o.stop();
    let e = std::net::TcpStream::connect(p.addr()).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
}
