//! Eviction, least recently used first, and the LRU list through the slots.

use super::{State, Store, NIL};

impl Store {
    /// Evict complete entries, least recently used first (never `keep`, never fills), until
    /// `need` more bytes fit. `false`: they cannot.
    pub(super) fn make_room(&mut self, need: u64, keep: u32) -> bool {
        if need > self.max_bytes {
            return false;
        }
        let mut i = self.tail;
        while self.bytes + need > self.max_bytes {
            while i != NIL && (i == keep || !matches!(self.at(i).state, State::Complete { .. })) {
                i = self.at(i).prev;
            }
            if i == NIL {
                return false;
            }
            let prev = self.at(i).prev;
            self.remove(i);
            self.stats.evicted += 1;
            i = prev;
        }
        true
    }

    /// Take slot `i` out of the store (invalidated, evicted, replaced, over a key's variants):
    /// freed, unless requests read it; then it stays for them, out of the index, the LRU list
    /// and the byte count, and goes with its last reader (`close_reader`). Its waiters look
    /// up again.
    pub(super) fn remove(&mut self, i: u32) {
        let e = self.at(i);
        if e.readers == 0 {
            return self.discard(i);
        }
        if !e.detached {
            self.unindex(i);
            let e = self.at_mut(i);
            e.detached = true;
            e.wake(false);
        }
    }

    /// Free slot `i` (a fill that failed, or an entry nobody reads): its waiters look up
    /// again, its readers read `Dropped`.
    pub(super) fn discard(&mut self, i: u32) {
        if !self.at(i).detached {
            self.unindex(i);
        }
        let slot = &mut self.slots[i as usize];
        let mut e = slot.entry.take().expect("discarded slot holds an entry");
        slot.gen = slot.gen.wrapping_add(1);
        self.free.push(i);
        e.wake(false);
    }

    /// Unlink slot `i` from its chain and the LRU list, its bytes no longer counted.
    fn unindex(&mut self, i: u32) {
        let (hash, chain) = {
            let e = self.at(i);
            (e.hash, e.chain)
        };
        let first = self.index.get(&hash).copied().unwrap_or(NIL);
        if first == i {
            if chain == NIL {
                self.index.remove(&hash);
            } else {
                self.index.insert(hash, chain);
            }
        } else {
            let mut j = first;
            while j != NIL {
                let next = self.at(j).chain;
                if next == i {
                    self.at_mut(j).chain = chain;
                    break;
                }
                j = next;
            }
        }
        self.unlink(i);
        self.bytes -= self.at(i).size;
        self.entries -= 1;
    }

    pub(super) fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.link_front(i);
        }
    }

    pub(super) fn link_front(&mut self, i: u32) {
        let old = self.head;
        self.uses += 1;
        let used = self.uses;
        {
            let e = self.at_mut(i);
            e.prev = NIL;
            e.next = old;
            e.used = used;
        }
        if old != NIL {
            self.at_mut(old).prev = i;
        } else {
            self.tail = i;
        }
        self.head = i;
    }

    pub(super) fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let e = self.at(i);
            (e.prev, e.next)
        };
        if prev != NIL {
            self.at_mut(prev).next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.at_mut(next).prev = prev;
        } else {
            self.tail = prev;
        }
    }
}
