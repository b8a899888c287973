//! The memory check of every target: a global allocator that counts the bytes live in
//! the process and refuses an allocation past a limit ([`cap::Cap`]).
//!
//! [`bounded`] sets the limit to what is live now plus an allowance for the input, runs
//! the target, and lifts the limit again. A decoder that allocates more fails its
//! allocation, and Rust aborts the process ("memory allocation of N bytes failed"):
//! AFL++ records the input as a crash, `cargo test` fails. That is a check of real
//! allocations (what `Vec::with_capacity` of a hostile count would ask for), cheaper and
//! more exact than AFL's own memory limit, which only sees the address space.
//!
//! The limit is one for the whole process, so bounded runs take turns ([`bounded`]
//! holds a lock), and a test binary that uses it runs nothing else at the same time.

use std::alloc::System;
use std::sync::{Mutex, Once};

use cap::Cap;

/// Bytes a target may allocate per byte of input. The largest honest ratio is a list
/// of empty strings: 2 bytes on the wire, a 24-byte `String` each in memory (12x), plus
/// the body's copy and the re-encoding the targets check; 32 leaves room for those and
/// still fails any count or length trusted before it was checked.
pub const PER_INPUT_BYTE: usize = 32;
/// Bytes a target may allocate whatever its input: error texts, the decoded message's
/// own fixed size, the re-encoding's first buffer.
pub const BASE: usize = 256 << 10;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// One bounded run at a time: the limit is the process's.
static TURN: Mutex<()> = Mutex::new(());

/// Installs (once) the panic hook that lifts the limit before a panic is reported.
static HOOK: Once = Once::new();

/// Bytes allocated and not freed, in the whole process.
pub fn live() -> usize {
    ALLOCATOR.allocated()
}

/// Runs `f` with at most `allowance` bytes more than are live now allocated at any
/// moment; an allocation past that fails and aborts the process.
pub fn bounded<R>(allowance: usize, f: impl FnOnce() -> R) -> R {
    HOOK.call_once(|| {
        // Reporting a panic (a failed property) allocates its message and a backtrace,
        // which are not the decoder's memory: lift the limit first, then report as the
        // hook found here would (the test runner's, or afl.rs's abort).
        let earlier = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = ALLOCATOR.set_limit(usize::MAX);
            earlier(info);
        }));
    });
    // A panic of an earlier run (a failed property, caught by the test runner) poisons
    // the lock; the limit was lifted by its guard all the same.
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let limit = live().saturating_add(allowance);
    ALLOCATOR
        .set_limit(limit)
        .expect("a limit above what is live is always accepted");
    let _lift = Lift;
    f()
}

/// Lifts the limit when a bounded run ends, by returning or by panicking.
struct Lift;

impl Drop for Lift {
    fn drop(&mut self) {
        ALLOCATOR
            .set_limit(usize::MAX)
            .expect("lifting the limit is always accepted");
    }
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
}
