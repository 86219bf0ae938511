//! An entry's fill: begun on a miss (later lookups wait for it), its head (waiters of its
//! variant may stream), its body appended, finished (it replaces the older entry of its
//! variant) or abandoned.

use super::super::memfd::{FileRange, FILE_BODY_MIN};
use super::super::policy::Storable;
use super::filled::Filled;
use super::{
    served_len, Append, Entry, Handle, Key, Meta, OwnedKey, Slot, State, Store, ENTRY_OVERHEAD, NIL,
};
use bytes::Bytes;

impl Store {
    /// Start filling `key` (after a `Miss` or `Stale`): later lookups wait for it. `None`:
    /// no room even for an empty entry; forward without storing.
    pub fn begin_fill(&mut self, key: Key<'_>) -> Option<Handle> {
        let size = ENTRY_OVERHEAD + (key.host.len() + key.target.len()) as u64;
        if !self.make_room(size, NIL) {
            return None;
        }
        let hash = self.hash(key);
        self.cap_variants(hash, key);
        let chain = self.index.get(&hash).copied().unwrap_or(NIL);
        let entry = Entry {
            hash,
            key: OwnedKey::new(key),
            chain,
            prev: NIL,
            next: NIL,
            used: 0,
            size,
            state: State::AwaitingHead,
            change_waiters: Vec::new(),
            data_waiters: Vec::new(),
            readers: 0,
            detached: false,
        };
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.slots[i as usize].entry = Some(entry);
        self.index.insert(hash, i);
        self.link_front(i);
        self.bytes += size;
        self.entries += 1;
        Some(self.handle(i))
    }

    /// Make room for one more entry of `key` under `max_variants`: its least recently used
    /// entry goes (its waiters, if it was a fill, look up again). Without the bound a
    /// response that varies on a field clients choose freely (`Vary: User-Agent`) would put
    /// every client's variant on one chain, which every lookup of the key walks.
    pub(super) fn cap_variants(&mut self, hash: u64, key: Key<'_>) {
        let (mut count, mut oldest) = (0, NIL);
        let mut i = self.index.get(&hash).copied().unwrap_or(NIL);
        while i != NIL {
            let e = self.at(i);
            if e.is(hash, key) {
                count += 1;
                if oldest == NIL || e.used < self.at(oldest).used {
                    oldest = i;
                }
            }
            i = e.chain;
        }
        if count >= self.max_variants {
            self.stats.variants_evicted += 1;
            self.remove(oldest);
        }
    }

    /// The fill's response head arrived and is storable: waiters of its variant may stream.
    /// `declared` is its Content-Length, if the framing gives one. `false`: the fill is gone
    /// (invalidated or evicted meanwhile, or no room for the head).
    pub fn fill_head(
        &mut self,
        h: Handle,
        status: u16,
        head: Bytes,
        storable: Storable,
        declared: Option<u64>,
    ) -> bool {
        let Some(e) = self.entry(h) else { return false };
        if !matches!(e.state, State::AwaitingHead) {
            return false;
        }
        if declared.is_some_and(|n| n > self.max_object) {
            self.stats.dropped_too_large += 1;
            self.remove(h.slot);
            return false;
        }
        let add = (head.len() + storable.vary.size()) as u64;
        if !self.make_room(add, h.slot) {
            self.stats.dropped_no_room += 1;
            self.remove(h.slot);
            return false;
        }
        self.bytes += add;
        drop(head.clone()); // promoted once, as the body is in `finish`
        let e = self.at_mut(h.slot);
        e.size += add;
        e.state = State::Filling {
            meta: Meta {
                status,
                served: served_len(&head),
                head,
                storable,
                declared,
                held: None,
                interim: Bytes::new(),
            },
            filled: Filled::default(),
        };
        e.wake(false);
        true
    }

    /// The 103 Early Hints heads `interim` came before the filling entry `h`'s response: a
    /// hit sends them again. Counted in the entry's size. `false`: the fill is gone (or no
    /// room for them).
    pub fn set_interim(&mut self, h: Handle, interim: Bytes) -> bool {
        let Some(State::Filling { .. }) = self.entry(h).map(|e| &e.state) else {
            return false;
        };
        let add = interim.len() as u64;
        if !self.make_room(add, h.slot) {
            self.stats.dropped_no_room += 1;
            self.remove(h.slot);
            return false;
        }
        drop(interim.clone()); // promoted once, as the head is
        self.bytes += add;
        let e = self.at_mut(h.slot);
        e.size += add;
        if let State::Filling { meta, .. } = &mut e.state {
            meta.interim = interim;
        }
        true
    }

    /// The fill will not be stored (not storable, upstream failed): remove it; waiters look
    /// up again and, finding nothing, make their own requests; requests reading it fail with
    /// it. A complete entry abandoned (no longer storable, superseded) leaves the store as an
    /// evicted one does: its readers finish.
    pub fn abandon(&mut self, h: Handle) {
        match self.entry(h).map(|e| &e.state) {
            Some(State::Complete { .. }) => self.remove(h.slot),
            Some(_) => self.discard(h.slot),
            None => {}
        }
    }

    /// The fill's response is not storable (or a 304 left the entry it validated not fresh):
    /// it is abandoned, and the requests waiting on it go upstream each on its own
    /// ([`Store::passes`]).
    pub fn pass(&mut self, h: Handle) {
        if matches!(self.entry(h).map(|e| &e.state), Some(State::AwaitingHead)) {
            self.passed[self.passed_next] = h;
            self.passed_next = (self.passed_next + 1) % self.passed.len();
        }
        self.abandon(h);
    }

    /// Copy body bytes into a filling entry (one out of the store fills on for its readers,
    /// uncounted).
    pub fn append(&mut self, h: Handle, data: &[u8]) -> Append {
        let Some(e) = self.entry(h) else {
            return Append::Dropped;
        };
        let State::Filling { filled, .. } = &e.state else {
            return Append::Dropped;
        };
        if filled.len() + data.len() as u64 > self.max_object {
            self.stats.dropped_too_large += 1;
            self.discard(h.slot);
            return Append::Dropped;
        }
        if data.is_empty() {
            return Append::Kept;
        }
        if !e.detached && !self.make_room(data.len() as u64, h.slot) {
            self.stats.dropped_no_room += 1;
            self.remove(h.slot);
            if self.entry(h).is_none() {
                return Append::Dropped;
            }
        }
        let e = self.at_mut(h.slot);
        if !e.detached {
            e.size += data.len() as u64;
            self.bytes += data.len() as u64;
        }
        let e = self.at_mut(h.slot);
        if let State::Filling { filled, meta } = &mut e.state {
            filled.push(data, meta.declared);
        }
        e.wake(true);
        Append::Kept
    }

    /// The body is complete: the entry serves hits, and replaces older entries of its key and
    /// variant (one out of the store serves its readers only). `false`: the fill was gone, or
    /// its length differs from the declared one (its readers fail).
    pub fn finish(&mut self, h: Handle) -> bool {
        let Some(e) = self.entry_mut(h) else {
            return false;
        };
        if !matches!(e.state, State::Filling { .. }) {
            return false;
        }
        let State::Filling { filled, mut meta } =
            std::mem::replace(&mut e.state, State::AwaitingHead)
        else {
            unreachable!("checked above");
        };
        if meta.declared.is_some_and(|d| d != filled.len()) {
            self.discard(h.slot);
            return false;
        }
        // Out of the store: complete for its readers only, nothing stored nor replaced.
        if self.at(h.slot).detached {
            let e = self.at_mut(h.slot);
            e.state = State::Complete {
                meta,
                body: filled.to_bytes(),
                file: None,
            };
            e.wake(false);
            return true;
        }
        let (body, file) = self.settle(h.slot, &filled, &mut meta);
        // A `Bytes` made from a Vec allocates its shared header on its first clone: take that
        // clone here, once, so that hits never allocate.
        drop(body.clone());
        let e = self.at_mut(h.slot);
        e.state = State::Complete { meta, body, file };
        e.wake(false);
        self.replace_older(h.slot);
        true
    }

    /// The body a fill of slot `i` stores, and where it lies in the body file if it went
    /// there (bodies of `FILE_BODY_MIN` bytes and more, when there is one: sent with sendfile,
    /// the entry keeps a view of the file's mapping), else in memory.
    fn settle(&mut self, i: u32, filled: &Filled, meta: &mut Meta) -> (Bytes, Option<FileRange>) {
        // A part joins the stored part it touches (RFC 9111 3.4), whole once it is all there.
        let joined = meta
            .held
            .is_some()
            .then(|| self.combine(i, meta, filled.to_bytes()));
        let len = joined.as_ref().map_or(filled.len(), |b| b.len() as u64);
        if let Some(f) = self.file.as_mut().filter(|_| len >= FILE_BODY_MIN as u64) {
            // Straight from the fill's blocks: no copy of the whole body on the way.
            let parts: Vec<&[u8]> = match &joined {
                Some(b) => vec![&b[..]],
                None => filled.parts().collect(),
            };
            if let Some((mapped, range)) = f.put(&parts) {
                return (mapped, Some(range));
            }
        }
        (joined.unwrap_or_else(|| filled.to_bytes()), None)
    }

    /// Remove the complete entries of the same key and variant as `i` (what it replaces).
    pub(super) fn replace_older(&mut self, i: u32) {
        let hash = self.at(i).hash;
        let mut j = self.index.get(&hash).copied().unwrap_or(NIL);
        while j != NIL {
            let next = self.at(j).chain;
            if j != i {
                let (a, b) = (self.at(i), self.at(j));
                let older = a.same_key(b)
                    && match (&a.state, &b.state) {
                        (State::Complete { meta: m1, .. }, State::Complete { meta: m2, .. }) => {
                            m1.storable.vary == m2.storable.vary
                        }
                        _ => false,
                    };
                // A part replaces only another part; a whole response, either.
                if older && (!self.is_held(i) || self.is_held(j)) {
                    self.remove(j);
                }
            }
            j = next;
        }
    }
}
