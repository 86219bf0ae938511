//! Typed positions into the config's tables: [`GroupId`] (an upstream group of
//! `Config::groups`), [`ServerId`] (a server of one group's `servers`), [`RouteId`] (a route of
//! `Config::routes`), and [`Table`], the vector they index.
//!
//! Everything a worker builds from a config is laid out in parallel with it (a balancer per
//! group, a pool per server, a store per cached route, counters per route and per server):
//! each of those tables is a `Table` of the same id, so an index of one kind cannot be used
//! for another, and the compiler checks what used to be a comment ("index into
//! `cfg.groups`"). An id is a plain `usize` underneath (`Copy`, no check, no cost); it is
//! valid in the config (the generation) it was taken from, and only there: across a reload,
//! ids are mapped by name (`metrics::same_route`, `same_server`), never reused.

use std::fmt;
use std::marker::PhantomData;

/// An id of one kind: a position in a [`Table`] of that kind.
pub trait Id: Copy {
    fn from_index(i: usize) -> Self;
    fn index(self) -> usize;
}

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(usize);

        impl $name {
            /// The id at position `i` (a config's tests and builders name entries this way).
            pub const fn new(i: usize) -> Self {
                $name(i)
            }

            /// The position, for what is laid out outside a [`Table`] (a metrics row).
            pub const fn index(self) -> usize {
                self.0
            }
        }

        impl Id for $name {
            fn from_index(i: usize) -> Self {
                $name(i)
            }
            fn index(self) -> usize {
                self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }
    };
}

id!(
    /// An upstream group: a position in `Config::groups`.
    GroupId
);
id!(
    /// A server of one group: a position in `UpstreamGroup::servers` (with its group, a
    /// [`GroupId`], it names one server of the config).
    ServerId
);
id!(
    /// A route: a position in `Config::routes`.
    RouteId
);

/// A vector indexed by one kind of id only. Iteration is in id order; `enumerate` pairs
/// each value with its id.
///
/// ```
/// use proxy::config::{GroupId, Table};
/// let t: Table<GroupId, u8> = Table::from(vec![7]);
/// assert_eq!(t[GroupId::new(0)], 7);
/// ```
///
/// Another kind of id, or a bare position, does not compile:
///
/// ```compile_fail
/// use proxy::config::{GroupId, RouteId, Table};
/// let t: Table<GroupId, u8> = Table::from(vec![7]);
/// let _ = t[RouteId::new(0)];
/// ```
///
/// ```compile_fail
/// use proxy::config::{GroupId, Table};
/// let t: Table<GroupId, u8> = Table::from(vec![7]);
/// let _ = t[0];
/// ```
pub struct Table<I, T> {
    items: Vec<T>,
    _id: PhantomData<fn(I) -> I>,
}

impl<I: Id, T> Table<I, T> {
    pub const fn new() -> Self {
        Table {
            items: Vec::new(),
            _id: PhantomData,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, id: I) -> Option<&T> {
        self.items.get(id.index())
    }

    pub fn get_mut(&mut self, id: I) -> Option<&mut T> {
        self.items.get_mut(id.index())
    }

    /// Adds `value` at the end; returns its id.
    pub fn push(&mut self, value: T) -> I {
        self.items.push(value);
        I::from_index(self.items.len() - 1)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }

    /// Each value with its id.
    pub fn enumerate(&self) -> impl DoubleEndedIterator<Item = (I, &T)> + ExactSizeIterator {
        self.items
            .iter()
            .enumerate()
            .map(|(i, v)| (I::from_index(i), v))
    }

    /// Each value, mutable, with its id.
    pub fn enumerate_mut(&mut self) -> impl Iterator<Item = (I, &mut T)> {
        self.items
            .iter_mut()
            .enumerate()
            .map(|(i, v)| (I::from_index(i), v))
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = I> + ExactSizeIterator {
        (0..self.items.len()).map(I::from_index)
    }

    /// The id of the first value `f` accepts.
    pub fn position(&self, f: impl FnMut(&T) -> bool) -> Option<I> {
        self.items.iter().position(f).map(I::from_index)
    }

    /// A table of the same ids with `f` of each value.
    pub fn map<U>(&self, f: impl FnMut(&T) -> U) -> Table<I, U> {
        self.items.iter().map(f).collect()
    }

    pub fn clear(&mut self) {
        self.items.clear();
    }
}

impl<I: Id, T> Default for Table<I, T> {
    fn default() -> Self {
        Table::new()
    }
}

impl<I, T: Clone> Clone for Table<I, T> {
    fn clone(&self) -> Self {
        Table {
            items: self.items.clone(),
            _id: PhantomData,
        }
    }
}

impl<I, T: PartialEq> PartialEq for Table<I, T> {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl<I, T: Eq> Eq for Table<I, T> {}

impl<I, T: fmt::Debug> fmt::Debug for Table<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.items.fmt(f)
    }
}

impl<I: Id, T> std::ops::Index<I> for Table<I, T> {
    type Output = T;
    fn index(&self, id: I) -> &T {
        &self.items[id.index()]
    }
}

impl<I: Id, T> std::ops::IndexMut<I> for Table<I, T> {
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.index()]
    }
}

impl<I, T> FromIterator<T> for Table<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        Table {
            items: iter.into_iter().collect(),
            _id: PhantomData,
        }
    }
}

impl<I, T> From<Vec<T>> for Table<I, T> {
    fn from(items: Vec<T>) -> Self {
        Table {
            items,
            _id: PhantomData,
        }
    }
}

impl<'a, I, T> IntoIterator for &'a Table<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_indexed_by_its_own_ids() {
        let mut t: Table<RouteId, &str> = Table::new();
        let a = t.push("a");
        let b = t.push("b");
        assert_eq!((a, b), (RouteId::new(0), RouteId::new(1)));
        assert_eq!(t[b], "b");
        assert_eq!(t.get(RouteId::new(2)), None);
        let pairs: Vec<_> = t.enumerate().collect();
        assert_eq!(pairs, [(a, &"a"), (b, &"b")]);
        assert_eq!(t.position(|v| *v == "b"), Some(b));
        assert_eq!(t.map(|v| v.len()).iter().sum::<usize>(), 2);
        assert_eq!(format!("{a:?}"), "RouteId(0)");
    }
}
