//! Partial content stored (RFC 9111 3.3, 3.4): a 206 for a key with no stored response keeps
//! its part of the body, with the representation's whole length; ranges within that part are
//! answered from it, and a whole response of the same variant replaces it.

use super::{Handle, Hit, Lookup, Millis, State, Store};

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
        let hit = Hit {
            status: meta.status,
            head: meta.head.slice(..meta.served),
            body: body.clone(),
            age: meta.storable.freshness.age_secs(now),
            file: *file,
        };
        self.touch(i);
        Lookup::Held { hit, held }
    }

    /// Whether complete entry `i` holds a part only.
    pub(super) fn is_held(&self, i: u32) -> bool {
        matches!(&self.at(i).state, State::Complete { meta, .. } if meta.held.is_some())
    }
}
