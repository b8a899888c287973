//! `crossdock-afl TARGET`: one of `crossdock-fuzz`'s targets under AFL++ (afl.rs's
//! persistent mode: many inputs per process). A failed property is a panic, which afl.rs
//! turns into an abort; a decoder that allocates past the target's limit aborts too
//! (`crossdock_fuzz::alloc`). AFL++ records both as crashes, and a run that takes
//! longer than its `-t` as a hang.

use crossdock_fuzz::Target;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = Target::from_name(&name) else {
        let names: Vec<_> = Target::ALL.iter().map(|t| t.name()).collect();
        eprintln!("usage: crossdock-afl TARGET ({})", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| {
        target.run(data);
    });
}
