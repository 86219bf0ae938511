//! Steering a listener group's connections to workers: by client address (for exact per
//! client limits), or by the CPU that handled the connection's SYN ([`steer_by_cpu`], for
//! locality). By client address: a classic BPF program on the
//! SO_REUSEPORT group (SO_ATTACH_REUSEPORT_CBPF) picks the socket from a hash of the TCP
//! source address instead of the kernel's hash of the whole 4-tuple, so every connection of
//! one client address lands on one socket, hence on one worker. Per client limits counted by
//! that worker alone are then exact, with nothing shared between workers.
//!
//! - The program reads the IPv4 source address (or the low 32 bits of the IPv6 one) through
//!   `SKF_NET_OFF`, mixes it (a multiplicative hash: neighbouring addresses spread) and
//!   returns `hash % n`: an index into the group's sockets, which the kernel keeps in the
//!   order they started listening. `reuseport_group` opens them in worker order; sockets
//!   taken over keep their order and new ones are appended (`proxy`'s `listener_group`).
//!   An index beyond the group makes the kernel fall back to its own hash.
//! - The program belongs to the group, not to a socket: attaching it through any one socket
//!   replaces the group's program, for every process holding the group (a takeover's new
//!   process attaches its own, or detaches it with [`unsteer`]).
//! - Across a takeover the sockets are the same kernel objects (passed, not re-bound): they
//!   keep their places in the group, and a new process with more workers appends its extra
//!   sockets. The kernel reorders the group only when a socket of it is closed for good (the
//!   last one moves into the gap), which a takeover does only to an address the new config
//!   dropped, whose whole group goes. With fewer workers than sockets, worker `i` takes
//!   sockets `i, i + n, ...` and the program names only the first `n`: still one worker per
//!   client address.
//! - By CPU (`[runtime] steer = "cpu"`): socket `i` belongs to the worker pinned to CPU
//!   `cpus[i]`, and a connection goes to the worker on the CPU where the kernel processed its
//!   SYN: with a network card spreading flows over the cores (RSS, or RPS), or local clients
//!   on several cores, each connection's packets and its worker share a core and waking the
//!   worker needs no interrupt to another core. Its trade-off: connections arriving on one
//!   core (one receive queue, one local client thread) all land on one worker.
//! - The trade-off of steering by address: many clients behind one address (a NAT, a corporate proxy) all land on
//!   one worker, which may then carry more than its share of the load.

use std::io;
use std::os::fd::AsRawFd;

// Classic BPF opcodes (linux/bpf_common.h): class | size or operation | source.
/// BPF_LD (0x00) | BPF_W (0x00) | BPF_ABS (0x20).
const BPF_LD_W_ABS: u16 = 0x20;
/// BPF_ALU (0x04) | BPF_MUL (0x20) | BPF_K (0x00).
const BPF_ALU_MUL_K: u16 = 0x24;
/// BPF_ALU | BPF_RSH (0x70) | BPF_K.
const BPF_ALU_RSH_K: u16 = 0x74;
/// BPF_ALU | BPF_MOD (0x90) | BPF_K.
const BPF_ALU_MOD_K: u16 = 0x94;
/// BPF_RET (0x06) | BPF_A (0x10).
const BPF_RET_A: u16 = 0x16;
/// BPF_RET | BPF_K (0x00).
const BPF_RET_K: u16 = 0x06;
/// BPF_JMP (0x05) | BPF_JEQ (0x10) | BPF_K.
const BPF_JMP_JEQ_K: u16 = 0x15;
/// Loads at `SKF_AD_OFF + k` read ancillary data (linux/filter.h) ...
const SKF_AD_OFF: i32 = -0x1000;
/// ... here the number of the CPU running the program.
const SKF_AD_CPU: i32 = 36;
/// Loads at `SKF_NET_OFF + k` read the network (IP) header.
const SKF_NET_OFF: i32 = -0x100000;
/// `SO_DETACH_REUSEPORT_BPF` (Linux 5.8).
const SO_DETACH_REUSEPORT_BPF: libc::c_int = 68;
/// Knuth's multiplicative constant (2^32 / phi).
const MIX: u32 = 0x9E37_79B1;

/// The socket index `steer_by_source`'s program picks for a source address's low 32 bits
/// (the IPv4 address; the last 4 bytes of an IPv6 one) in a group of `n`.
pub fn index_of(low32: u32, n: u32) -> u32 {
    (low32.wrapping_mul(MIX) >> 16) % n.max(1)
}

/// Attach the steering program to `l`'s SO_REUSEPORT group of `n` sockets (one per worker,
/// listening). `ipv6`: the group listens on IPv6 (only: `reuseport_listener` sets V6ONLY).
pub fn steer_by_source(l: &std::net::TcpListener, n: u32, ipv6: bool) -> io::Result<()> {
    let src = if ipv6 { 8 + 12 } else { 12 };
    let mut prog = [
        stmt(BPF_LD_W_ABS, (SKF_NET_OFF + src) as u32),
        stmt(BPF_ALU_MUL_K, MIX),
        stmt(BPF_ALU_RSH_K, 16),
        stmt(BPF_ALU_MOD_K, n.max(1)),
        stmt(BPF_RET_A, 0),
    ];
    attach(l, &mut prog)
}

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    jump(code, k, 0, 0)
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Attach `prog` as the group's program (SO_ATTACH_REUSEPORT_CBPF).
fn attach(l: &std::net::TcpListener, prog: &mut [libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: a valid fd; the program outlives the call (the kernel copies it).
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            &fprog as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The most CPUs [`steer_by_cpu`] names: its program takes two instructions per CPU, and the
/// kernel takes at most 4,096 (`BPF_MAXINSNS`).
pub const MAX_CPUS: usize = 2047;

/// Attach a program to `l`'s SO_REUSEPORT group that picks socket `i` for a connection whose
/// SYN the kernel handled on CPU `cpus[i]` (`SKF_AD_CPU`), so the connection is served by the
/// worker pinned to that CPU: its packets, the wake-up of the worker and the worker's work on
/// it stay on one core. Any other CPU gets an index beyond the group: the kernel's hash. The
/// CPUs must be distinct (a CPU listed twice only ever picks its first socket). Where socket
/// `i` is CPU `i`'s (the usual CPU set, 0 to n - 1) the program returns the CPU's number as it
/// is; otherwise it compares the CPU with each in turn.
pub fn steer_by_cpu(l: &std::net::TcpListener, cpus: &[u32]) -> io::Result<()> {
    if cpus.is_empty() || cpus.len() > MAX_CPUS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} CPUs to steer to (1 to {MAX_CPUS})", cpus.len()),
        ));
    }
    let mut prog = Vec::with_capacity(2 * cpus.len() + 2);
    prog.push(stmt(BPF_LD_W_ABS, (SKF_AD_OFF + SKF_AD_CPU) as u32));
    if cpus.iter().enumerate().all(|(i, &c)| c as usize == i) {
        prog.push(stmt(BPF_RET_A, 0));
        return attach(l, &mut prog);
    }
    for (i, &cpu) in cpus.iter().enumerate() {
        // Equal: the next instruction (return i); otherwise skip it.
        prog.push(jump(BPF_JMP_JEQ_K, cpu, 0, 1));
        prog.push(stmt(BPF_RET_K, i as u32));
    }
    prog.push(stmt(BPF_RET_K, u32::MAX));
    attach(l, &mut prog)
}

/// Remove a steering program from `l`'s group (one a process before a takeover attached);
/// none attached is fine.
pub fn unsteer(l: &std::net::TcpListener) -> io::Result<()> {
    let zero: libc::c_int = 0;
    // SAFETY: a valid fd and a c_int option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_DETACH_REUSEPORT_BPF,
            &zero as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        _ if r == 0 => Ok(()),
        // Nothing attached.
        Some(libc::ENOENT) => Ok(()),
        _ => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr, TcpStream};

    /// Connect to `to` from `from` (port chosen by the kernel).
    fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::new(from.into(), 0).into()).unwrap();
        s.connect(&to.into()).unwrap();
        s.into()
    }

    /// Which of `group` has a connection waiting (each is non-blocking).
    fn accepted_on(group: &[std::net::TcpListener]) -> usize {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            for (i, l) in group.iter().enumerate() {
                if l.accept().is_ok() {
                    return i;
                }
            }
            assert!(std::time::Instant::now() < until, "no connection arrived");
            std::thread::yield_now();
        }
    }

    #[test]
    fn one_source_address_always_reaches_the_socket_its_hash_names() {
        for n in [2u32, 3] {
            let group = crate::net::reuseport_group("127.0.0.1:0".parse().unwrap(), n as usize, 64)
                .unwrap();
            let addr = group[0].local_addr().unwrap();
            steer_by_source(&group[1], n, false).unwrap();
            let mut seen = vec![false; n as usize];
            for last in 1..=12u8 {
                let src = Ipv4Addr::new(127, 0, 0, last);
                let want = index_of(u32::from(src), n) as usize;
                seen[want] = true;
                for _ in 0..4 {
                    let _c = connect_from(src, addr);
                    assert_eq!(accepted_on(&group), want, "{src}, group of {n}");
                }
            }
            assert!(
                seen.iter().all(|&s| s),
                "12 addresses reach every socket: {seen:?}"
            );
            // Detached: the kernel's own hash of the 4-tuple again, which spreads one
            // address's connections (all 40 on one socket by chance: 2^-39 at most). And
            // detaching twice is fine.
            unsteer(&group[0]).unwrap();
            let mut hit = vec![0; n as usize];
            for _ in 0..40 {
                let _c = connect_from(Ipv4Addr::LOCALHOST, addr);
                hit[accepted_on(&group)] += 1;
            }
            assert!(hit.iter().filter(|&&h| h > 0).count() > 1, "{hit:?}");
            unsteer(&group[0]).unwrap();
        }
    }

    /// The CPUs this process may run on.
    fn allowed_cpus() -> Vec<usize> {
        core_affinity::get_core_ids()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.id)
            .collect()
    }

    /// Connections made from a thread on `cpu` reach socket `want` of `group`. (Over loopback
    /// the SYN is processed on the connecting thread's CPU.)
    fn lands_on(group: &[std::net::TcpListener], cpu: usize, want: usize) {
        let addr = group[0].local_addr().unwrap();
        for _ in 0..8 {
            let c = std::thread::spawn(move || {
                assert!(crate::pinning::pin_this_thread(cpu), "pin to CPU {cpu}");
                TcpStream::connect(addr).unwrap()
            })
            .join()
            .unwrap();
            assert_eq!(accepted_on(group), want, "connected from CPU {cpu}");
            drop(c);
        }
    }

    #[test]
    fn a_connection_reaches_the_socket_of_the_cpu_that_handled_its_syn() {
        let cpus = allowed_cpus();
        assert!(
            cpus.len() >= 2,
            "steering by CPU needs 2 CPUs in the CPU set to be tested, found {cpus:?}"
        );
        let cpus = &cpus[..2];
        // Socket 0 for the second CPU, socket 1 for the first: not the identity by chance.
        let group = crate::net::reuseport_group("127.0.0.1:0".parse().unwrap(), 2, 64).unwrap();
        let addr = group[0].local_addr().unwrap();
        steer_by_cpu(&group[0], &[cpus[1] as u32, cpus[0] as u32]).unwrap();
        for (want, &cpu) in [1usize, 0].iter().zip(cpus) {
            lands_on(&group, cpu, *want);
        }
        // Socket i for CPU i (the short program): a group as large as the highest CPU.
        let n = cpus[0].max(cpus[1]) + 1;
        assert!(
            n <= 64,
            "CPUs {cpus:?}: a group of {n} is too large for this test"
        );
        let big = crate::net::reuseport_group("127.0.0.1:0".parse().unwrap(), n, 64).unwrap();
        let all: Vec<u32> = (0..n as u32).collect();
        steer_by_cpu(&big[0], &all).unwrap();
        for &cpu in cpus {
            lands_on(&big, cpu, cpu);
        }
        // A CPU the program does not name: the kernel's hash, which spreads.
        steer_by_cpu(&group[0], &[u32::MAX]).unwrap();
        let mut hit = [0; 2];
        for _ in 0..40 {
            let _c = TcpStream::connect(addr).unwrap();
            hit[accepted_on(&group)] += 1;
        }
        assert!(hit.iter().all(|&h| h > 0), "{hit:?}");
        assert!(steer_by_cpu(&group[0], &[]).is_err());
        assert!(steer_by_cpu(&group[0], &vec![0; MAX_CPUS + 1]).is_err());
    }

    #[test]
    fn ipv6_sources_are_steered_by_their_low_32_bits() {
        let Ok(group) = crate::net::reuseport_group("[::1]:0".parse().unwrap(), 3, 64) else {
            return; // no IPv6 loopback here
        };
        let addr = group[0].local_addr().unwrap();
        steer_by_source(&group[0], 3, true).unwrap();
        let want = index_of(1, 3) as usize;
        for _ in 0..6 {
            let _c = TcpStream::connect(addr).unwrap();
            assert_eq!(accepted_on(&group), want);
        }
    }
}
