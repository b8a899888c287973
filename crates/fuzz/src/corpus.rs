//! The corpus a long run keeps: the inputs AFL++ found that reach new code, minimized
//! (`afl-cmin`), one file per target in `crates/fuzz/corpus/<target>.hex`, one input a
//! line in hex. One text file instead of hundreds of binary ones keeps the repository
//! and its diffs readable; the short run replays it, so every path a long run reached
//! is checked on every `make test`, and the next long run starts from it.

use std::path::{Path, PathBuf};

use crossdock_proto::message::hex_bytes::{from_hex, to_hex};

use crate::Target;

/// The directory of the kept corpus.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// The kept corpus file of `target`.
pub fn file(target: Target) -> PathBuf {
    dir().join(format!("{}.hex", target.name()))
}

/// The inputs of a corpus file's text: one hex input a line; empty lines and lines
/// starting with `#` are skipped (an empty input is the line `-`).
pub fn parse(text: &str) -> Result<Vec<Vec<u8>>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| match l.trim() {
            "-" => Ok(Vec::new()),
            hex => from_hex(hex).map_err(|e| format!("line {}: {e}", i + 1)),
        })
        .collect()
}

/// The text of a corpus file holding `inputs`, under a comment line.
pub fn format(target: Target, inputs: &[Vec<u8>]) -> String {
    let mut out = format!(
        "# {} inputs of the `{}` target kept by `make fuzz` (scripts/fuzz.sh); one hex input a line\n",
        inputs.len(),
        target.name()
    );
    for i in inputs {
        out.push_str(if i.is_empty() { "-" } else { "" });
        out.push_str(&to_hex(i));
        out.push('\n');
    }
    out
}

/// The kept corpus of `target`; empty if there is none yet.
pub fn load(target: Target) -> Vec<Vec<u8>> {
    match std::fs::read_to_string(file(target)) {
        Ok(text) => parse(&text).unwrap_or_else(|e| panic!("{}: {e}", file(target).display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{}: {e}", file(target).display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corpus_file_round_trips() {
        let inputs = vec![vec![], vec![0, 1, 0xff], b"shuffle".to_vec()];
        let text = format(Target::Frame, &inputs);
        assert_eq!(parse(&text).unwrap(), inputs);
        assert!(parse("zz\n").is_err());
    }
}
