//! Rust client library for Crossdock.
