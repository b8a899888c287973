//! The short fuzzing run of `make test`: every target over its seeds, the corpus the
//! last long run kept, and a fixed set of mutations of both, each input under the
//! target's memory limit. Deterministic: the same inputs every run.
//!
//! A failed property names the input (in hex) and the target; replay it with
//! `cargo run -p crossdock-fuzz -- run TARGET FILE`. A decoder that allocates past the
//! limit aborts this binary ("memory allocation of N bytes failed"); set
//! `CROSSDOCK_FUZZ_TRACE=1` to print each input before it runs and find which.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crossdock_fuzz::mutate::Mutator;
use crossdock_fuzz::{corpus, seeds, Target};
use crossdock_proto::message::hex_bytes::to_hex;

/// Mutations per target: enough to cross every field of every seed many times, few
/// enough that the whole run takes seconds in a debug build.
const MUTATIONS: usize = 100_000;

fn run_one(t: Target, input: &[u8]) {
    if std::env::var_os("CROSSDOCK_FUZZ_TRACE").is_some() {
        eprintln!("{} {}", t.name(), to_hex(input));
    }
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| t.run(input))) {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "target {} failed on input {} ({} bytes): {why}",
            t.name(),
            to_hex(input),
            input.len()
        );
    }
}

fn short_run(t: Target) {
    let mut inputs = seeds::seeds(t);
    inputs.extend(corpus::load(t));
    for input in &inputs {
        run_one(t, input);
    }
    // The target's own seed: each target gets its own sequence.
    let mut m = Mutator::new(0x5eed ^ t.name().len() as u64 ^ (t as u64) << 32);
    for i in 0..MUTATIONS {
        let mutated = m.mutate(&inputs[i % inputs.len()], &inputs);
        run_one(t, &mutated);
    }
}

#[test]
fn frame() {
    short_run(Target::Frame);
}

#[test]
fn message() {
    short_run(Target::Message);
}

#[test]
fn stream() {
    short_run(Target::Stream);
}

#[test]
fn record() {
    short_run(Target::Record);
}

#[test]
fn journal_record() {
    short_run(Target::JournalRecord);
}

#[test]
fn journal() {
    short_run(Target::Journal);
}

#[test]
fn shuffle_meta() {
    short_run(Target::ShuffleMeta);
}

/// The limit is real: a decoder that trusted a count would be stopped.
#[test]
fn the_memory_limit_stops_an_allocation_a_hostile_count_would_ask_for() {
    let input = [0xffu8; 5];
    let refused = crossdock_fuzz::alloc::bounded(Target::Message.allowance(input.len()), || {
        // What `Vec::with_capacity(count)` of an unchecked u32 count of u64s would take.
        let count = u32::from_be_bytes([input[1], input[2], input[3], input[4]]) as usize;
        Vec::<u64>::new().try_reserve_exact(count).is_err()
    });
    assert!(refused);
}
