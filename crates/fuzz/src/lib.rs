//! Fuzz targets for every decoder of Crossdock: what a peer, a disk or a crash can hand
//! the service as bytes it did not write itself.
//!
//! | target | decoder | where the bytes come from |
//! |---|---|---|
//! | `frame` | `FrameHeader::decode`, `Message::decode_frame` | any connection |
//! | `message` | `Message::decode` (kind byte, body) | any connection |
//! | `stream` | `io::read_header`, `io::read_exact_bytes`, `io::skip`, the worker's push-header reader, `Message::decode` | a connection's byte stream, frame after frame |
//! | `record` | `RecordHeader::decode`, `record::parse`, `record::verify` | partition files, object-store segments |
//! | `journal-record` | the coordinator's `journal::Record::decode` | `state.wal`, `state.snapshot` |
//! | `journal` | `journal::decode_records` (a whole state file) | `state.wal`, `state.snapshot` |
//! | `shuffle-meta` | `ShuffleMeta::parse`, `names::app_id_of`, `layout::partition_of` | a worker's data directories |
//!
//! Each target asserts more than "no panic": whatever decodes must encode back to the
//! bytes it came from (or the prefix a decoder read, as decoders ignore bytes after
//! the fields they know), so a decoder that accepts what no encoder writes is found too.
//! [`Target::run`] runs a target under a memory limit ([`alloc`]): an input of `n` bytes
//! may have at most a fixed multiple of `n`, plus a constant, allocated at any moment,
//! so a hostile length or count that makes a decoder allocate fails the run.
//!
//! Two runners share these targets:
//!
//! - `cargo test -p crossdock-fuzz` (part of `make test`): every seed ([`seeds`]), the
//!   corpus the last long run kept (`corpus/`, [`corpus`]) and a fixed set of mutations
//!   of both ([`mutate`]). Deterministic: the same inputs on every run.
//! - `make fuzz` (`scripts/fuzz.sh`): AFL++ through afl.rs on the stable toolchain, one
//!   target after another in the instrumented binary `crossdock-afl` (built only with the
//!   feature `afl`, so the plain build, clippy and `cargo test` never need AFL), seeded
//!   from [`seeds`] and the kept corpus.

pub mod alloc;
pub mod corpus;
pub mod mutate;
pub mod seeds;
mod targets;

/// One decoder (or a group that reads the same bytes) under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Frame,
    Message,
    Stream,
    Record,
    JournalRecord,
    Journal,
    ShuffleMeta,
}

impl Target {
    /// Every target, in the order the runners take them.
    pub const ALL: [Target; 7] = [
        Target::Frame,
        Target::Message,
        Target::Stream,
        Target::Record,
        Target::JournalRecord,
        Target::Journal,
        Target::ShuffleMeta,
    ];

    /// The target's name on the command line, in file names and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Target::Frame => "frame",
            Target::Message => "message",
            Target::Stream => "stream",
            Target::Record => "record",
            Target::JournalRecord => "journal-record",
            Target::Journal => "journal",
            Target::ShuffleMeta => "shuffle-meta",
        }
    }

    /// The target of a name [`Target::name`] gives.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Bytes an input of `len` bytes may have allocated at any moment of the target:
    /// [`alloc::PER_INPUT_BYTE`] per byte and [`alloc::BASE`], and for the stream the
    /// body one frame may declare before its bytes arrive (a receiver admits that much
    /// against its frame budget; here [`targets::STREAM_FRAME_LIMIT`]).
    pub fn allowance(self, len: usize) -> usize {
        let extra = match self {
            Target::Stream => targets::STREAM_FRAME_LIMIT,
            _ => 0,
        };
        len.saturating_mul(alloc::PER_INPUT_BYTE)
            .saturating_add(alloc::BASE)
            .saturating_add(extra)
    }

    /// Runs the target on `data` under its memory limit ([`Target::allowance`]). Panics
    /// if a property of the decoder does not hold; aborts the process (the allocator
    /// fails) if the decoder allocates past the limit.
    pub fn run(self, data: &[u8]) {
        alloc::bounded(self.allowance(data.len()), || self.run_unbounded(data));
    }

    /// Runs the target without a memory limit (to tell a failed allocation from a
    /// panic when replaying an input by hand).
    pub fn run_unbounded(self, data: &[u8]) {
        match self {
            Target::Frame => targets::frame(data),
            Target::Message => targets::message(data),
            Target::Stream => targets::stream(data),
            Target::Record => targets::record(data),
            Target::JournalRecord => targets::journal_record(data),
            Target::Journal => targets::journal(data),
            Target::ShuffleMeta => targets::shuffle_meta(data),
        }
    }
}
