use super::*;
use crate::config::health::HealthCheck;
use crate::config::{Balance, Server};

fn group(name: &str, servers: &[&str], checked: bool) -> UpstreamGroup {
    UpstreamGroup {
        name: name.into(),
        servers: servers
            .iter()
            .enumerate()
            .map(|(i, n)| Server {
                name: n.to_string(),
                host: n.to_string(),
                addrs: vec![([127, 0, 0, 1], 9000 + i as u16).into()],
                weight: 1,
                max_fails: 1,
                fail_timeout: Duration::from_secs(10),
                max_conns: 0,
            })
            .collect(),
        balance: Balance::RoundRobin,
        hash_key: Default::default(),
        resolve: None,
        keepalive: 0,
        keepalive_timeout: Duration::from_secs(30),
        keepalive_requests: 100,
        keepalive_check: Duration::from_secs(1),
        health: checked.then(HealthCheck::default),
        tls: None,
        proxy_protocol: None,
    }
}

fn balancers(groups: &Table<GroupId, UpstreamGroup>) -> Table<GroupId, Rc<RefCell<Balancer>>> {
    groups.map(|g| Rc::new(RefCell::new(Balancer::new(g, 0, 1))))
}

fn g(i: usize) -> GroupId {
    GroupId::new(i)
}

fn s(i: usize) -> ServerId {
    ServerId::new(i)
}

#[test]
fn reload_carries_state_of_servers_that_stay() {
    let old_groups = Table::from(vec![
        group("a", &["x:80", "y:80", "z:80"], true),
        group("b", &["p:80"], true),
        group("c", &["q:80"], true),
    ]);
    let old = balancers(&old_groups);
    old[g(0)].borrow_mut().set_health(s(1), Health::Down);
    old[g(0)].borrow_mut().set_health(s(2), Health::Down);
    old[g(1)].borrow_mut().set_health(s(0), Health::Down);
    old[g(2)].borrow_mut().set_health(s(0), Health::Down);
    // Group a: z dropped, y moved to the front, w added. Group b: checks turned off.
    // Group c: gone. Group d: new.
    let new_groups = Table::from(vec![
        group("d", &["q:80"], true),
        group("a", &["y:80", "w:80", "x:80"], true),
        group("b", &["p:80"], false),
    ]);
    let new = balancers(&new_groups);
    carry_between(&old_groups, &old, &new_groups, &new);
    let h = |gi: usize, si: usize| new[g(gi)].borrow().health(s(si));
    assert_eq!(h(0, 0), Health::Up, "a new group starts up");
    assert_eq!(
        (h(1, 0), h(1, 1), h(1, 2)),
        (Health::Down, Health::Up, Health::Up)
    );
    assert_eq!(h(2, 0), Health::Unchecked);
}

#[test]
fn a_balancer_taken_over_is_left_alone() {
    let groups = Table::from(vec![group("a", &["x:80", "y:80"], true)]);
    let kept = balancers(&groups);
    kept[g(0)].borrow_mut().set_health(s(1), Health::Down);
    carry_between(&groups, &kept, &groups, &kept.clone());
    assert_eq!(kept[g(0)].borrow().health(s(1)), Health::Down);
}

#[test]
fn groups_spread_over_workers() {
    assert_eq!(
        (0..5).map(|i| checker_of(g(i), 2)).collect::<Vec<_>>(),
        [0, 1, 0, 1, 0]
    );
    assert_eq!(checker_of(g(3), 1), 0);
    assert_eq!(checker_of(g(3), 0), 0);
}

#[test]
fn checks_keep_their_rhythm_and_skip_what_was_missed() {
    let t0 = Instant::now();
    let i = Duration::from_secs(2);
    assert_eq!(next_due(t0, i, t0 + Duration::from_millis(300)), t0 + i);
    // Fell behind by more than an interval: one interval from now, no burst.
    let late = t0 + Duration::from_secs(5);
    assert_eq!(next_due(t0, i, late), late + i);
}

#[test]
fn first_checks_are_spread_over_the_interval() {
    let i = Duration::from_millis(900);
    let offsets: Vec<Duration> = (0..3).map(|s| first_offset(i, s, 3)).collect();
    assert_eq!(
        offsets,
        [
            Duration::ZERO,
            Duration::from_millis(300),
            Duration::from_millis(600)
        ]
    );
    assert_eq!(first_offset(i, 0, 0), Duration::ZERO);
    assert_eq!(first_offset(i, 5, 1), Duration::ZERO);
}
