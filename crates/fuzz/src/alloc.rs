//! The memory check of every target: a global allocator that counts the bytes a thread
//! allocates during a bounded run and refuses an allocation past the run's allowance.
//!
//! [`bounded`] gives the calling thread an allowance for the input, runs the target, and
//! lifts the limit again. A decoder that allocates more fails its allocation, and Rust
//! aborts the process ("memory allocation of N bytes failed"): AFL++ records the input
//! as a crash, `cargo test` fails. That is a check of real allocations (what
//! `Vec::with_capacity` of a hostile count would ask for), cheaper and more exact than
//! AFL's own memory limit, which only sees the address space.
//!
//! The limit is the thread's, not the process's: the targets decode on the thread that
//! calls them, and other threads of the same process (the test runner's other tests)
//! allocate freely while a bounded run is under way. A process-wide limit made those
//! other tests' allocations fail at random (the CI of 2026-11-28 aborted on one).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Once;

/// Bytes a target may allocate per byte of input. The largest honest ratio is a list
/// of empty strings: 2 bytes on the wire, a 24-byte `String` each in memory (12x), plus
/// the body's copy and the re-encoding the targets check; 32 leaves room for those and
/// still fails any count or length trusted before it was checked.
pub const PER_INPUT_BYTE: usize = 32;
/// Bytes a target may allocate whatever its input: error texts, the decoded message's
/// own fixed size, the re-encoding's first buffer.
pub const BASE: usize = 256 << 10;

/// A thread's bounded run: the bytes it may hold and the bytes it holds, counted from
/// the run's start (allocations minus frees of this thread).
#[derive(Clone, Copy)]
struct Run {
    allowance: usize,
    held: usize,
}

thread_local! {
    /// `None` outside a bounded run. A `const`-initialized `Cell` of a `Copy` type has
    /// no destructor and never allocates, so the allocator may read it.
    static RUN: Cell<Option<Run>> = const { Cell::new(None) };
}

/// Takes `bytes` more from the thread's allowance; false when that would pass it.
fn take(bytes: usize) -> bool {
    RUN.try_with(|cell| match cell.get() {
        None => true,
        Some(run) => match run.held.checked_add(bytes) {
            Some(held) if held <= run.allowance => {
                cell.set(Some(Run { held, ..run }));
                true
            }
            _ => false,
        },
    })
    // The thread's locals are being torn down: no run is under way on it.
    .unwrap_or(true)
}

/// Gives `bytes` back to the thread's allowance (a free, or an allocation that failed).
/// Freeing what was allocated before the run gives nothing back below zero.
fn give(bytes: usize) {
    let _ = RUN.try_with(|cell| {
        if let Some(run) = cell.get() {
            let held = run.held.saturating_sub(bytes);
            cell.set(Some(Run { held, ..run }));
        }
    });
}

/// Takes `bytes` from the thread's allowance, then allocates with `allocate`; a refusal
/// or a failed allocation returns null with the allowance as it was.
fn counted(bytes: usize, allocate: impl FnOnce() -> *mut u8) -> *mut u8 {
    if !take(bytes) {
        return std::ptr::null_mut();
    }
    let p = allocate();
    if p.is_null() {
        give(bytes);
    }
    p
}

/// The system allocator, with the calling thread's bounded run checked first.
struct Bounded;

// SAFETY: every call is passed to `System` unchanged; a refused one returns null
// without touching it, which `GlobalAlloc` allows for a failed allocation. The
// bookkeeping reads and writes a `const` thread-local `Cell`, which never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Bounded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        counted(layout.size(), || System.alloc(layout))
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        counted(layout.size(), || System.alloc_zeroed(layout))
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        give(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !take(new_size - old) {
            return std::ptr::null_mut();
        }
        let p = System.realloc(ptr, layout, new_size);
        if p.is_null() {
            if new_size > old {
                give(new_size - old);
            }
        } else if new_size < old {
            give(old - new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Bounded = Bounded;

/// Installs (once) the panic hook that lifts the panicking thread's limit first.
static HOOK: Once = Once::new();

/// Runs `f` on this thread with at most `allowance` bytes more than it held when the run
/// began allocated by it at any moment; an allocation past that fails (and aborts the
/// process, unless the caller used a fallible one such as `try_reserve`).
pub fn bounded<R>(allowance: usize, f: impl FnOnce() -> R) -> R {
    /// Lifts the limit when a bounded run ends, by returning or by panicking, and
    /// restores an enclosing run's (one bounded run may call another).
    struct Lift(Option<Run>);
    impl Drop for Lift {
        fn drop(&mut self) {
            RUN.with(|cell| cell.set(self.0));
        }
    }
    HOOK.call_once(|| {
        // Reporting a panic (a failed property) allocates its message and a backtrace,
        // which are not the decoder's memory: lift the limit first, then report as the
        // hook found here would (the test runner's, or afl.rs's abort). The run's guard
        // restores the enclosing limit as the panic unwinds past it.
        let earlier = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = RUN.try_with(|cell| cell.set(None));
            earlier(info);
        }));
    });
    let outer = RUN.with(|cell| cell.replace(Some(Run { allowance, held: 0 })));
    let _lift = Lift(outer);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_within_the_allowance_succeeds_and_the_limit_is_lifted() {
        let v = bounded(1 << 20, || vec![0u8; 512 << 10]);
        assert_eq!(v.len(), 512 << 10);
        // After the run, far more than the allowance may be allocated again.
        let big = vec![0u8; 4 << 20];
        assert_eq!(big.len(), 4 << 20);
    }

    #[test]
    fn an_allocation_past_the_allowance_is_refused() {
        // `try_reserve` reports the refusal instead of aborting, so it can be tested.
        let refused = bounded(1 << 20, || Vec::<u8>::new().try_reserve(8 << 20).is_err());
        assert!(refused);
    }

    #[test]
    fn freed_bytes_return_to_the_allowance_and_growth_is_counted() {
        bounded(1 << 20, || {
            // Three times the allowance in turn, never more than half of it at once.
            for _ in 0..3 {
                let v = vec![0u8; 512 << 10];
                drop(v);
            }
            // Growing in place by `realloc` counts the growth.
            let mut v = vec![0u8; 512 << 10];
            assert!(v.try_reserve_exact(768 << 10).is_err());
            v.truncate(0);
            v.shrink_to_fit();
            assert!(v.try_reserve_exact(768 << 10).is_ok());
        });
    }

    #[test]
    fn another_thread_is_not_limited_by_a_run() {
        bounded(1 << 20, || {
            // While this thread's run is under way, another thread allocates far past it
            // (what the test runner's other tests do).
            let other = std::thread::spawn(|| vec![0u8; 16 << 20].len());
            assert_eq!(other.join().unwrap(), 16 << 20);
        });
    }

    #[test]
    fn a_run_inside_a_run_restores_the_outer_limit() {
        bounded(1 << 20, || {
            bounded(4 << 20, || {
                assert!(Vec::<u8>::new().try_reserve(2 << 20).is_ok())
            });
            assert!(Vec::<u8>::new().try_reserve(2 << 20).is_err());
        });
    }
}
