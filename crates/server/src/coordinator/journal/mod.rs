//! The coordinator's durable state: a snapshot and a write-ahead log in its data
//! directory, so that a restarted coordinator knows every app, shuffle, placement and
//! commit it had acknowledged.
//!
//! Both files are sequences of records:
//!
//! ```text
//! u32 length (of tag + body) | u32 crc32c (of tag + body) | u8 tag | body
//! ```
//!
//! with bodies encoded like protocol messages (see [`record`]). A record is appended
//! before the coordinator answers the request that caused it. Reading stops at the
//! first record that is torn or fails its CRC (a crash in the middle of an append),
//! and the log is cut there.
//!
//! `state.snapshot` holds the whole state as records; `state.wal` holds what happened
//! since. Compaction writes a new snapshot (to a temporary file, synced, then renamed)
//! and starts an empty log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use crossdock_proto::checksum;

pub use record::Record;

pub mod record;

/// Reads the records of a file, up to the first torn or corrupt one. Returns them and
/// the length of the good prefix.
fn read_records(path: &Path) -> io::Result<(Vec<Record>, u64)> {
    let mut raw = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut raw)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    }
    let (out, pos) = decode_records(&raw);
    if pos < raw.len() {
        tracing::warn!(path = %path.display(), good = pos, total = raw.len(), "state file ends in a torn or corrupt record; ignoring the rest");
    }
    Ok((out, pos as u64))
}

/// Decodes the records at the start of `raw` (a whole state file), up to the first torn
/// or corrupt one. Returns them and the length of the good prefix. The byte-level half of
/// [`read_records`], apart so that the fuzzer (`crates/fuzz`) reaches it without a file.
pub fn decode_records(raw: &[u8]) -> (Vec<Record>, usize) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + 8 <= raw.len() {
        let len = u32::from_be_bytes(raw[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_be_bytes(raw[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let Some(body) = raw.get(pos + 8..pos + 8 + len) else {
            break;
        };
        if checksum(body) != crc {
            break;
        }
        match Record::decode(Bytes::copy_from_slice(body)) {
            Ok(r) => out.push(r),
            Err(_) => break,
        }
        pos += 8 + len;
    }
    (out, pos)
}

/// The snapshot and write-ahead log of one coordinator.
///
/// Appends are group-committed: each append writes its records under the log's lock, then
/// makes sure the log is synced up to its own end. One appender at a time syncs, and a
/// sync covers everything written before it started, so appends that arrive while a sync
/// runs share the next one instead of queueing one `fdatasync` each.
pub struct Journal {
    dir: PathBuf,
    wal: Mutex<Wal>,
    /// How far (in bytes ever appended, see [`Wal::appended`]) the log is known to be on
    /// the device. Held while syncing: it is also the syncers' queue.
    synced: Mutex<u64>,
    /// The log's file again (the same open file), synced without holding `wal`.
    sync_file: File,
    /// Sync each append to the device (survives a machine crash, not only a process
    /// crash).
    fsync: bool,
    wal_bytes: AtomicU64,
    appends: AtomicU64,
    syncs: AtomicU64,
}

/// The log file and how much was ever appended to it.
struct Wal {
    file: File,
    /// Bytes appended since the journal was opened, never reset (compaction empties the file
    /// but not this count), so that a position in it names one append for good.
    appended: u64,
}

impl Journal {
    /// Opens the journal in `dir`, returning the records to replay: the snapshot's, then
    /// the log's. A torn tail of the log is cut off.
    pub fn open(dir: &Path, fsync: bool) -> io::Result<(Journal, Vec<Record>)> {
        std::fs::create_dir_all(dir)?;
        let (mut records, _) = read_records(&dir.join("state.snapshot"))?;
        let wal_path = dir.join("state.wal");
        let (logged, good) = read_records(&wal_path)?;
        records.extend(logged);
        let wal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&wal_path)?;
        wal.set_len(good)?;
        let sync_file = wal.try_clone()?;
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                wal: Mutex::new(Wal {
                    file: wal,
                    appended: 0,
                }),
                synced: Mutex::new(0),
                sync_file,
                fsync,
                wal_bytes: AtomicU64::new(good),
                appends: AtomicU64::new(0),
                syncs: AtomicU64::new(0),
            },
            records,
        ))
    }

    /// Appends records (one write) before the change they describe is acknowledged; with
    /// `fsync`, returns once they are on the device (group commit, see [`Journal`]).
    pub fn append(&self, records: &[Record]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in records {
            r.encode(&mut buf);
        }
        let end = {
            let mut wal = self.wal.lock().expect("journal lock poisoned");
            wal.file.write_all(&buf)?;
            wal.appended += buf.len() as u64;
            wal.appended
        };
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.wal_bytes
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        if self.fsync {
            let mut synced = self.synced.lock().expect("journal sync lock poisoned");
            if *synced < end {
                // Everything written until now rides on this sync, ours included.
                let upto = self.wal.lock().expect("journal lock poisoned").appended;
                self.sync_file.sync_data()?;
                *synced = upto;
                self.syncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Whether each append waits for the device (the coordinator's `--fsync`).
    pub fn syncs(&self) -> bool {
        self.fsync
    }

    /// The syncers' lock, held by a test as a long sync would hold it.
    #[cfg(test)]
    pub(crate) fn sync_lock(&self) -> std::sync::MutexGuard<'_, u64> {
        self.synced.lock().expect("journal sync lock poisoned")
    }

    /// Appends so far, and the syncs they took (fewer when appends were grouped).
    pub fn appends_and_syncs(&self) -> (u64, u64) {
        (
            self.appends.load(Ordering::Relaxed),
            self.syncs.load(Ordering::Relaxed),
        )
    }

    /// Bytes in the log since the last snapshot.
    pub fn wal_bytes(&self) -> u64 {
        self.wal_bytes.load(Ordering::Relaxed)
    }

    /// Replaces snapshot and log with `state` (the whole current state).
    pub fn compact(&self, state: &[Record]) -> io::Result<()> {
        self.compact_with(|| state.to_vec())
    }

    /// Replaces snapshot and log with the state `snapshot` returns, taken while appends
    /// wait: a change applied in memory before the snapshot is in it, one applied after
    /// is appended to the new log, so none is lost.
    pub fn compact_with(&self, snapshot: impl FnOnce() -> Vec<Record>) -> io::Result<()> {
        // The sync lock first, as appends take it (they never hold the log's while waiting).
        let mut synced = self.synced.lock().expect("journal sync lock poisoned");
        let wal = self.wal.lock().expect("journal lock poisoned");
        let state = snapshot();
        let mut buf = Vec::new();
        for r in &state {
            r.encode(&mut buf);
        }
        let tmp = self.dir.join("state.snapshot.tmp");
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&buf)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, self.dir.join("state.snapshot"))?;
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        wal.file.set_len(0)?;
        wal.file.sync_all()?;
        // Every append so far is in the synced snapshot.
        *synced = wal.appended;
        self.wal_bytes.store(0, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossdock_proto::{AttemptId, PartitionStat};

    fn samples() -> Vec<Record> {
        vec![
            Record::Worker {
                id: 3,
                addr: "10.0.0.1:7001".into(),
                incarnation: 99,
            },
            Record::App {
                app_id: "a".into(),
                lease_ms: 5000,
                stored_quota: crossdock_proto::codec::Appended::of(1 << 30),
                memory_share_ppm: crossdock_proto::codec::Appended::of(250_000),
            },
            Record::Shuffle {
                app_id: "a".into(),
                shuffle_id: 1,
                num_maps: 2,
                num_partitions: 2,
                primary: vec![3, 3],
                replica: vec![u32::MAX, u32::MAX],
            },
            Record::Commit {
                app_id: "a".into(),
                shuffle_id: 1,
                map_id: 0,
                attempt_id: AttemptId(7),
                stats: vec![PartitionStat {
                    partition: 1,
                    bytes: 10,
                    records: 2,
                }],
                run_starts: crossdock_proto::codec::Appended(Some(vec![
                    crossdock_proto::RunStart {
                        partition: 1,
                        batch_seq: 3,
                    },
                ])),
            },
            Record::Revoke {
                app_id: "a".into(),
                shuffle_id: 1,
                maps: vec![0],
            },
            Record::Layout {
                app_id: "a".into(),
                shuffle_id: 1,
                primary: vec![4, 4],
                replica: vec![u32::MAX, u32::MAX],
            },
            Record::ShuffleGone {
                app_id: "a".into(),
                shuffle_id: 1,
            },
            Record::AppGone { app_id: "a".into() },
        ]
    }

    #[test]
    fn records_survive_a_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (j, replay) = Journal::open(dir.path(), true).unwrap();
        assert!(replay.is_empty());
        j.append(&samples()).unwrap();
        drop(j);
        // A crash in the middle of an append leaves half a record.
        let wal = dir.path().join("state.wal");
        let mut f = OpenOptions::new().append(true).open(&wal).unwrap();
        f.write_all(&[0, 0, 0, 40, 1, 2]).unwrap();
        drop(f);
        let (j, replay) = Journal::open(dir.path(), true).unwrap();
        assert_eq!(replay, samples());
        j.append(&[Record::AppGone { app_id: "b".into() }]).unwrap();
        drop(j);
        let (_, replay) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(
            replay.len(),
            samples().len() + 1,
            "appends go after the cut"
        );
    }

    #[test]
    fn compaction_replaces_log_with_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), false).unwrap();
        j.append(&samples()).unwrap();
        let state = vec![samples()[0].clone()];
        j.compact(&state).unwrap();
        assert_eq!(j.wal_bytes(), 0);
        j.append(&[samples()[1].clone()]).unwrap();
        drop(j);
        let (_, replay) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(replay, vec![samples()[0].clone(), samples()[1].clone()]);
    }

    #[test]
    fn appends_waiting_behind_a_sync_share_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), true).unwrap();
        let j = std::sync::Arc::new(j);
        // Stand in for a sync in progress: hold the syncers' lock while 8 appends write.
        let syncing = j.synced.lock().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let j = j.clone();
                std::thread::spawn(move || {
                    j.append(&[Record::AppGone {
                        app_id: format!("app-{t}"),
                    }])
                    .unwrap();
                })
            })
            .collect();
        while j.appends_and_syncs().0 < 8 {
            std::thread::yield_now();
        }
        drop(syncing);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            j.appends_and_syncs(),
            (8, 1),
            "the first appender's sync covers all 8"
        );
        drop(j);
        let (_, replay) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(replay.len(), 8);
    }

    #[test]
    fn concurrent_appends_all_survive_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), true).unwrap();
        let j = std::sync::Arc::new(j);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let j = j.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        j.append(&[Record::AppGone {
                            app_id: format!("{t}-{i}"),
                        }])
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(j.appends_and_syncs().0, 400);
        drop(j);
        let (_, replay) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(replay.len(), 400);
        for t in 0..8 {
            let mine: Vec<_> = replay
                .iter()
                .filter_map(|r| match r {
                    Record::AppGone { app_id } if app_id.starts_with(&format!("{t}-")) => {
                        Some(app_id.clone())
                    }
                    _ => None,
                })
                .collect();
            let want: Vec<_> = (0..50).map(|i| format!("{t}-{i}")).collect();
            assert_eq!(mine, want, "one thread's appends stay in order");
        }
    }

    #[test]
    fn an_append_after_compaction_is_synced_again() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), true).unwrap();
        j.append(&samples()[..1]).unwrap();
        j.compact(&samples()[..1]).unwrap();
        j.append(&samples()[1..2]).unwrap();
        assert_eq!(j.appends_and_syncs(), (2, 2));
    }

    #[test]
    fn a_flipped_bit_stops_the_replay_there() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), false).unwrap();
        j.append(&samples()[..2]).unwrap();
        drop(j);
        let wal = dir.path().join("state.wal");
        let mut raw = std::fs::read(&wal).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        std::fs::write(&wal, raw).unwrap();
        let (_, replay) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(replay, samples()[..1].to_vec());
    }
}
