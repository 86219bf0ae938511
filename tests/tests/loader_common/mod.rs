//! Helpers shared by the loader's test files.

use std::os::fd::{FromRawFd, OwnedFd};

/// A port on 127.0.0.1 that stays refused for as long as the returned socket lives: bound,
/// never listening. (A port freed by dropping a listener may be taken by anyone meanwhile.)
pub fn refused_port() -> (OwnedFd, u16) {
    // SAFETY: plain socket calls on a descriptor this function owns; `addr` and `len` are
    // valid for the sizes passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let fd = OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        let sa = &mut addr as *mut libc::sockaddr_in as *mut libc::sockaddr;
        assert_eq!(
            libc::bind(raw, sa, len),
            0,
            "bind: {}",
            std::io::Error::last_os_error()
        );
        let mut got = len;
        assert_eq!(libc::getsockname(raw, sa, &mut got), 0);
        (fd, u16::from_be(addr.sin_port))
    }
}
