//! One server's run of check results and the rise/fall decision, with no I/O (HAProxy's
//! semantics): while up, `fall` failed checks in a row take it down, and a passed check starts
//! the count over; while down, `rise` passed checks in a row bring it back, and a failed check
//! starts that count over.

use crate::balance::Health;

/// What the checks said so far about one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracker {
    state: Run,
    rise: u32,
    fall: u32,
}

/// The server's state and the run of results that could change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Up { failed: u32 },
    Down { passed: u32 },
}

impl Tracker {
    /// Starting in `start` (a server starts up, or as it was before a reload); `rise` and
    /// `fall` below 1 count as 1.
    pub fn new(start: Health, rise: u32, fall: u32) -> Tracker {
        let state = match start {
            Health::Down => Run::Down { passed: 0 },
            Health::Up | Health::Unchecked => Run::Up { failed: 0 },
        };
        Tracker {
            state,
            rise: rise.max(1),
            fall: fall.max(1),
        }
    }

    pub fn health(&self) -> Health {
        match self.state {
            Run::Up { .. } => Health::Up,
            Run::Down { .. } => Health::Down,
        }
    }

    /// One check's result; the new state when this result changed it.
    pub fn record(&mut self, passed: bool) -> Option<Health> {
        let (next, changed) = match (self.state, passed) {
            (Run::Up { .. }, true) => (Run::Up { failed: 0 }, None),
            (Run::Up { failed }, false) if failed + 1 >= self.fall => {
                (Run::Down { passed: 0 }, Some(Health::Down))
            }
            (Run::Up { failed }, false) => (Run::Up { failed: failed + 1 }, None),
            (Run::Down { passed }, true) if passed + 1 >= self.rise => {
                (Run::Up { failed: 0 }, Some(Health::Up))
            }
            (Run::Down { passed }, true) => (Run::Down { passed: passed + 1 }, None),
            (Run::Down { .. }, false) => (Run::Down { passed: 0 }, None),
        };
        self.state = next;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transitions a run of results makes, as (index of the result, new state).
    fn run(t: &mut Tracker, results: &str) -> Vec<(usize, Health)> {
        results
            .bytes()
            .enumerate()
            .filter_map(|(i, r)| t.record(r == b'+').map(|h| (i, h)))
            .collect()
    }

    #[test]
    fn fall_in_a_row_then_rise_in_a_row() {
        let mut t = Tracker::new(Health::Up, 2, 3);
        // Failures broken by a pass start over; the third in a row takes it down.
        assert_eq!(run(&mut t, "--+--"), []);
        assert_eq!(t.health(), Health::Up);
        assert_eq!(run(&mut t, "-"), [(0, Health::Down)]);
        // Down: more failures change nothing; a pass broken by a failure starts over.
        assert_eq!(run(&mut t, "--+-+"), []);
        assert_eq!(run(&mut t, "+"), [(0, Health::Up)]);
        assert_eq!(run(&mut t, "+++"), []);
        // Exactly once per transition.
        assert_eq!(
            run(&mut t, "---------++++"),
            [(2, Health::Down), (10, Health::Up)]
        );
    }

    #[test]
    fn ones_and_a_down_start() {
        let mut t = Tracker::new(Health::Down, 1, 1);
        assert_eq!(t.health(), Health::Down);
        assert_eq!(
            run(&mut t, "+-+"),
            [(0, Health::Up), (1, Health::Down), (2, Health::Up)]
        );
        let mut t = Tracker::new(Health::Up, 0, 0);
        assert_eq!(run(&mut t, "-+"), [(0, Health::Down), (1, Health::Up)]);
    }
}
