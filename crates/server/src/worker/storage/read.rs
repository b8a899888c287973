//! Reading a fetch's batches: from memory as they are, from the partition file with one
//! read per run of adjacent records, or, for evicted ranges, from the segments in the
//! object store. Every record read is checked against the index (header and CRC32C).

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use super::error::StorageError;
use super::metrics::StorageMetrics;
use super::object::ObjectTier;
use super::partition::{Piece, ReadView, Source, UploadedRange};
use super::record::{self, RECORD_HEADER};

/// Where a loaded batch's payload is held.
pub enum Held {
    Memory(Bytes),
    /// A range of the read buffer: (start, length).
    Buffer(usize, usize),
}

/// One batch of a chunk, loaded and checked.
pub struct Loaded {
    pub map_id: u32,
    pub seq: u32,
    pub crc: u32,
    pub held: Held,
}

impl Loaded {
    /// The payload's length.
    pub fn payload_len(&self) -> usize {
        match &self.held {
            Held::Memory(d) => d.len(),
            Held::Buffer(_, len) => *len,
        }
    }

    /// The payload (`buf` is the read buffer it may lie in).
    pub fn payload<'a>(&'a self, buf: &'a [u8]) -> &'a [u8] {
        match &self.held {
            Held::Memory(d) => d,
            Held::Buffer(start, len) => &buf[*start..*start + *len],
        }
    }
}

/// Stored bytes a chunk reads from file or object store (memory pieces read nothing):
/// the size of read buffer it needs.
pub fn stored_len(chunk: &[Piece]) -> u64 {
    chunk
        .iter()
        .filter(|p| !matches!(p.source, Source::Memory(_)))
        .map(|p| RECORD_HEADER as u64 + p.len as u64)
        .sum()
}

/// Records that follow each other in the partition file (`chunk[first..last]`, bytes
/// `[start, end)` of the file), read with one call into `buf[pos..]` (or, for a zero-copy
/// fetch, sent with one `sendfile` run).
pub(crate) struct Span {
    pub first: usize,
    pub last: usize,
    pub start: u64,
    pub end: u64,
    pub pos: usize,
    /// Read from the object store (the local copy was evicted).
    pub object: bool,
}

/// Groups a chunk's stored pieces into spans. Returns them and the buffer size they need.
pub(crate) fn plan_spans(chunk: &[Piece]) -> (Vec<Span>, usize) {
    let mut spans = Vec::new();
    let (mut i, mut pos) = (0, 0usize);
    while i < chunk.len() {
        let (start, object) = match chunk[i].source {
            Source::Memory(_) => {
                i += 1;
                continue;
            }
            Source::File(o) => (o, false),
            Source::Object(o) => (o, true),
        };
        let mut end = start + (RECORD_HEADER as u64) + chunk[i].len as u64;
        let mut j = i + 1;
        while j < chunk.len() {
            match chunk[j].source {
                Source::File(o) | Source::Object(o)
                    if o == end && object == matches!(chunk[j].source, Source::Object(_)) =>
                {
                    end += RECORD_HEADER as u64 + chunk[j].len as u64;
                    j += 1;
                }
                _ => break,
            }
        }
        spans.push(Span {
            first: i,
            last: j,
            start,
            end,
            pos,
            object,
        });
        pos += (end - start) as usize;
        i = j;
    }
    (spans, pos)
}

/// Where a chunk is read from.
pub struct ChunkReader<'a> {
    pub view: &'a ReadView,
    pub tier: Option<&'a ObjectTier>,
    pub metrics: &'a StorageMetrics,
}

impl ChunkReader<'_> {
    /// Loads a chunk's payloads into `buf` (reused across the chunks of a stream) and
    /// checks every stored record. Returns the buffer (also on failure, to be reused)
    /// and the chunk's batches in order.
    pub async fn load(
        &self,
        chunk: &[Piece],
        mut buf: Vec<u8>,
    ) -> (Vec<u8>, Result<Vec<Loaded>, StorageError>) {
        let (spans, need) = plan_spans(chunk);
        if buf.len() < need {
            buf.resize(need, 0);
        }
        for span in spans.iter().filter(|s| s.object) {
            let dst = &mut buf[span.pos..span.pos + (span.end - span.start) as usize];
            if let Err(e) = self.read_evicted(span.start, dst).await {
                return (buf, Err(e));
            }
        }
        // (buffer position, file range) of every span on local disk, read off the runtime.
        let reads: Vec<(usize, u64, u64)> = spans
            .iter()
            .filter(|s| !s.object)
            .map(|s| (s.pos, s.start, s.end))
            .collect();
        if !reads.is_empty() {
            let file: Arc<std::fs::File> =
                self.view.file.clone().expect("file opened for file pieces");
            let task = move || {
                let res = reads.iter().try_for_each(|&(pos, start, end)| {
                    file.read_exact_at(&mut buf[pos..pos + (end - start) as usize], start)
                });
                (buf, res)
            };
            match tokio::task::spawn_blocking(task).await {
                Ok((returned, res)) => {
                    buf = returned;
                    if let Err(e) = res {
                        return (
                            buf,
                            Err(StorageError::reading("reading the partition file")(e)),
                        );
                    }
                }
                Err(source) => {
                    let err = StorageError::Task {
                        what: "read",
                        source,
                    };
                    return (Vec::new(), Err(err));
                }
            }
        }
        let out = check(chunk, &spans, &buf);
        (buf, out)
    }

    /// Reads bytes `[start, start + dst.len())` of an evicted partition file from the
    /// segments that hold them.
    async fn read_evicted(&self, start: u64, dst: &mut [u8]) -> Result<(), StorageError> {
        let object = self
            .tier
            .ok_or(StorageError::MissingSegment { offset: start })?;
        let segments: &[UploadedRange] = &self.view.segments;
        let end = start + dst.len() as u64;
        let mut at = start;
        while at < end {
            let seg = segments
                .iter()
                .find(|s| s.start <= at && at < s.end)
                .ok_or(StorageError::MissingSegment { offset: at })?;
            let upto = end.min(seg.end);
            let bytes = object
                .read_range(&seg.key, at - seg.start..upto - seg.start)
                .await
                .map_err(StorageError::reading_object)?;
            let from = (at - start) as usize;
            dst[from..from + bytes.len()].copy_from_slice(&bytes);
            StorageMetrics::add(&self.metrics.object_read_bytes, bytes.len() as u64);
            at = upto;
        }
        Ok(())
    }
}

/// Checks the loaded records against the index (header fields and CRC32C) and lists
/// the chunk's batches in order.
fn check(chunk: &[Piece], spans: &[Span], buf: &[u8]) -> Result<Vec<Loaded>, StorageError> {
    let mut out = Vec::with_capacity(chunk.len());
    let mut spans = spans.iter().peekable();
    let mut i = 0;
    while i < chunk.len() {
        let p = &chunk[i];
        if let Source::Memory(data) = &p.source {
            out.push(Loaded {
                map_id: p.map_id,
                seq: p.seq,
                crc: p.crc,
                held: Held::Memory(data.clone()),
            });
            i += 1;
            continue;
        }
        let span = spans.next().expect("a span for every stored piece");
        debug_assert_eq!(span.first, i);
        let mut off = span.pos;
        for q in &chunk[span.first..span.last] {
            let Some(payload) = record::verify(&buf[off..], &q.record_header()) else {
                return Err(StorageError::Corrupt {
                    map: q.map_id,
                    attempt: q.attempt_id,
                    seq: q.seq,
                    offset: span.start + (off - span.pos) as u64,
                    from_object: span.object,
                });
            };
            out.push(Loaded {
                map_id: q.map_id,
                seq: q.seq,
                crc: q.crc,
                held: Held::Buffer(off + payload.start, q.len as usize),
            });
            off += payload.end;
        }
        i = span.last;
    }
    Ok(out)
}
