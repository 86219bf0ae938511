//! A bounded table of client addresses: at most `cap` entries, the least recently used one
//! forgotten to make room (an LRU over an index-linked list in one vector). Once an address
//! is in it, finding it and moving it to the front allocate nothing; the vector and the map
//! grow only while the table fills, up to `cap`.

use std::collections::HashMap;

/// A client address as the tables key it: IPv4 as its IPv4-mapped IPv6 form. Bytes, not a
/// `u128`: a connection's guard keeps one, and bytes need no 16-byte alignment there.
pub type AddrKey = [u8; 16];

/// `ip` as a table key (one form per client: `::ffff:a.b.c.d` and `a.b.c.d` are one).
pub fn key_of(ip: std::net::IpAddr) -> AddrKey {
    match ip {
        std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        std::net::IpAddr::V6(a) => a.octets(),
    }
}

const NIL: u32 = u32::MAX;

struct Node<V> {
    key: AddrKey,
    value: V,
    prev: u32,
    next: u32,
}

/// At most `cap` addresses with a value each, most recently used first.
pub struct AddrTable<V> {
    /// SipHash with a per-process key: the addresses are the clients' to choose.
    map: HashMap<AddrKey, u32>,
    nodes: Vec<Node<V>>,
    head: u32,
    tail: u32,
    cap: usize,
}

impl<V: Copy> AddrTable<V> {
    /// `cap` at least 1. Nothing is allocated until addresses come.
    pub fn new(cap: usize) -> Self {
        AddrTable {
            map: HashMap::new(),
            nodes: Vec::new(),
            head: NIL,
            tail: NIL,
            cap: cap.clamp(1, NIL as usize - 1),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The value of `key`, now the most recently used; a new entry with `fresh` (the least
    /// recently used one forgotten if the table is full).
    pub fn entry(&mut self, key: AddrKey, fresh: V) -> &mut V {
        let i = match self.map.get(&key) {
            Some(&i) => {
                self.unlink(i);
                i
            }
            None => self.insert(key, fresh),
        };
        self.push_front(i);
        &mut self.nodes[i as usize].value
    }

    /// A slot for `key`, unlinked: a new node while the table grows, else the least recently
    /// used one, re-keyed.
    fn insert(&mut self, key: AddrKey, value: V) -> u32 {
        if self.nodes.len() < self.cap {
            let i = self.nodes.len() as u32;
            self.nodes.push(Node {
                key,
                value,
                prev: NIL,
                next: NIL,
            });
            self.map.insert(key, i);
            return i;
        }
        let i = self.tail;
        self.unlink(i);
        let n = &mut self.nodes[i as usize];
        self.map.remove(&n.key);
        n.key = key;
        n.value = value;
        self.map.insert(key, i);
        i
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let n = &mut self.nodes[i as usize];
            n.prev = NIL;
            n.next = old;
        }
        match old {
            NIL => self.tail = i,
            o => self.nodes[o as usize].prev = i,
        }
        self.head = i;
    }

    #[cfg(test)]
    fn get(&self, key: AddrKey) -> Option<V> {
        self.map.get(&key).map(|&i| self.nodes[i as usize].value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_never_exceeds_its_size_and_forgets_the_least_recent() {
        let mut t: AddrTable<u32> = AddrTable::new(3);
        let k = |n: u128| n.to_be_bytes();
        for n in 0..3u128 {
            *t.entry(k(n), 0) = n as u32 + 10;
        }
        // 0 used again: 1 is now the least recent.
        assert_eq!(*t.entry(k(0), 99), 10);
        *t.entry(k(3), 0) = 13;
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t.get(k(1)), t.get(k(0)), t.get(k(2)), t.get(k(3))),
            (None, Some(10), Some(12), Some(13))
        );
        // Many more addresses: never more than 3, the last three kept.
        for n in 100..10_000u128 {
            t.entry(k(n), n as u32);
            assert!(t.len() <= 3 && t.map.len() <= 3);
        }
        assert_eq!(
            [t.get(k(9_997)), t.get(k(9_998)), t.get(k(9_999))],
            [Some(9_997), Some(9_998), Some(9_999)]
        );
        assert_eq!(t.get(k(0)), None);
    }

    #[test]
    fn one_entry_tables_and_keys_of_both_families() {
        let mut t: AddrTable<u8> = AddrTable::new(1);
        let (one, two) = ([1; 16], [2; 16]);
        *t.entry(one, 0) = 5;
        assert_eq!(*t.entry(one, 0), 5);
        assert_eq!(*t.entry(two, 7), 7);
        assert_eq!((t.len(), t.get(one)), (1, None));
        let v4 = key_of("10.1.2.3".parse().unwrap());
        assert_eq!(v4, key_of("::ffff:10.1.2.3".parse().unwrap()));
        assert_ne!(v4, key_of("::a01:203".parse().unwrap()));
    }
}
