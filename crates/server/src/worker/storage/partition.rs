//! One reduce partition on a worker: its data file, the batches still in memory, and
//! the map index that says where every batch of every map attempt lies.
//!
//! All batches of a partition, from every map, are appended to **one** data file in
//! large sequential writes (destination-based aggregation). Each batch is stored as a
//! self-describing record ([`super::record`]), so the file can be checked and
//! re-indexed on its own.
//!
//! A flush writes the pending batches sorted by (map, attempt, seq), so one map's
//! batches in a flush are contiguous and a map-range read touches few, large extents.
//!
//! With an object store, the file is also uploaded in segments (byte ranges of it; see
//! [`super::object`]). Once every byte of the file is uploaded, the local file may
//! be evicted: reads of offsets below `local_from` then go to the segments, and later
//! flushes write the file anew from `local_from` on (a sparse file).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use crossdock_proto::{AttemptId, ResumePoint};

use super::record::{self, Parsed, RecordHeader, RECORD_HEADER};

/// One batch of one map attempt.
#[derive(Debug, Clone)]
pub struct Extent {
    pub seq: u32,
    pub len: u32,
    pub crc: u32,
    /// The payload while it is in memory (also while it is being flushed).
    pub data: Option<Bytes>,
    /// Offset of the record header in the data file, once written.
    pub file_offset: Option<u64>,
}

/// Where a fetched batch comes from.
#[derive(Debug, Clone)]
pub enum Source {
    Memory(Bytes),
    /// Offset of the record header in the data file.
    File(u64),
    /// Offset of the record header in the data file, which is no longer on local disk:
    /// it is read from the segment that holds it.
    Object(u64),
}

/// An uploaded range of the data file: `[start, end)`, stored as the object `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedRange {
    pub start: u64,
    pub end: u64,
    pub key: Arc<str>,
}

/// A batch to send to a reducer.
#[derive(Debug, Clone)]
pub struct Piece {
    pub map_id: u32,
    pub attempt_id: AttemptId,
    pub seq: u32,
    pub len: u32,
    pub crc: u32,
    pub source: Source,
}

impl Piece {
    /// The header its stored record must have.
    pub fn record_header(&self) -> RecordHeader {
        RecordHeader {
            map: self.map_id,
            attempt: self.attempt_id,
            seq: self.seq,
            len: self.len,
            crc: self.crc,
        }
    }
}

/// Outcome of inserting a pushed batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Stored,
    /// The same (map, attempt, seq) is already stored: a retried push. Dropped.
    Duplicate,
    /// The partition was deleted meanwhile.
    Deleted,
}

/// Mutable state of a partition, behind its mutex.
pub struct PartitionState {
    /// The map index: (map, attempt) to its batches in sequence order.
    pub index: BTreeMap<(u32, AttemptId), Vec<Extent>>,
    /// Batches in memory not yet handed to a flush, as (map, attempt, seq).
    pub unflushed: Vec<(u32, AttemptId, u32)>,
    /// The flush round under way: what was unflushed when it began, sorted, taken piece
    /// by piece ([`Partition::take_flush`]) before anything that arrived since, so that a
    /// commit waiting for its batches to be written is not passed over by newer pushes.
    pub round: Vec<(u32, AttemptId, u32)>,
    /// Payload bytes in memory (the credit this partition holds).
    pub mem_bytes: u64,
    /// Next free offset in the data file.
    pub file_end: u64,
    /// Bytes written to the data file (records whose flush completed).
    pub file_written: u64,
    pub last_push: Instant,
    pub deleted: bool,
    /// Bytes of the file stored in the object store (a prefix of the file).
    pub uploaded_to: u64,
    /// The uploaded segments, by start offset.
    pub uploaded: BTreeMap<u64, UploadedRange>,
    /// Bytes of the file below this offset were evicted from the local disk: they are
    /// read from the object store.
    pub local_from: u64,
}

/// A partition of a shuffle held by this worker.
pub struct Partition {
    pub id: u32,
    /// The app and shuffle it belongs to.
    pub app_id: Arc<str>,
    pub shuffle_id: u32,
    pub path: PathBuf,
    /// True while a flush of this partition is scheduled or running.
    pub flushing: AtomicBool,
    /// True while an upload of this partition is scheduled or running.
    pub uploading: AtomicBool,
    /// True from when the partition was placed here in place of a lost copy (or is
    /// being restored from the object store) until the coordinator checked it whole:
    /// fetches wait meanwhile instead of reading a partial copy.
    pub restoring: AtomicBool,
    /// The replica's address while this worker is the partition's primary and the
    /// partition has a replica: pushed batches are forwarded there.
    forward: std::sync::RwLock<Option<std::sync::Arc<str>>>,
    pub state: Mutex<PartitionState>,
    /// Whether it continues on another worker (see [`super::split`]).
    pub split: super::split::SplitMark,
}

/// Batches taken out of memory for one flush.
pub struct FlushJob {
    /// Where the records go in the file.
    pub offset: u64,
    /// Record headers, one per payload, in file order.
    pub headers: Vec<[u8; RECORD_HEADER]>,
    /// Payloads, in file order (shared with the in-memory index, not copied).
    pub payloads: Vec<Bytes>,
    /// (map, attempt, seq, record offset) of every record.
    pub records: Vec<(u32, AttemptId, u32, u64)>,
    /// Payload bytes the job releases once written.
    pub payload_bytes: u64,
    /// Bytes the job adds to the file.
    pub file_bytes: u64,
}

impl FlushJob {
    /// Writes the records at their reserved offset with vectored writes, straight from
    /// the batches' buffers.
    pub fn write_to(&self, file: &mut std::fs::File) -> std::io::Result<()> {
        use std::io::{IoSlice, Seek, SeekFrom, Write};
        file.seek(SeekFrom::Start(self.offset))?;
        // At most 512 records per system call (IOV_MAX is 1024 slices).
        let n = self.headers.len();
        let mut i = 0;
        while i < n {
            let end = (i + 512).min(n);
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(2 * (end - i));
            for k in i..end {
                slices.push(IoSlice::new(&self.headers[k]));
                slices.push(IoSlice::new(&self.payloads[k]));
            }
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                let written = file.write_vectored(rest)?;
                if written == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "partition file write wrote nothing",
                    ));
                }
                IoSlice::advance_slices(&mut rest, written);
            }
            i = end;
        }
        Ok(())
    }
}

impl Partition {
    pub fn new(id: u32, app_id: Arc<str>, shuffle_id: u32, path: PathBuf) -> Partition {
        Partition {
            id,
            app_id,
            shuffle_id,
            path,
            flushing: AtomicBool::new(false),
            uploading: AtomicBool::new(false),
            restoring: AtomicBool::new(false),
            forward: std::sync::RwLock::new(None),
            split: Default::default(),
            state: Mutex::new(PartitionState {
                index: BTreeMap::new(),
                unflushed: Vec::new(),
                round: Vec::new(),
                mem_bytes: 0,
                file_end: 0,
                file_written: 0,
                last_push: Instant::now(),
                deleted: false,
                uploaded_to: 0,
                uploaded: BTreeMap::new(),
                local_from: 0,
            }),
        }
    }

    /// Where pushed batches are forwarded, if anywhere (a reference count, no copy:
    /// this runs on every push).
    pub fn forward_to(&self) -> Option<std::sync::Arc<str>> {
        self.forward.read().expect("lock").clone()
    }

    /// Sets (or clears, with `None` or an empty address) the replica to forward to.
    pub fn set_forward(&self, addr: Option<&str>) {
        *self.forward.write().expect("lock") = addr.filter(|a| !a.is_empty()).map(Into::into);
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, PartitionState> {
        self.state.lock().expect("partition lock poisoned")
    }

    /// Whether batch `seq` of `(map, attempt)` is stored (a push of it is a retry).
    pub fn holds(&self, map: u32, attempt: AttemptId, seq: u32) -> bool {
        self.lock()
            .index
            .get(&(map, attempt))
            .is_some_and(|e| e.binary_search_by_key(&seq, |e| e.seq).is_ok())
    }

    /// Stores a pushed batch in memory. The caller already holds credit for it.
    pub fn insert(
        &self,
        map: u32,
        attempt: AttemptId,
        seq: u32,
        crc: u32,
        payload: Bytes,
    ) -> Insert {
        let mut st = self.lock();
        if st.deleted {
            return Insert::Deleted;
        }
        let len = payload.len() as u32;
        let extents = st.index.entry((map, attempt)).or_default();
        let pos = match extents.binary_search_by_key(&seq, |e| e.seq) {
            Ok(_) => return Insert::Duplicate,
            Err(pos) => pos,
        };
        extents.insert(
            pos,
            Extent {
                seq,
                len,
                crc,
                data: Some(payload),
                file_offset: None,
            },
        );
        st.unflushed.push((map, attempt, seq));
        st.mem_bytes += len as u64;
        st.last_push = Instant::now();
        Insert::Stored
    }

    /// Payload bytes held for one map attempt (in memory and on disk).
    pub fn attempt_bytes(&self, map: u32, attempt: AttemptId) -> u64 {
        self.lock()
            .index
            .get(&(map, attempt))
            .map_or(0, |v| v.iter().map(|e| e.len as u64).sum())
    }

    /// True while a batch of this map attempt is only in memory.
    pub fn attempt_in_memory(&self, map: u32, attempt: AttemptId) -> bool {
        self.lock()
            .index
            .get(&(map, attempt))
            .is_some_and(|v| v.iter().any(|e| e.file_offset.is_none()))
    }

    /// The end of the last record of a map attempt in the data file, once all its
    /// batches are written there (`None` while one is still only in memory).
    pub fn attempt_end(&self, map: u32, attempt: AttemptId) -> Option<u64> {
        let st = self.lock();
        let extents = st.index.get(&(map, attempt))?;
        extents.iter().try_fold(0u64, |end, e| {
            e.file_offset
                .map(|o| end.max(o + (RECORD_HEADER as u64) + e.len as u64))
        })
    }

    /// Rebuilds a partition from its data file after a restart: every whole record
    /// whose CRC matches is indexed. The file is cut after the last good record (a crash
    /// in the middle of a flush leaves a torn one). Returns the partition and the bytes
    /// it holds on disk.
    pub fn recover(
        id: u32,
        app_id: Arc<str>,
        shuffle_id: u32,
        path: PathBuf,
    ) -> std::io::Result<(Partition, u64)> {
        use std::io::Read;
        let part = Partition::new(id, app_id, shuffle_id, path.clone());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        let total = file.metadata()?.len();
        let mut reader = std::io::BufReader::with_capacity(1 << 20, &mut file);
        let mut offset = 0u64;
        let mut buf = vec![0u8; RECORD_HEADER];
        {
            let mut st = part.lock();
            while offset + RECORD_HEADER as u64 <= total {
                buf.resize(RECORD_HEADER, 0);
                reader.read_exact(&mut buf)?;
                let Some(header) = RecordHeader::decode(&buf) else {
                    break;
                };
                if offset + header.record_len() > total {
                    break;
                }
                buf.resize(header.record_len() as usize, 0);
                reader.read_exact(&mut buf[RECORD_HEADER..])?;
                let Parsed::Record(r) = record::parse(&buf) else {
                    break;
                };
                let h = r.header;
                let extents = st.index.entry((h.map, h.attempt)).or_default();
                if let Err(pos) = extents.binary_search_by_key(&h.seq, |e| e.seq) {
                    extents.insert(
                        pos,
                        Extent {
                            seq: h.seq,
                            len: h.len,
                            crc: h.crc,
                            data: None,
                            file_offset: Some(offset),
                        },
                    );
                }
                offset += h.record_len();
            }
            st.file_end = offset;
            st.file_written = offset;
        }
        drop(reader);
        if offset < total {
            tracing::warn!(path = %path.display(), good = offset, total, "partition file ends in a torn or corrupt record; cut there");
            file.set_len(offset)?;
        }
        Ok((part, offset))
    }

    /// Payload bytes in memory.
    pub fn mem_bytes(&self) -> u64 {
        self.lock().mem_bytes
    }

    /// Whether a flush round is under way (pieces of it not yet taken).
    pub fn in_round(&self) -> bool {
        !self.lock().round.is_empty()
    }

    /// Takes the next piece of the flush round into a flush job: about `max_bytes` of
    /// payload (at least one batch), in (map, attempt, seq) order, and reserves its place
    /// in the file. A round begins, when none is under way, with every batch then
    /// unflushed. Returns `None` when there is nothing to flush.
    pub fn take_flush(&self, max_bytes: u64) -> Option<FlushJob> {
        let mut st = self.lock();
        if st.deleted {
            return None;
        }
        if st.round.is_empty() {
            let mut keys = std::mem::take(&mut st.unflushed);
            keys.sort_unstable();
            st.round = keys;
        }
        if st.round.is_empty() {
            return None;
        }
        let offset = st.file_end;
        let mut job = FlushJob {
            offset,
            headers: Vec::new(),
            payloads: Vec::new(),
            records: Vec::new(),
            payload_bytes: 0,
            file_bytes: 0,
        };
        // The round's keys this piece takes (those gone from the index are dropped).
        let mut taken = 0;
        for &(map, attempt, seq) in &st.round {
            let Some(e) = st
                .index
                .get(&(map, attempt))
                .and_then(|v| v.binary_search_by_key(&seq, |e| e.seq).ok().map(|i| &v[i]))
            else {
                taken += 1;
                continue;
            };
            if job.payload_bytes > 0 && job.payload_bytes + e.len as u64 > max_bytes {
                break;
            }
            taken += 1;
            let data = e.data.as_ref().expect("unflushed batch is in memory");
            let header = RecordHeader {
                map,
                attempt,
                seq,
                len: e.len,
                crc: e.crc,
            }
            .encode();
            job.records
                .push((map, attempt, seq, offset + job.file_bytes));
            job.headers.push(header);
            job.payloads.push(data.clone());
            job.payload_bytes += e.len as u64;
            job.file_bytes += (RECORD_HEADER + data.len()) as u64;
        }
        st.round.drain(..taken);
        st.file_end = offset + job.file_bytes;
        Some(job)
    }

    /// Marks a written flush job's batches as on disk and drops their memory copies.
    /// Returns the payload bytes released, or `None` if the partition was deleted
    /// meanwhile (its deletion already released them, and the file is gone).
    pub fn complete_flush(&self, job: &FlushJob) -> Option<u64> {
        let mut st = self.lock();
        if st.deleted {
            return None;
        }
        for &(map, attempt, seq, rec_offset) in &job.records {
            if let Some(v) = st.index.get_mut(&(map, attempt)) {
                if let Ok(i) = v.binary_search_by_key(&seq, |e| e.seq) {
                    v[i].data = None;
                    v[i].file_offset = Some(rec_offset);
                }
            }
        }
        st.mem_bytes -= job.payload_bytes;
        st.file_written += job.file_bytes;
        Some(job.payload_bytes)
    }

    /// Puts a failed flush job's batches back in the queue (they are still in memory)
    /// and gives its place in the file back: flushes of a partition run one at a time,
    /// so nothing was reserved after it. The caller cuts the file at `job.offset`, so a
    /// half-written job leaves no garbage between records.
    pub fn abort_flush(&self, job: &FlushJob) {
        let mut st = self.lock();
        if !st.deleted {
            st.unflushed
                .extend(job.records.iter().map(|&(m, a, s, _)| (m, a, s)));
            st.file_end = job.offset;
        }
    }

    /// The batches a reducer reads for maps `[start, end)`: only each map's committed
    /// attempt, in (map, seq) order, after `resume` if given.
    pub fn snapshot(
        &self,
        start: u32,
        end: u32,
        committed: impl Fn(u32) -> Option<AttemptId>,
        resume: Option<ResumePoint>,
    ) -> Vec<Piece> {
        pieces(
            &self.lock(),
            start,
            end,
            committed,
            resume,
            RunCut::default(),
        )
    }

    /// What a fetch reads: [`Partition::snapshot`], with the data file opened and the
    /// uploaded segments copied under the same lock, so that an eviction cannot come in
    /// between (an evicted file is unlinked under this lock; an open one stays readable).
    pub fn read_view(
        &self,
        start: u32,
        end: u32,
        committed: impl Fn(u32) -> Option<AttemptId>,
        resume: Option<ResumePoint>,
        cut: RunCut,
    ) -> std::io::Result<ReadView> {
        let st = self.lock();
        let pieces = pieces(&st, start, end, committed, resume, cut);
        let file = if pieces.iter().any(|p| matches!(p.source, Source::File(_))) {
            Some(Arc::new(std::fs::File::open(&self.path)?))
        } else {
            None
        };
        let segments = if pieces.iter().any(|p| matches!(p.source, Source::Object(_))) {
            st.uploaded.values().cloned().collect()
        } else {
            Vec::new()
        };
        Ok(ReadView {
            pieces,
            file,
            segments,
        })
    }

    /// Evicts the local copy of a partition whose file is wholly uploaded and not being
    /// written: `marker` is created first (a restarted worker then knows the local file
    /// is not the whole partition), then the file is unlinked. Returns the bytes freed on
    /// disk, or `None` when the partition is not evictable now.
    pub fn evict(&self, marker: &std::path::Path) -> Option<std::io::Result<u64>> {
        let mut st = self.lock();
        if st.deleted {
            return None;
        }
        let local = st.file_written - st.local_from;
        if local == 0 || st.uploaded_to != st.file_written || st.file_end != st.file_written {
            return None;
        }
        let res = std::fs::write(marker, b"")
            .and_then(|()| std::fs::remove_file(&self.path))
            .map(|()| {
                st.local_from = st.file_written;
                local
            });
        Some(res)
    }

    /// The next range of the file to upload, `[uploaded_to, file_written)`, if any.
    pub fn to_upload(&self) -> Option<std::ops::Range<u64>> {
        let st = self.lock();
        (!st.deleted && st.uploaded_to < st.file_written).then(|| st.uploaded_to..st.file_written)
    }

    /// Records an uploaded segment. Returns false when the partition was deleted
    /// meanwhile (the segment is garbage).
    pub fn uploaded(&self, range: std::ops::Range<u64>, key: Arc<str>) -> bool {
        let mut st = self.lock();
        if st.deleted {
            return false;
        }
        st.uploaded_to = st.uploaded_to.max(range.end);
        st.uploaded.insert(
            range.start,
            UploadedRange {
                start: range.start,
                end: range.end,
                key,
            },
        );
        true
    }

    /// Marks the partition deleted and drops its memory. Returns the bytes it held in
    /// memory and the bytes of its file on local disk.
    pub fn delete(&self) -> (u64, u64) {
        let mut st = self.lock();
        st.deleted = true;
        st.index.clear();
        st.unflushed.clear();
        st.round.clear();
        // Evicted bytes were no longer counted as on disk.
        let on_disk = st.file_written - st.local_from;
        st.file_written = 0;
        (std::mem::take(&mut st.mem_bytes), on_disk)
    }
}

/// How much of each map a merging reader's fetch takes: one segment of one sorted run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCut {
    /// The batches before the payload reaches this many bytes (at least one); 0: all.
    pub bytes: u64,
    /// The batches before this sequence number (where the map's next run begins); 0: all.
    pub end_seq: u32,
    /// The attempt every map of the range must have committed (the one the reader's run
    /// starts belong to); `None`: whichever is committed.
    pub attempt: Option<AttemptId>,
}

/// The batches a reducer reads (see [`Partition::snapshot`]).
fn pieces(
    st: &PartitionState,
    start: u32,
    end: u32,
    committed: impl Fn(u32) -> Option<AttemptId>,
    resume: Option<ResumePoint>,
    cut: RunCut,
) -> Vec<Piece> {
    let mut out = Vec::new();
    let lower = Bound::Included((start, AttemptId(0)));
    let upper = Bound::Excluded((end, AttemptId(0)));
    for (&(map, attempt), extents) in st.index.range((lower, upper)) {
        if committed(map) != Some(attempt) {
            continue;
        }
        let mut sent = 0u64;
        for e in extents {
            if let Some(r) = resume {
                if (map, e.seq) <= (r.map_id, r.batch_seq) {
                    continue;
                }
            }
            // A merging reader's segment of this map's run: the batches before its payload
            // reaches `cut.bytes` (at least one) and before the next run, so a map answered
            // with less has no more.
            if (cut.bytes > 0 && sent >= cut.bytes) || (cut.end_seq > 0 && e.seq >= cut.end_seq) {
                break;
            }
            sent += e.len as u64;
            let source = match (&e.data, e.file_offset) {
                (Some(d), _) => Source::Memory(d.clone()),
                (None, Some(off)) if off < st.local_from => Source::Object(off),
                (None, Some(off)) => Source::File(off),
                (None, None) => unreachable!("a batch is in memory or on disk"),
            };
            out.push(Piece {
                map_id: map,
                attempt_id: attempt,
                seq: e.seq,
                len: e.len,
                crc: e.crc,
                source,
            });
        }
    }
    out
}

/// A consistent view of a partition for one fetch.
pub struct ReadView {
    pub pieces: Vec<Piece>,
    /// The data file, open, when a piece is read from it.
    pub file: Option<Arc<std::fs::File>>,
    /// The uploaded segments, when a piece is read from the object store.
    pub segments: Vec<UploadedRange>,
}

#[cfg(test)]
mod tests;
