//! Partial content stored (RFC 9111 3.3, 3.4): a 206 for a key with no stored response keeps
//! its part of the body, with the representation's whole length; ranges within that part are
//! answered from it; a part that touches the stored one with the same strong validator joins
//! it (a whole response once every byte is there), another replaces it, and a whole response
//! of the same variant replaces it.

use super::super::validate::validators;
use super::{Handle, Hit, Lookup, Meta, Millis, State, Store, NIL};
use bytes::{Bytes, BytesMut};

/// The part of a representation an entry's body is: from byte `start`, of `total` bytes in
/// all (from the 206's `Content-Range: bytes start-end/total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub start: u64,
    pub total: u64,
}

impl Store {
    /// The filling entry `h` (its head in) is the part `held` of its representation only:
    /// never streamed to another request, never a hit for the whole. `false`: it is gone.
    pub fn hold(&mut self, h: Handle, held: Held) -> bool {
        let Some(e) = self.entry_mut(h) else {
            return false;
        };
        match &mut e.state {
            State::Filling { meta, .. } => {
                meta.held = Some(held);
                true
            }
            _ => false,
        }
    }

    /// The held part of entry `i`, fresh at `now`.
    pub(super) fn held_hit(&mut self, i: u32, now: Millis) -> Lookup {
        let State::Complete { meta, body, file } = &self.at(i).state else {
            unreachable!("chosen as complete by lookup");
        };
        let Some(held) = meta.held else {
            unreachable!("chosen as held by lookup");
        };
        let hit = Hit::of(meta, body, *file, now);
        self.touch(i);
        Lookup::Held { hit, held }
    }

    /// Whether complete entry `i` holds a part only.
    pub(super) fn is_held(&self, i: u32) -> bool {
        matches!(&self.at(i).state, State::Complete { meta, .. } if meta.held.is_some())
    }

    /// The part `body` (`meta.held`) of the entry in slot `i` that is finishing, joined with
    /// the stored part of its key and variant that it touches or overlaps, of the same strong
    /// validator and complete length (its bytes win where both have them); that part goes.
    /// `meta.held` becomes `None` once the joined body is the whole representation.
    pub(super) fn combine(&mut self, i: u32, meta: &mut Meta, body: Bytes) -> Bytes {
        let Some(new) = meta.held else { return body };
        let (a1, b1) = (new.start, new.start + body.len() as u64);
        let mine = validators(&meta.head);
        let hash = self.at(i).hash;
        let mut j = self.index.get(&hash).copied().unwrap_or(NIL);
        while j != NIL {
            let e = self.at(j);
            let next = e.chain;
            let State::Complete {
                meta: m, body: old, ..
            } = &e.state
            else {
                j = next;
                continue;
            };
            let theirs = validators(&m.head);
            let same = match (mine.etag, theirs.etag) {
                (Some(x), Some(y)) => x == y,
                (None, None) => {
                    mine.last_modified.is_some() && mine.last_modified == theirs.last_modified
                }
                _ => false,
            };
            let joins = |held: Held| {
                let (a2, b2) = (held.start, held.start + old.len() as u64);
                held.total == new.total && a1 <= b2 && a2 <= b1
            };
            let fits = m.held.is_some_and(joins)
                && same
                && j != i
                && e.same_key(self.at(i))
                && m.storable.vary == meta.storable.vary;
            if !fits {
                j = next;
                continue;
            }
            let a2 = m.held.map_or(0, |h| h.start);
            let (start, end) = (a1.min(a2), b1.max(a2 + old.len() as u64));
            if end - start > self.max_object {
                return body;
            }
            let mut joined = BytesMut::zeroed((end - start) as usize);
            let at = |x: u64| (x - start) as usize;
            joined[at(a2)..at(a2) + old.len()].copy_from_slice(old);
            joined[at(a1)..at(a1) + body.len()].copy_from_slice(&body);
            // The older part goes first: the joined body never takes more than both did.
            self.remove(j);
            let grown = joined.len() as u64 - body.len() as u64;
            self.bytes += grown;
            self.at_mut(i).size += grown;
            meta.held = (start > 0 || end < new.total).then_some(Held {
                start,
                total: new.total,
            });
            return joined.freeze();
        }
        body
    }
}
