//! One worker's store: entries by key and variant, least recently used first out when the
//! bytes exceed `max_bytes`, filled while they stream.
//!
//! Layout: a slab of slots (an entry's handle is its slot and the slot's generation, so a
//! handle outlives its entry safely), a map from key hash to the first entry of that hash,
//! a chain through entries of one hash (variants and collisions), and an intrusive
//! doubly-linked LRU list through the slots. A hit is a hash, a map probe, a chain walk and
//! two relinks: no allocation (the `Bytes` it hands out are reference-counted views).
//!
//! Collapsing: the first miss for a key inserts an entry `AwaitingHead`; later lookups of the
//! key get [`Lookup::Wait`] and look up again when woken. Once the head is in, requests of the
//! same variant, if the response is fresh (a response that is not, no-cache or stale on
//! arrival, is no answer to them without a validation: they fetch their own), stream the body
//! as it fills ([`Lookup::Stream`]) when its length is declared (a declared length within
//! `max_object` cannot outgrow it midway); without a declared length they wait for the whole
//! body, so that if the fill is dropped (too large, upstream failure) each waiter still has
//! sent nothing and makes its own request. The requests woken by a fill whose head answers
//! none of them (not fresh, or not storable) go upstream at once, each on its own
//! ([`Store::passes`]); requests that come after may collapse onto a new fill.
//!
//! Leaving the store is for later requests (RFC 9111 4.4): an entry invalidated, evicted,
//! replaced or capped while requests read it ([`Store::open_reader`]) is taken out of the
//! index, the LRU list and the byte count, and stays for them, its fill going on, until the
//! last is done ([`Store::close_reader`]). Only a failed fill fails its readers. Such an entry
//! holds at most `max_object` bytes beyond the bound, as a response being written does.
//!
//! Files: this one has the slab, the lookups and the reads; `key` the key; `fill` an entry's
//! fill, from its start to its end; `filled` a fill's body as it arrives; `lru` eviction and
//! the LRU list.
//!
//! The byte bound counts keys, heads, bodies and a per-entry overhead. `Bytes` already handed
//! to a connection stay alive until it is done with them, beyond the bound, as any response
//! being written does.

mod fill;
mod filled;
mod key;
mod lru;
mod partial;

pub use key::{same_origin_target, Key, OwnedKey};
pub use partial::Held;

use super::memfd::{BodyFile, FileRange};
use super::policy::{Accepts, Storable};
use super::vary::VarySpec;
use super::Millis;
use bytes::Bytes;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::task::Waker;

/// Bytes counted per entry beyond its key, head and body: the slot, the map entry, the vary
/// spec's boxes and the allocator's rounding, roughly.
pub const ENTRY_OVERHEAD: u64 = 256;

const NIL: u32 = u32::MAX;

/// How many of the last fills passed ([`Store::pass`]) a store remembers.
const PASSED: usize = 16;

/// An entry, as long as it lives: its slot and the slot's generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    slot: u32,
    gen: u32,
}

/// A fresh stored response, ready to send.
#[derive(Debug, Clone)]
pub struct Hit {
    pub status: u16,
    /// The stored head (status line and end-to-end fields), as the edge stored it.
    pub head: Bytes,
    pub body: Bytes,
    /// The `Age` to send, in seconds.
    pub age: u64,
    /// Where the body lies in the worker's body file (`body` maps it), to send it from.
    pub file: Option<FileRange>,
    /// The origin's 103 Early Hints heads, as a client gets them (empty: none).
    pub interim: Bytes,
}

impl Hit {
    /// What a complete entry (`meta`, `body`, `file`) sends at `now`: its head as served and
    /// its body shared with the store (no copy), its Age, its stored 103s.
    #[inline]
    fn of(meta: &Meta, body: &Bytes, file: Option<FileRange>, now: Millis) -> Hit {
        Hit {
            status: meta.status,
            head: meta.head.slice(..meta.served),
            body: body.clone(),
            age: meta.storable.freshness.age_secs(now),
            file,
            interim: meta.interim.clone(),
        }
    }
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A fresh, complete entry of this variant (`X-Cache: HIT`).
    Hit(Hit),
    /// An entry of this variant is filling with a declared length: send `head` with `age`,
    /// then [`Store::read`] the body from offset 0 as it arrives (`X-Cache: HIT`).
    Stream {
        entry: Handle,
        status: u16,
        head: Bytes,
        age: u64,
        /// The body's declared length.
        len: u64,
    },
    /// A fill for this key is under way: [`Store::subscribe`], and look up again when woken.
    Wait(Handle),
    /// Stale, but within its `stale-while-revalidate` (RFC 5861 3): serve `hit` at once
    /// (`X-Cache: STALE`); unless `revalidating` (a fill of the key is under way already, the
    /// one revalidation), revalidate `entry` after it ([`Store::begin_fill`]).
    Revalidate {
        hit: Hit,
        entry: Handle,
        revalidating: bool,
    },
    /// Stored but stale: fetch (and [`Store::begin_fill`]); on upstream error or timeout try
    /// [`Store::stale_hit`] on this handle (`X-Cache: STALE`).
    Stale(Handle),
    /// Only part of the body is stored (from a 206, `held`): `hit` is that part (its head a
    /// 200's); a range within it is answered from it, anything else is a miss (fetch, and
    /// [`Store::begin_fill`]).
    Held { hit: Hit, held: Held },
    /// Nothing usable: fetch, and [`Store::begin_fill`] (`X-Cache: MISS`).
    Miss,
}

/// What a reader of an entry gets at an offset of its body.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// Body bytes from the offset on (as many as are in).
    Data(Bytes),
    /// Nothing new yet: subscribe and read again when woken.
    Pending,
    /// The offset is the end of the complete body.
    End,
    /// The entry is gone: its fill failed (or, read by no request, it left the store).
    Dropped,
}

/// What became of a fill after `append`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Append {
    Kept,
    /// Dropped: it grew over `max_object`, or no room could be made, or it was already gone
    /// (evicted, invalidated), and no request reads it. The client being served is not
    /// affected; stop copying.
    Dropped,
}

/// Counters of one store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub evicted: u64,
    /// Entries removed to keep a key within `max_variants`.
    pub variants_evicted: u64,
    pub dropped_too_large: u64,
    pub dropped_no_room: u64,
    /// Background revalidations (stale-while-revalidate) that got no usable answer.
    pub revalidation_errors: u64,
    /// Background revalidations not started: the worker ran its most at once.
    pub revalidations_skipped: u64,
}

#[derive(Debug)]
struct Meta {
    status: u16,
    /// The stored head: the fields sent to clients, then, after an empty line, the fields
    /// only this cache reads (targeted cache control, RFC 9213), kept for a 304's update.
    head: Bytes,
    /// Bytes of `head` sent to clients (see [`served_len`]).
    served: usize,
    storable: Storable,
    /// The body length the head declared, if any.
    declared: Option<u64>,
    /// The body is this part of the representation only (a 206 stored, [`Store::hold`]).
    held: Option<Held>,
    /// The 103 Early Hints heads the origin sent before it ([`Store::set_interim`]).
    interim: Bytes,
}

#[derive(Debug)]
enum State {
    AwaitingHead,
    Filling {
        meta: Meta,
        filled: filled::Filled,
    },
    Complete {
        meta: Meta,
        body: Bytes,
        file: Option<FileRange>,
    },
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    key: OwnedKey,
    /// Next entry of the same hash, or NIL.
    chain: u32,
    /// LRU neighbours: `prev` is more recently used.
    prev: u32,
    next: u32,
    /// When it was last used, in the store's own count of uses (to find a key's least
    /// recently used variant without walking the LRU list).
    used: u64,
    size: u64,
    state: State,
    /// Woken on every change of state (head, completion, removal).
    change_waiters: Vec<Waker>,
    /// Woken on new body bytes too.
    data_waiters: Vec<Waker>,
    /// Requests reading it ([`Store::open_reader`]).
    readers: u32,
    /// Out of the store, kept for its `readers` only ([`Store::remove`]).
    detached: bool,
}

impl Entry {
    fn is(&self, hash: u64, key: Key<'_>) -> bool {
        let mine = self.key.key();
        self.hash == hash
            && mine.https == key.https
            && mine.host.eq_ignore_ascii_case(key.host)
            && mine.target == key.target
    }

    fn same_key(&self, other: &Entry) -> bool {
        self.hash == other.hash && self.key == other.key
    }

    fn wake(&mut self, data_only: bool) {
        for w in self.data_waiters.drain(..) {
            w.wake();
        }
        if !data_only {
            for w in self.change_waiters.drain(..) {
                w.wake();
            }
        }
    }
}

#[derive(Debug, Default)]
struct Slot {
    gen: u32,
    entry: Option<Entry>,
}

/// The index hashes are already SipHash outputs: the map keeps them as they are.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// Bytes of a stored head sent to clients: up to the empty line that starts the fields only
/// the cache reads, or all of it.
pub fn served_len(head: &[u8]) -> usize {
    head.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(head.len(), |i| i + 2)
}

/// One worker's response store.
pub struct Store {
    max_bytes: u64,
    max_object: u64,
    /// Entries one key may have (variants and fills); a new one makes the oldest go.
    max_variants: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    index: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    /// Most and least recently used.
    head: u32,
    tail: u32,
    bytes: u64,
    entries: usize,
    /// Uses so far (lookups that hit, fills started): the clock of `Entry::used`.
    uses: u64,
    /// Keyed per store, so a client cannot aim many keys at one chain.
    hasher: RandomState,
    stats: StoreStats,
    /// Where bodies of `FILE_BODY_MIN` bytes and more are kept (`sendfile = true`).
    file: Option<BodyFile>,
    /// The last fills whose response was not storable ([`Store::pass`]), gone from the
    /// store, and where the next one goes: a request woken by one goes upstream on its own
    /// ([`Store::passes`]); one woken by an older one (rare: it is woken at once) looks up
    /// again, as for any fill that failed.
    passed: [Handle; PASSED],
    passed_next: usize,
}

impl Store {
    pub fn new(max_bytes: u64, max_object: u64) -> Store {
        Store {
            max_bytes,
            max_object,
            max_variants: crate::config::cache::DEFAULT_MAX_VARIANTS,
            slots: Vec::new(),
            free: Vec::new(),
            index: HashMap::default(),
            head: NIL,
            tail: NIL,
            bytes: 0,
            entries: 0,
            uses: 0,
            hasher: RandomState::new(),
            stats: StoreStats::default(),
            file: None,
            passed: [Handle { slot: NIL, gen: 0 }; PASSED],
            passed_next: 0,
        }
    }

    /// Keep complete bodies of [`FILE_BODY_MIN`] bytes and more in a memfd (sent with
    /// sendfile). Without a memfd (the call failed) bodies stay in memory.
    pub fn with_body_file(mut self) -> Store {
        self.file = BodyFile::new(self.max_bytes).ok();
        self
    }

    /// At most `n` entries (variants, fills) per key, the oldest out first (at least 1).
    pub fn with_max_variants(mut self, n: usize) -> Store {
        self.max_variants = n.max(1);
        self
    }

    /// The store of a route's `cache = { ... }` settings, for one worker.
    pub fn for_route(cfg: &crate::config::cache::CacheEntry) -> Store {
        let s = Store::new(cfg.max_bytes, cfg.max_object).with_max_variants(cfg.max_variants);
        if cfg.sendfile {
            s.with_body_file()
        } else {
            s
        }
    }

    /// Bytes counted against `max_bytes`.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries in any state.
    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    /// A background revalidation of an entry of this store failed.
    pub fn note_revalidation_error(&mut self) {
        self.stats.revalidation_errors += 1;
    }

    /// A background revalidation of an entry of this store was not started (too many ran).
    pub fn note_revalidation_skipped(&mut self) {
        self.stats.revalidations_skipped += 1;
    }

    fn hash(&self, key: Key<'_>) -> u64 {
        let mut h = self.hasher.build_hasher();
        // Lowercased through a stack buffer: one `write` per 64 bytes, no allocation.
        let mut lower = [0u8; 64];
        for chunk in key.host.chunks(lower.len()) {
            let l = &mut lower[..chunk.len()];
            l.copy_from_slice(chunk);
            l.make_ascii_lowercase();
            h.write(l);
        }
        h.write_usize(key.host.len());
        h.write_u8(u8::from(key.https));
        h.write(key.target);
        h.finish()
    }

    fn entry(&self, h: Handle) -> Option<&Entry> {
        let s = self.slots.get(h.slot as usize)?;
        (s.gen == h.gen).then_some(())?;
        s.entry.as_ref()
    }

    /// Entry `h` if the store still offers it (not kept for its readers only).
    fn indexed(&self, h: Handle) -> Option<&Entry> {
        self.entry(h).filter(|e| !e.detached)
    }

    fn entry_mut(&mut self, h: Handle) -> Option<&mut Entry> {
        let s = self.slots.get_mut(h.slot as usize)?;
        (s.gen == h.gen).then_some(())?;
        s.entry.as_mut()
    }

    fn at(&self, i: u32) -> &Entry {
        self.slots[i as usize]
            .entry
            .as_ref()
            .expect("linked slot holds an entry")
    }

    fn at_mut(&mut self, i: u32) -> &mut Entry {
        self.slots[i as usize]
            .entry
            .as_mut()
            .expect("linked slot holds an entry")
    }

    fn handle(&self, i: u32) -> Handle {
        Handle {
            slot: i,
            gen: self.slots[i as usize].gen,
        }
    }

    /// Find what serves `request` under `key` at `now`, as far as it `accepts` stored
    /// responses. `revalidate` (request no-cache) uses no stored response without
    /// validation: a complete entry of the variant, fresh or not, is `Stale` (to validate),
    /// and fills are not waited for. (`true`/`false` read as plain freshness or revalidate.)
    pub fn lookup(
        &mut self,
        key: Key<'_>,
        request: &[httparse::Header<'_>],
        accepts: impl Into<Accepts>,
        now: Millis,
    ) -> Lookup {
        let a = accepts.into();
        let hash = self.hash(key);
        let Some(&first) = self.index.get(&hash) else {
            return Lookup::Miss;
        };
        if a.revalidate {
            return self.to_validate(first, hash, key, request);
        }
        let (mut stream, mut wait, mut stale, mut swr, mut held) = (NIL, NIL, NIL, NIL, NIL);
        let mut filling = false;
        let mut i = first;
        while i != NIL {
            let e = self.at(i);
            if e.is(hash, key) {
                match &e.state {
                    State::AwaitingHead if wait == NIL => wait = i,
                    // A part of the body is no answer to another request's whole.
                    State::Filling { meta, .. } if meta.held.is_some() => {}
                    State::Complete { meta, .. } if meta.held.is_some() => {
                        let fresh = meta.storable.freshness.serves(now, &a);
                        if held == NIL && fresh && meta.storable.vary.matches(request) {
                            held = i;
                        }
                    }
                    State::Filling { meta, .. } if meta.storable.vary.matches(request) => {
                        filling = true;
                        // Not fresh (no-cache, max-age=0, stale on arrival): no answer to
                        // another request without validation (RFC 9111 4, 5.2.2.4), and
                        // nothing stored to validate yet: that request fetches its own.
                        let fresh = meta.storable.freshness.serves(now, &a);
                        if fresh && meta.declared.is_some() && stream == NIL {
                            stream = i;
                        } else if fresh && wait == NIL {
                            wait = i;
                        }
                    }
                    State::Complete { meta, body, file } if meta.storable.vary.matches(request) => {
                        let f = &meta.storable.freshness;
                        if f.serves(now, &a) {
                            let hit = Hit::of(meta, body, *file, now);
                            self.touch(i);
                            return Lookup::Hit(hit);
                        }
                        if stale == NIL {
                            stale = i;
                        }
                        // A request that narrows freshness takes no stale answer.
                        let narrows = a.max_age.is_some() || a.min_fresh > 0;
                        if swr == NIL && !narrows && f.usable_while_revalidating(now) {
                            swr = i;
                        }
                    }
                    _ => {}
                }
            }
            i = e.chain;
        }
        if swr != NIL {
            return self.while_revalidating(swr, filling || wait != NIL, now);
        }
        if stream != NIL {
            self.touch(stream);
            let State::Filling { meta, .. } = &self.at(stream).state else {
                unreachable!("chosen as filling above");
            };
            return Lookup::Stream {
                entry: self.handle(stream),
                status: meta.status,
                head: meta.head.slice(..meta.served),
                age: meta.storable.freshness.age_secs(now),
                len: meta.declared.unwrap_or(0),
            };
        }
        if wait != NIL {
            return Lookup::Wait(self.handle(wait));
        }
        if stale != NIL {
            return Lookup::Stale(self.handle(stale));
        }
        if held != NIL {
            return self.held_hit(held, now);
        }
        Lookup::Miss
    }

    /// Complete entry `i`, stale within its stale-while-revalidate, served at `now`.
    fn while_revalidating(&mut self, i: u32, revalidating: bool, now: Millis) -> Lookup {
        let State::Complete { meta, body, file } = &self.at(i).state else {
            unreachable!("chosen as complete by lookup");
        };
        let hit = Hit::of(meta, body, *file, now);
        self.touch(i);
        Lookup::Revalidate {
            hit,
            entry: self.handle(i),
            revalidating,
        }
    }

    /// The most recently used complete entry of `key` and the request's variant, from chain
    /// `first`: `Stale` (validate it), or `Miss`.
    fn to_validate(
        &self,
        first: u32,
        hash: u64,
        key: Key<'_>,
        request: &[httparse::Header<'_>],
    ) -> Lookup {
        let mut i = first;
        while i != NIL {
            let e = self.at(i);
            if let State::Complete { meta, .. } = &e.state {
                if e.is(hash, key) && meta.held.is_none() && meta.storable.vary.matches(request) {
                    return Lookup::Stale(self.handle(i));
                }
            }
            i = e.chain;
        }
        Lookup::Miss
    }

    /// A complete entry as a response, fresh or not (the one a validation is about), with
    /// its whole stored head (the fields only the cache reads included: a 304 updates them).
    pub fn stored(&self, h: Handle, now: Millis) -> Option<Hit> {
        let State::Complete { meta, body, file } = &self.indexed(h)?.state else {
            return None;
        };
        Some(Hit {
            status: meta.status,
            head: meta.head.clone(),
            body: body.clone(),
            age: meta.storable.freshness.age_secs(now),
            file: *file,
            interim: meta.interim.clone(),
        })
    }

    /// Whether complete entry `h` is stored and fresh at `now` (a lookup's hit).
    pub fn is_fresh(&self, h: Handle, now: Millis) -> bool {
        match self.indexed(h).map(|e| &e.state) {
            Some(State::Complete { meta, .. }) => meta.storable.freshness.is_fresh(now),
            _ => false,
        }
    }

    /// A 304 validated complete entry `h`: its head and freshness become `head` and
    /// `storable` (RFC 9111 4.3.4). `false`: the entry is gone, or the new head does not fit.
    pub fn refresh(&mut self, h: Handle, head: Bytes, storable: Storable) -> bool {
        let Some(State::Complete { meta, .. }) = self.indexed(h).map(|e| &e.state) else {
            return false;
        };
        let old = (meta.head.len() + meta.storable.vary.size()) as u64;
        let new = (head.len() + storable.vary.size()) as u64;
        if new > old && !self.make_room(new - old, h.slot) {
            self.stats.dropped_no_room += 1;
            self.remove(h.slot);
            return false;
        }
        self.bytes = self.bytes + new - old;
        drop(head.clone()); // promoted once, as in `fill_head`
        let e = self.at_mut(h.slot);
        e.size = e.size + new - old;
        if let State::Complete { meta, .. } = &mut e.state {
            meta.served = served_len(&head);
            meta.head = head;
            meta.storable = storable;
        }
        self.touch(h.slot);
        true
    }

    /// Body bytes from `offset` on. Reading keeps the entry recently used, so a complete entry
    /// being streamed is the last to be evicted.
    pub fn read(&mut self, h: Handle, offset: u64) -> Read {
        let Some(e) = self.entry(h) else {
            return Read::Dropped;
        };
        let read = match &e.state {
            State::AwaitingHead => Read::Pending,
            State::Filling { filled, .. } => filled.read(offset).map_or(Read::Pending, Read::Data),
            State::Complete { body, .. } => match usize::try_from(offset) {
                Ok(o) if o < body.len() => Read::Data(body.slice(o..)),
                _ => Read::End,
            },
        };
        if !e.detached {
            self.touch(h.slot);
        }
        read
    }

    /// Wake `waker` when the entry changes (or, while it streams, gets bytes). `false`: the
    /// entry is gone or complete; nothing to wait for, look up or read again now.
    pub fn subscribe(&mut self, h: Handle, waker: &Waker) -> bool {
        let Some(e) = self.entry_mut(h) else {
            return false;
        };
        let list = match &e.state {
            State::Complete { .. } => return false,
            State::Filling { meta, .. } if meta.declared.is_some() => &mut e.data_waiters,
            _ => &mut e.change_waiters,
        };
        if !list.iter().any(|w| w.will_wake(waker)) {
            list.push(waker.clone());
        }
        true
    }

    /// A request starts reading entry `h` ([`Store::read`]): until it is done
    /// ([`Store::close_reader`]) the entry's bytes stay for it, whatever takes the entry out
    /// of the store meanwhile. `false`: it is gone.
    pub fn open_reader(&mut self, h: Handle) -> bool {
        let Some(e) = self.entry_mut(h) else {
            return false;
        };
        e.readers += 1;
        true
    }

    /// A request is done reading entry `h`: an entry out of the store goes with its last
    /// reader.
    pub fn close_reader(&mut self, h: Handle) {
        let Some(e) = self.entry_mut(h) else { return };
        e.readers = e.readers.saturating_sub(1);
        if e.readers == 0 && e.detached {
            self.discard(h.slot);
        }
    }

    /// Whether `waker` (given to [`Store::subscribe`]) still waits on entry `h`: a change
    /// takes its waiters off the entry, so a waker still listed was woken by something else.
    pub fn still_waits(&self, h: Handle, waker: &Waker) -> bool {
        self.entry(h).is_some_and(|e| {
            e.change_waiters
                .iter()
                .chain(&e.data_waiters)
                .any(|w| w.will_wake(waker))
        })
    }

    /// Whether the requests woken by fill `h` go upstream each on its own, neither starting
    /// nor waiting on another fill (a pass, as Varnish's hit-for-miss): its head showed a
    /// response that answers none of them, not fresh at `now` (no-cache, max-age=0, stale on
    /// arrival) or not storable ([`Store::pass`]). Looking up again, each would start a fill
    /// the others wait for, and the origin would get them one at a time.
    pub fn passes(&self, h: Handle, now: Millis) -> bool {
        if self.passed.contains(&h) {
            return true;
        }
        match self.entry(h).map(|e| &e.state) {
            Some(State::Filling { meta, .. } | State::Complete { meta, .. }) => {
                meta.held.is_none() && !meta.storable.freshness.is_fresh(now)
            }
            _ => false,
        }
    }

    /// Other requests wait on entry `h` (collapsed on its fill) or read it: its fetch is worth
    /// going on with when the client that started it leaves. (A waiter that gave up meanwhile
    /// still counts until the entry next changes.)
    pub fn waited_on(&self, h: Handle) -> bool {
        self.entry(h).is_some_and(|e| {
            e.readers > 0 || !e.change_waiters.is_empty() || !e.data_waiters.is_empty()
        })
    }

    /// The stale entry `h` (from [`Lookup::Stale`]) as a response, if it may still be served
    /// on an upstream error at `now` (`X-Cache: STALE`).
    pub fn stale_hit(&mut self, h: Handle, now: Millis, stale_if_error: Millis) -> Option<Hit> {
        let State::Complete { meta, body, file } = &self.indexed(h)?.state else {
            return None;
        };
        let f = &meta.storable.freshness;
        f.usable_on_error(now, stale_if_error).then(|| Hit {
            status: meta.status,
            head: meta.head.slice(..meta.served),
            body: body.clone(),
            age: f.age_secs(now),
            file: *file,
            interim: meta.interim.clone(),
        })
    }

    /// Remove every entry of `key`, every variant, fills included (their waiters make their
    /// own requests; requests reading one finish it). Returns how many went.
    pub fn invalidate(&mut self, key: Key<'_>) -> usize {
        let hash = self.hash(key);
        let mut n = 0;
        let mut i = self.index.get(&hash).copied().unwrap_or(NIL);
        while i != NIL {
            let e = self.at(i);
            let next = e.chain;
            if e.is(hash, key) {
                self.remove(i);
                n += 1;
            }
            i = next;
        }
        n
    }

    /// Entries on the chain a lookup of `key` walks (its variants and fills, and any other
    /// key of the same hash): what a lookup costs.
    pub fn chain_len(&self, key: Key<'_>) -> usize {
        let mut i = self.index.get(&self.hash(key)).copied().unwrap_or(NIL);
        let mut n = 0;
        while i != NIL {
            n += 1;
            i = self.at(i).chain;
        }
        n
    }

    /// The vary spec of an entry (tests and metrics).
    pub fn vary(&self, h: Handle) -> Option<&VarySpec> {
        match &self.indexed(h)?.state {
            State::Filling { meta, .. } | State::Complete { meta, .. } => Some(&meta.storable.vary),
            State::AwaitingHead => None,
        }
    }
}
