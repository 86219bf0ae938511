//! Scriptable origin server (see the origin helper).
