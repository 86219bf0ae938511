//! The load generator (work in progress: see the loader issue).
