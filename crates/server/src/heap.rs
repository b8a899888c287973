//! Giving freed heap memory back to the operating system after a bulk free.
//!
//! When an application's or a shuffle's data is deleted, hundreds of megabytes of batch
//! buffers are freed at once. The allocator keeps freed memory for reuse, per arena
//! (glibc keeps up to its trim threshold at the top of each heap and never returns holes
//! inside one), so a worker serving application after application could hold its budget
//! *plus* what each arena kept: measured with `crossdock bench alltoall`, four runs in a
//! row took a worker of 228 MiB to 318 MiB of RSS. The process that knows the allocator
//! (the `crossdock` binary, `alloc.rs`) installs its trim here; a library user that
//! installs none loses nothing but the trim.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static TRIM: OnceLock<fn()> = OnceLock::new();
/// A trim is queued: deletions meanwhile need no other (a trim takes every arena's lock).
static PENDING: AtomicBool = AtomicBool::new(false);

/// Installs the function that returns free heap memory to the OS (first one wins).
pub fn set_trim(trim: fn()) {
    let _ = TRIM.set(trim);
}

/// Returns free heap memory to the OS, on a blocking thread when called in a runtime
/// (a trim walks every arena). Does nothing when no trim is installed.
pub fn release_freed() {
    let Some(&trim) = TRIM.get() else {
        return;
    };
    if PENDING.swap(true, Ordering::AcqRel) {
        return;
    }
    let run = move || {
        PENDING.store(false, Ordering::Release);
        trim();
    };
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn_blocking(run);
        }
        Err(_) => run(),
    }
}
