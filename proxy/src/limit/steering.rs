//! At start: steer each listener group's connections to workers, by client address when the
//! config counts clients (`super::wants_steering`: the counts are then exact), else by CPU
//! when `[runtime] steer = "cpu"` asks for it and the workers are pinned one per CPU; and
//! say what the user gets.

use crate::config::{Config, Steer};
use std::io;
use std::net::TcpListener;

/// The program a process keeps on its listener groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Steering {
    /// None: the kernel's hash.
    Kernel,
    /// By client address over this many workers (exact client limits).
    ByAddress(u32),
    /// By the CPU that processed the SYN: socket `i` for `cpus[i]`.
    ByCpu(Vec<u32>),
}

impl Steering {
    /// Put this program on `l`'s group (replacing whatever is attached), or take any off.
    pub fn apply(&self, l: &TcpListener) -> io::Result<()> {
        match self {
            Steering::Kernel => shared::steer::unsteer(l),
            Steering::ByAddress(n) => {
                let ipv6 = l.local_addr().is_ok_and(|a| a.is_ipv6());
                shared::steer::steer_by_source(l, *n, ipv6)
            }
            Steering::ByCpu(cpus) => shared::steer::steer_by_cpu(l, cpus),
        }
    }
}

/// Attach the steering program to each group (`groups`: every listener's sockets, in worker
/// order; `cores`: the core each worker will be pinned to), or take a program a process
/// before a takeover attached off the groups taken over (`inherited`) when this config steers
/// nothing. Sets `cfg.client_steering` when every group is steered by address. Returns the
/// steering in place (what an aborted takeover puts back: `takeover.rs`) and the start-up
/// lines about the limits and the steering (`None`: nothing to say).
pub fn steer_listeners(
    cfg: &mut Config,
    groups: &[(&TcpListener, bool)],
    workers: usize,
    cores: &[Option<usize>],
) -> (Steering, Option<String>) {
    let wanted = super::wants_steering(cfg);
    let by_cpu = (cfg.steer == Steer::Cpu && !wanted).then(|| cpu_plan(workers, cores));
    let plan = match &by_cpu {
        _ if wanted && workers > 1 => Steering::ByAddress(workers as u32),
        Some(Ok(cpus)) => Steering::ByCpu(cpus.clone()),
        _ => Steering::Kernel,
    };
    let mut failed = None;
    for &(first, inherited) in groups {
        // A fresh group has no program to take off.
        if plan == Steering::Kernel && !inherited {
            continue;
        }
        if let Err(e) = plan.apply(first) {
            // Not the program a process before a takeover left there either.
            if inherited && plan != Steering::Kernel {
                let _ = shared::steer::unsteer(first);
            }
            failed.get_or_insert(e);
        }
    }
    cfg.client_steering = wanted && failed.is_none();
    let kept = if failed.is_none() {
        plan.clone()
    } else {
        Steering::Kernel
    };
    (kept, status_line(cfg, workers, &plan, by_cpu, failed))
}

/// What the start-up summary says about the limits and the steering.
fn status_line(
    cfg: &Config,
    workers: usize,
    plan: &Steering,
    by_cpu: Option<Result<Vec<u32>, String>>,
    failed: Option<io::Error>,
) -> Option<String> {
    if !super::wants_steering(cfg) {
        let stays = |e: &io::Error| {
            format!("  client steering: a program from before the takeover stays attached: {e}\n")
        };
        let steer = match (by_cpu, plan, failed) {
            (_, Steering::ByCpu(cpus), None) => Some(format!(
                "  steer: by CPU (a connection goes to the worker on the CPU that handled its \
                 first packet: workers on CPUs {})\n",
                cpus.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            (_, Steering::ByCpu(_), Some(e)) => Some(format!(
                "  steer: the kernel's hash (attaching the CPU program failed: {e})\n"
            )),
            (Some(Err(why)), _, e) => Some(format!(
                "  steer: the kernel's hash ({why})\n{}",
                e.as_ref().map(stays).unwrap_or_default()
            )),
            (_, _, e) => e.as_ref().map(stays),
        };
        return match (shares(cfg, workers), steer) {
            (Some(a), Some(b)) => Some(a + &b),
            (a, b) => a.or(b),
        };
    }
    let cpu_note = if cfg.steer == Steer::Cpu {
        "; steer = \"cpu\" not applied: the limits steer by client address"
    } else {
        ""
    };
    Some(match failed {
        None if workers > 1 => format!(
            "  client limits: exact (connections steered to workers by client address{cpu_note})\n"
        ),
        None => "  client limits: exact (one worker)\n".to_string(),
        Some(e) => format!(
            "  client limits: approximate, each of {workers} workers allows 1/{workers} of each \
             limit (steering by client address failed: {e}{cpu_note})\n"
        ),
    })
}

/// Limits per client behind a balancer: what each worker holds of them, and why.
fn shares(cfg: &Config, workers: usize) -> Option<String> {
    let named_by = super::behind_a_balancer(cfg)?;
    if !super::counts_clients(cfg) {
        return None;
    }
    let mut line = if workers < 2 {
        "  client limits: exact (one worker)\n".to_string()
    } else {
        format!(
            "  client limits: approximate, each of {workers} workers allows 1/{workers} of each \
             rate, burst and connection count (clients are named by {named_by}: steering \
             connections to workers by their peer would send all of a balancer's to one; a \
             client whose requests reach fewer workers, as over one balancer connection, gets \
             less)\n"
        )
    };
    if cfg.client_limits.connections.is_some() && !cfg.headers.real_ip_from.is_empty() {
        line.push_str(
            "  client limits: connections counts the clients that connect themselves (or that \
             a PROXY header names), not a real_ip_from peer's: a balancer's connections carry \
             its clients' requests\n",
        );
    }
    Some(line)
}

/// The CPU each worker's sockets stand for, when steering by CPU can name every worker:
/// more than one worker, each pinned, to distinct CPUs. Otherwise why not.
fn cpu_plan(workers: usize, cores: &[Option<usize>]) -> Result<Vec<u32>, String> {
    if workers < 2 {
        return Err("one worker: nothing to steer".into());
    }
    let cpus: Option<Vec<u32>> = cores.iter().map(|c| c.map(|c| c as u32)).collect();
    let Some(cpus) = cpus else {
        return Err("steer = \"cpu\" needs pinned workers; they are not pinned".into());
    };
    let mut seen = cpus.clone();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != cpus.len() || cpus.len() > shared::steer::MAX_CPUS {
        return Err(format!(
            "steer = \"cpu\" needs one worker per CPU and at most {}: {workers} workers on {} \
             CPUs",
            shared::steer::MAX_CPUS,
            seen.len()
        ));
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::cpu_plan;

    #[test]
    fn steering_by_cpu_names_every_worker_or_says_why_not() {
        assert_eq!(cpu_plan(2, &[Some(2), Some(5)]), Ok(vec![2, 5]));
        for (workers, cores, why) in [
            (1, vec![Some(0)], "one worker"),
            (2, vec![Some(0), None], "needs pinned workers"),
            (3, vec![Some(0), Some(1), Some(0)], "3 workers on 2 CPUs"),
        ] {
            let e = cpu_plan(workers, &cores).unwrap_err();
            assert!(e.contains(why), "{cores:?}: {e}");
        }
    }
}
