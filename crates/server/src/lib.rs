//! Crossdock coordinator and worker.
