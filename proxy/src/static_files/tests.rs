//! Table tests of the sans-IO core.
