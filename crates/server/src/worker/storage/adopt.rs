//! Adoption: a partition whose every copy was lost is restored by its new worker from
//! the segments any worker uploaded of it.

use std::sync::atomic::Ordering;

use crossdock_proto::AttemptId;

use super::error::StorageError;
use super::metrics::StorageMetrics;
use super::object::{ObjectTier, Segment};
use super::partition::{Insert, Partition};
use super::record::{self, Parsed};
use super::shuffle::Shuffle;
use crate::memory::MemoryBudget;

/// Bytes of a segment read at a time.
const ADOPT_READ: u64 = 8 << 20;

/// What an adoption reads from and stores into.
pub struct Adoption<'a> {
    pub object: &'a ObjectTier,
    pub budget: &'a MemoryBudget,
    pub metrics: &'a StorageMetrics,
}

impl Adoption<'_> {
    /// Restores `partitions` (placed here, every copy lost): the records of the
    /// attempts in `map_attempts` are stored as if pushed (duplicates dropped). Returns
    /// the partitions that now hold exactly `expected` bytes of those attempts. The
    /// partitions are not served meanwhile, nor after: the coordinator decides what
    /// counts and then says so with `CheckCopies` (this call takes no commits, so one
    /// that ends after the coordinator gave up on it changes nothing that is read).
    pub async fn run(
        &self,
        shuffle: &Shuffle,
        map_attempts: &[AttemptId],
        partitions: &[u32],
        expected: &[u64],
    ) -> Result<Vec<u32>, StorageError> {
        for &p in partitions {
            let Some(part) = shuffle.partition(p) else {
                continue;
            };
            part.restoring.store(true, Ordering::Release);
            let segments = self
                .object
                .segments(&shuffle.app_id, shuffle.shuffle_id, p)
                .await?;
            let mut restored = 0u64;
            for seg in &segments {
                restored += self.restore_segment(seg, &part, map_attempts).await?;
            }
            StorageMetrics::add(&self.metrics.adopted_bytes, restored);
            shuffle.accepted.fetch_add(restored, Ordering::Relaxed);
            tracing::info!(app = %shuffle.app_id, shuffle_id = shuffle.shuffle_id, partition = p, segments = segments.len(), restored, "restored a partition from the object store");
        }
        Ok(shuffle.held_whole(map_attempts, partitions, expected))
    }

    /// Reads one segment in pieces of [`ADOPT_READ`] bytes and stores the committed
    /// attempts' records it holds into `part`. A record that fails its check ends the
    /// segment (the copy check then tells what is missing). Returns the payload bytes
    /// stored.
    async fn restore_segment(
        &self,
        seg: &Segment,
        part: &Partition,
        map_attempts: &[AttemptId],
    ) -> Result<u64, StorageError> {
        let size = self.object.size(&seg.key).await?;
        let (mut at, mut buf, mut restored) = (0u64, Vec::<u8>::new(), 0u64);
        loop {
            let mut pos = 0;
            while let Parsed::Record(r) = record::parse(&buf[pos..]) {
                let end = pos + r.payload.end;
                let h = r.header;
                if map_attempts.get(h.map as usize) == Some(&h.attempt) {
                    let payload = bytes::Bytes::copy_from_slice(&buf[pos + r.payload.start..end]);
                    let n = payload.len() as u64;
                    self.budget.take(&part.app_id, n).await;
                    match part.insert(h.map, h.attempt, h.seq, h.crc, payload) {
                        Insert::Stored => restored += n,
                        _ => self.budget.give_back(&part.app_id, n),
                    }
                }
                pos = end;
            }
            let bad = record::parse(&buf[pos..]) == Parsed::Bad;
            buf.drain(..pos);
            if bad || at >= size {
                if bad || !buf.is_empty() {
                    tracing::warn!(key = %seg.key, offset = at - buf.len() as u64, "segment holds a bad or cut record; the rest of it is skipped");
                }
                return Ok(restored);
            }
            let n = (size - at).min(ADOPT_READ);
            let more = self.object.read_range(&seg.key, at..at + n).await?;
            buf.extend_from_slice(&more);
            at += n;
        }
    }
}
