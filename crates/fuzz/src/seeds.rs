//! The seeds every run starts from: the shared protocol vectors (`testdata/protocol/`,
//! the frames every implementation agrees on, valid and invalid) and what the real
//! encoders write (journal records, stored records, `shuffle.meta`). A fuzzer that starts
//! from valid inputs reaches the decoders' deep paths at once instead of guessing the
//! magic numbers, lengths and CRCs first.

use bytes::BufMut;
use crossdock_proto::auth::{proof, ClusterSecret};
use crossdock_proto::message::hex_bytes::from_hex;
use crossdock_proto::{checksum, AttemptId, Message, PartitionStat, HEADER_LEN};
use crossdock_server::coordinator::journal::Record;
use crossdock_server::worker::storage::layout::ShuffleMeta;
use crossdock_server::worker::storage::record::RecordHeader;

use crate::Target;

/// The shared vectors, read when this crate is built (a change of the file rebuilds it).
const VECTORS: &str = include_str!("../../../testdata/protocol/vectors.json");
/// The shared authentication vectors.
const AUTH: &str = include_str!("../../../testdata/protocol/auth.json");

/// The seeds of `target`, each a whole input.
pub fn seeds(target: Target) -> Vec<Vec<u8>> {
    match target {
        Target::Frame => frames(),
        Target::Message => frames()
            .iter()
            .filter(|f| f.len() >= HEADER_LEN)
            .map(|f| {
                let mut m = vec![f[5]];
                m.extend_from_slice(&f[HEADER_LEN..]);
                m
            })
            .collect(),
        Target::Stream => streams(),
        Target::Record => stored_records(),
        Target::JournalRecord => journal_records()
            .iter()
            .map(|r| {
                let mut framed = Vec::new();
                r.encode(&mut framed);
                framed.split_off(8)
            })
            .collect(),
        Target::Journal => journals(),
        Target::ShuffleMeta => metas(),
    }
}

fn hex_field(v: &serde_json::Value, key: &str) -> Vec<u8> {
    let text = v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is a hex string"));
    from_hex(text).unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// Every frame of `vectors.json` (valid and invalid), and the handshake's frames built
/// from `auth.json`.
fn frames() -> Vec<Vec<u8>> {
    let v: serde_json::Value = serde_json::from_str(VECTORS).expect("vectors.json is JSON");
    let mut out: Vec<Vec<u8>> = ["frames", "invalid"]
        .iter()
        .flat_map(|list| v[list].as_array().expect("a list of frames").iter())
        .map(|f| hex_field(f, "hex"))
        .collect();
    let a: serde_json::Value = serde_json::from_str(AUTH).expect("auth.json is JSON");
    let secret = hex_field(&a, "secret");
    let app_id = a["app_id"].as_str().expect("app_id").to_string();
    let nonce = hex_field(&a, "nonce");
    let token = ClusterSecret::from_bytes(&secret)
        .expect("the vectors' secret is long enough")
        .app_token(&app_id);
    let handshake = [
        Message::Hello,
        Message::Challenge {
            nonce: nonce.clone().into(),
        },
        Message::Authenticate {
            proof: proof(&token, &nonce, &app_id),
            app_id: app_id.clone(),
        },
        Message::AppRegistered { token },
    ];
    out.extend(handshake.iter().map(|m| m.encode_frame(77)));
    out
}

/// Connections' byte streams: every valid frame in one stream, the handshake alone, and
/// pushes one after another.
fn streams() -> Vec<Vec<u8>> {
    let all = frames();
    let valid = |f: &&Vec<u8>| Message::decode_frame(f).is_ok();
    let pushes: Vec<&Vec<u8>> = all
        .iter()
        .filter(valid)
        .filter(|f| f[5] == crossdock_proto::MessageKind::PushBatch as u8)
        .collect();
    vec![
        all.iter().filter(valid).flatten().copied().collect(),
        all[all.len() - 4..].concat(),
        pushes.iter().copied().flatten().copied().collect(),
        // A stream that ends inside its second frame.
        {
            let mut s = all
                .iter()
                .filter(valid)
                .take(2)
                .flatten()
                .copied()
                .collect::<Vec<_>>();
            s.truncate(s.len() - 3);
            s
        },
    ]
}

/// One stored record, as a partition file holds it.
fn stored_record(map: u32, attempt: AttemptId, seq: u32, payload: &[u8]) -> Vec<u8> {
    let h = RecordHeader {
        map,
        attempt,
        seq,
        len: payload.len() as u32,
        crc: checksum(payload),
    };
    let mut out = h.encode().to_vec();
    out.extend_from_slice(payload);
    out
}

/// Partition files: single records, several in a row, and a torn tail.
fn stored_records() -> Vec<Vec<u8>> {
    let long: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let one = stored_record(3, AttemptId::new(1, 0), 9, b"payload");
    let empty = stored_record(0, AttemptId(0), 0, b"");
    let big = stored_record(7, AttemptId::new(0, 2), 1, &long);
    let file = [one.clone(), empty.clone(), big.clone()].concat();
    let torn = [one.clone(), big[..40].to_vec()].concat();
    vec![one, empty, big, file, torn]
}

/// A record of every kind of the coordinator's journal.
fn journal_records() -> Vec<Record> {
    let stats = vec![
        PartitionStat {
            partition: 1,
            bytes: 10,
            records: 2,
        },
        PartitionStat {
            partition: 0,
            bytes: u64::MAX,
            records: 0,
        },
    ];
    vec![
        Record::Worker {
            id: 3,
            addr: "10.0.0.1:7001".into(),
            incarnation: 99,
        },
        Record::App {
            app_id: "app-1".into(),
            lease_ms: 60_000,
            stored_quota: crossdock_proto::codec::Appended::of(1 << 30),
            memory_share_ppm: crossdock_proto::codec::Appended::of(500_000),
        },
        Record::AppGone {
            app_id: "app-1".into(),
        },
        Record::Shuffle {
            app_id: "app-1".into(),
            shuffle_id: 1,
            num_maps: 2,
            num_partitions: 3,
            primary: vec![3, 3, 4],
            replica: vec![4, u32::MAX, 3],
        },
        Record::Layout {
            app_id: "app-1".into(),
            shuffle_id: 1,
            primary: vec![4, 4, 4],
            replica: vec![u32::MAX; 3],
        },
        Record::Commit {
            app_id: "app-1".into(),
            shuffle_id: 1,
            map_id: 0,
            attempt_id: AttemptId::new(0, 1),
            stats,
            run_starts: crossdock_proto::Appended(Some(vec![crossdock_proto::RunStart {
                partition: 1,
                batch_seq: 2,
            }])),
        },
        Record::Revoke {
            app_id: "app-1".into(),
            shuffle_id: 1,
            maps: vec![0, 1],
        },
        Record::ShuffleGone {
            app_id: "app-1".into(),
            shuffle_id: 1,
        },
    ]
}

/// State files: every record in one, each alone, and a log with a torn tail.
fn journals() -> Vec<Vec<u8>> {
    let records = journal_records();
    let mut all = Vec::new();
    for r in &records {
        r.encode(&mut all);
    }
    let mut out: Vec<Vec<u8>> = records
        .iter()
        .map(|r| {
            let mut one = Vec::new();
            r.encode(&mut one);
            one
        })
        .collect();
    let mut torn = all.clone();
    torn.put_slice(&[0, 0, 0, 40, 1, 2]);
    out.push(all);
    out.push(torn);
    out
}

/// `shuffle.meta` files: as written for ids that need encoding and ids that do not,
/// and in the form of earlier versions (the id as given).
fn metas() -> Vec<Vec<u8>> {
    let meta = |app_id: &str| ShuffleMeta {
        app_id: app_id.into(),
        shuffle_id: 7,
        num_maps: 200,
        num_partitions: 4096,
    };
    let mut out: Vec<Vec<u8>> = ["app-20261123-0001", "..", "a/b\nc", "アプリ %2F"]
        .iter()
        .map(|id| meta(id).to_text().into_bytes())
        .collect();
    out.push(b"app.1\n0\n1\n1\n".to_vec());
    out.push(b"3.data\n".to_vec());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_has_seeds_and_the_valid_ones_decode() {
        for t in Target::ALL {
            assert!(seeds(t).len() >= 3, "{}", t.name());
        }
        let frames = frames();
        let decoded = frames
            .iter()
            .filter(|f| Message::decode_frame(f).is_ok())
            .count();
        assert!(decoded >= 38, "the vectors' valid frames and the handshake");
        for r in seeds(Target::JournalRecord) {
            Record::decode(r.into()).unwrap();
        }
        for m in seeds(Target::ShuffleMeta).iter().take(5) {
            ShuffleMeta::parse(std::str::from_utf8(m).unwrap()).unwrap();
        }
    }
}
