//! At start: steer each listener group's connections to workers by client address when the
//! config counts clients (`super::wants_steering`), and say what the user gets.

use crate::config::Config;

/// Attach the steering program to each group (`groups`: every listener's sockets, in worker
/// order), or take a program a process before a takeover attached off the groups taken over
/// (`inherited`) when this config counts no clients. Sets `cfg.client_steering` when every
/// group is steered, and returns the start-up line about the limits (`None`: no limits).
pub fn steer_listeners(
    cfg: &mut Config,
    groups: &[(&std::net::TcpListener, bool)],
    workers: usize,
) -> Option<String> {
    let wanted = super::wants_steering(cfg);
    let mut failed = None;
    for &(first, inherited) in groups {
        let ipv6 = first.local_addr().is_ok_and(|a| a.is_ipv6());
        let done = if wanted && workers > 1 {
            shared::steer::steer_by_source(first, workers as u32, ipv6)
        } else if inherited {
            shared::steer::unsteer(first)
        } else {
            Ok(())
        };
        if let Err(e) = done {
            failed.get_or_insert(e);
        }
    }
    cfg.client_steering = wanted && failed.is_none();
    if !wanted {
        return failed.map(|e| {
            format!("  client steering: a program from before the takeover stays attached: {e}\n")
        });
    }
    Some(match failed {
        None if workers > 1 => "  client limits: exact (connections steered to workers by client \
             address)\n"
            .to_string(),
        None => "  client limits: exact (one worker)\n".to_string(),
        Some(e) => format!(
            "  client limits: approximate, each of {workers} workers allows 1/{workers} of each \
             limit (steering by client address failed: {e})\n"
        ),
    })
}
