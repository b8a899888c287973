//! The mutations of the short run: a fixed pseudo-random sequence (xorshift from a
//! constant seed), so `make test` feeds the decoders the same inputs every time and a
//! failure reproduces. The kinds of change are the ones that break decoders: flipped
//! bits, boundary values written over length and count fields (which sit at every
//! offset in some message), bytes inserted, removed or repeated, cut tails, and splices
//! of two inputs. The long run (`make fuzz`) does the same and more, guided by coverage.

/// A deterministic generator of mutated inputs.
pub struct Mutator {
    state: u64,
}

/// Values that sit on a boundary of a `u8`, `u16`, `u32` or `u64` field.
const INTERESTING: [u64; 12] = [
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0xffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
];

impl Mutator {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Mutator {
        Mutator {
            state: seed | 1, // xorshift never leaves 0
        }
    }

    /// The next pseudo-random number (xorshift64*).
    fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A mutation of `input`: one to four changes, `others` giving the material of a
    /// splice.
    pub fn mutate(&mut self, input: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
        let mut out = input.to_vec();
        for _ in 0..1 + self.below(4) {
            self.change(&mut out, others);
        }
        out
    }

    fn change(&mut self, out: &mut Vec<u8>, others: &[Vec<u8>]) {
        let len = out.len();
        match self.below(8) {
            // Flip one bit.
            0 if len > 0 => {
                let at = self.below(len);
                out[at] ^= 1 << self.below(8);
            }
            // A random byte.
            1 if len > 0 => {
                let at = self.below(len);
                out[at] = self.next() as u8;
            }
            // A boundary value over a 1-, 2-, 4- or 8-byte big-endian field.
            2 => {
                let width = 1 << self.below(4);
                if len >= width {
                    let at = self.below(len - width + 1);
                    let mut v = INTERESTING[self.below(INTERESTING.len())];
                    if self.below(4) == 0 {
                        // Near the input's own length: lengths that are off by a little.
                        v = (len as u64)
                            .wrapping_add(self.below(9) as u64)
                            .wrapping_sub(4);
                    }
                    let bytes = v.to_be_bytes();
                    out[at..at + width].copy_from_slice(&bytes[8 - width..]);
                }
            }
            // Insert random bytes.
            3 => {
                let at = self.below(len + 1);
                let n = 1 + self.below(16);
                let fresh: Vec<u8> = (0..n).map(|_| self.next() as u8).collect();
                out.splice(at..at, fresh);
            }
            // Remove a range.
            4 if len > 0 => {
                let at = self.below(len);
                let n = 1 + self.below((len - at).min(32));
                out.drain(at..at + n);
            }
            // Repeat a range.
            5 if len > 0 => {
                let at = self.below(len);
                let n = 1 + self.below((len - at).min(64));
                let copy = out[at..at + n].to_vec();
                out.splice(at..at, copy);
            }
            // Cut the tail.
            6 if len > 0 => {
                out.truncate(self.below(len));
            }
            // Splice: this input's head, another's tail.
            _ if !others.is_empty() => {
                let other = &others[self.below(others.len())];
                let head = self.below(len + 1);
                let tail = self.below(other.len() + 1);
                out.truncate(head);
                out.extend_from_slice(&other[tail..]);
            }
            _ => out.push(self.next() as u8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_is_fixed_by_the_seed() {
        let input = b"0123456789abcdef".to_vec();
        let run = |seed| {
            let mut m = Mutator::new(seed);
            (0..50)
                .map(|_| m.mutate(&input, std::slice::from_ref(&input)))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(
            run(7).iter().any(|m| m != &input),
            "mutations change inputs"
        );
    }

    #[test]
    fn empty_inputs_can_be_mutated() {
        let mut m = Mutator::new(1);
        for _ in 0..100 {
            m.mutate(&[], &[]);
        }
    }
}
