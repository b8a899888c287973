//! The shared protocol test vectors in `testdata/protocol/vectors.json`.
//!
//! Every valid vector must decode to its stated message and that message must encode
//! back to exactly the same bytes; every invalid vector must be rejected with its stated
//! error code. Run with `CROSSDOCK_WRITE_VECTORS=1` to rewrite the file from the samples
//! below (only when the protocol changes on purpose; review the diff).

use std::collections::BTreeSet;
use std::path::PathBuf;

use crossdock_proto::message::hex_bytes::{from_hex, to_hex};
use crossdock_proto::*;
use serde::{Deserialize, Serialize};

#[path = "vectors/samples.rs"]
mod samples;
use samples::{invalid_samples, samples};

#[derive(Serialize, Deserialize)]
struct Vectors {
    protocol_version: u8,
    note: String,
    frames: Vec<FrameVector>,
    invalid: Vec<InvalidVector>,
}

#[derive(Serialize, Deserialize)]
struct FrameVector {
    name: String,
    request_id: u64,
    hex: String,
    message: Message,
}

#[derive(Serialize, Deserialize)]
struct InvalidVector {
    name: String,
    hex: String,
    error: String,
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/protocol/vectors.json")
}

fn build() -> Vectors {
    Vectors {
        protocol_version: PROTOCOL_VERSION,
        note: "Crossdock wire protocol test vectors; see docs/protocol.md. Every implementation's tests read this file.".into(),
        frames: samples()
            .into_iter()
            .map(|(name, rid, m)| FrameVector {
                name: name.into(),
                request_id: rid,
                hex: to_hex(&m.encode_frame(rid)),
                message: m,
            })
            .collect(),
        invalid: invalid_samples()
            .into_iter()
            .map(|(name, bytes, code)| InvalidVector { name: name.into(), hex: to_hex(&bytes), error: code.name().into() })
            .collect(),
    }
}

fn load() -> Vectors {
    if std::env::var_os("CROSSDOCK_WRITE_VECTORS").is_some() {
        let text = serde_json::to_string_pretty(&build()).unwrap() + "\n";
        std::fs::create_dir_all(path().parent().unwrap()).unwrap();
        std::fs::write(path(), text).unwrap();
    }
    let text = std::fs::read_to_string(path()).expect("testdata/protocol/vectors.json is readable");
    serde_json::from_str(&text).expect("vectors.json parses")
}

#[test]
fn valid_vectors_decode_and_encode_exactly() {
    let v = load();
    assert_eq!(v.protocol_version, PROTOCOL_VERSION);
    assert!(!v.frames.is_empty());
    for f in &v.frames {
        let bytes = from_hex(&f.hex).unwrap();
        let (header, msg) =
            Message::decode_frame(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(header.request_id, f.request_id, "{}", f.name);
        assert_eq!(msg, f.message, "{}: decoded meaning differs", f.name);
        assert_eq!(
            to_hex(&f.message.encode_frame(f.request_id)),
            f.hex,
            "{}: encoding differs",
            f.name
        );
    }
}

#[test]
fn invalid_vectors_are_rejected_with_their_code() {
    let v = load();
    assert!(!v.invalid.is_empty());
    for f in &v.invalid {
        let bytes = from_hex(&f.hex).unwrap();
        let err = Message::decode_frame(&bytes).expect_err(&f.name);
        assert_eq!(err.code().name(), f.error, "{}: {err}", f.name);
    }
}

#[test]
fn vectors_cover_every_message_kind() {
    let v = load();
    let covered: BTreeSet<u8> = v.frames.iter().map(|f| f.message.kind() as u8).collect();
    for k in 0..=255u8 {
        if MessageKind::from_u8(k).is_some() {
            assert!(covered.contains(&k), "no vector for kind 0x{k:02x}");
        }
    }
}

#[test]
fn the_file_matches_the_samples() {
    // Guards against an edit of the samples that was not written to the shared file.
    let v = load();
    let built = build();
    assert_eq!(v.frames.len(), built.frames.len());
    for (a, b) in v.frames.iter().zip(&built.frames) {
        assert_eq!(a.hex, b.hex, "{}", a.name);
    }
}

#[test]
fn appended_fields_are_ignored() {
    // Forward compatibility: a newer peer may append fields to any body.
    let mut frame = Message::RenewLease { app_id: "a".into() }.encode_frame(5);
    frame.extend_from_slice(&[1, 2, 3]);
    let len = (frame.len() - 4) as u32;
    frame[0..4].copy_from_slice(&len.to_be_bytes());
    let (_, msg) = Message::decode_frame(&frame).unwrap();
    assert_eq!(msg, Message::RenewLease { app_id: "a".into() });
}
