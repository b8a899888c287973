//! Peers that hold resources instead of using them, against a real `crossdock
//! standalone` process: stalled connections, half-sent large frames, silent sockets and
//! more connections than a host may open. Each must be bounded (connections refused
//! with `limit_exceeded`, stalled ones cut, the process's memory flat) while a
//! well-behaved client, running its shuffle at the same time, is served in full.

mod common;

use std::time::{Duration, Instant};

use common::{bench_json, http_get, metric, push_fetch, standalone};
use crossdock_proto::{FrameHeader, Message, MessageKind, HEADER_LEN, MAX_CONTROL_FRAME};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const MIB: u64 = 1 << 20;

/// The resident set of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib << 10
}

/// A connection to `to` from the loopback address `from` (127.0.0.0/8 is all
/// loopback, so each address is a different peer host to the server).
async fn connect_from(from: &str, to: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to.parse().unwrap()).await.unwrap()
}

/// What the server sends before closing: (error codes of the frames it sent, whether
/// it closed) within `wait`.
async fn last_words(s: &mut TcpStream, wait: Duration) -> (Vec<u16>, bool) {
    let mut got = Vec::new();
    let mut codes = Vec::new();
    let deadline = tokio::time::Instant::now() + wait;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return (codes, false),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
    let mut rest = &got[..];
    while rest.len() >= HEADER_LEN {
        let h = FrameHeader::decode(rest[..HEADER_LEN].try_into().unwrap()).unwrap();
        let end = HEADER_LEN + h.body_len as usize;
        let body = bytes::Bytes::copy_from_slice(&rest[HEADER_LEN..end]);
        if let Ok(Message::Error { code, .. }) = Message::decode(h.kind, body) {
            codes.push(code);
        }
        rest = &rest[end..];
    }
    (codes, true)
}

const LIMIT_EXCEEDED: u16 = crossdock_proto::ErrorCode::LimitExceeded as u16;

/// A real shuffle pushed and fetched through the cluster, its bytes checked.
async fn good_client(coordinator: &str) {
    let coordinator = coordinator.to_string();
    let out = tokio::task::spawn_blocking(move || push_fetch(&coordinator, "16MiB", "1"))
        .await
        .unwrap();
    assert_eq!(bench_json(&out)["verified"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_and_half_sent_frames_are_cut_and_hold_no_memory() {
    // The read timeout leaves room to open the 1,100 connections on a loaded machine
    // (a debug build under `make test`) before the first ones are cut.
    let (c, _dir) = standalone(&[
        "--read-timeout",
        "12s",
        "--idle-timeout",
        "16s",
        "--frame-memory",
        "64MiB",
    ]);
    let pid = c.proc.child.id();
    good_client(&c.coordinator).await;
    let before = rss(pid);

    // 1,000 connections that begin a frame and stall, half to each server.
    let mut stalled = Vec::new();
    for i in 0..1000 {
        let to = if i % 2 == 0 {
            &c.coordinator
        } else {
            &c.worker
        };
        let mut s = connect_from("127.0.0.2", to).await;
        let head = FrameHeader::new(MessageKind::RegisterApp as u8, 1, 100).encode();
        s.write_all(&head[..5]).await.unwrap();
        stalled.push(s);
    }
    // 100 connections that announce a 64 MiB request and send half of it.
    let half = std::sync::Arc::new(vec![0xA5u8; (MAX_CONTROL_FRAME / 2) as usize]);
    let mut half_sent = Vec::new();
    for i in 0..100 {
        let to = if i % 2 == 0 {
            &c.coordinator
        } else {
            &c.worker
        };
        let s = connect_from("127.0.0.3", to).await;
        let (r, mut w) = s.into_split();
        let half = half.clone();
        half_sent.push(tokio::spawn(async move {
            let head = FrameHeader::new(MessageKind::CommitMap as u8, 7, MAX_CONTROL_FRAME);
            // The server may stop reading (no room for the frame) or cut us off.
            let sent = async {
                w.write_all(&head.encode()).await?;
                w.write_all(&half).await
            };
            let _ = tokio::time::timeout(Duration::from_secs(30), sent).await;
            let mut s = r.reunite(w).unwrap();
            last_words(&mut s, Duration::from_secs(30)).await
        }));
    }
    // A silent connection: only the idle timeout applies to it.
    let mut silent = connect_from("127.0.0.4", &c.coordinator).await;
    let set_up = Instant::now();

    // Every connection was accepted by the kernel; wait (within the read timeout) until
    // the servers have taken them all in, however slow the loaded machine.
    let open = loop {
        let text = http_get(&c.metrics, "/metrics");
        let open = metric(&text, "crossdock_coordinator_connections_open")
            + metric(&text, "crossdock_worker_connections_open");
        if open >= 1100 || set_up.elapsed() > Duration::from_secs(8) {
            break open;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        open >= 1100,
        "the attack's connections are open: {open} ({:?} after setting up)",
        set_up.elapsed()
    );
    let held = rss(pid);
    // The well-behaved client is served while all of that is held.
    good_client(&c.coordinator).await;
    let peak = held.max(rss(pid));
    // What the attack may hold: the frames admitted on the two servers (64 MiB of
    // frame memory each), plus 64 MiB for everything else.
    let bound = 2 * 64 * MIB + 64 * MIB;
    println!(
        "rss before {} MiB, with the attack held {} MiB, peak while also serving {} MiB \
         (+{} MiB; bound +{} MiB)",
        before / MIB,
        held / MIB,
        peak / MIB,
        peak.saturating_sub(before) / MIB,
        bound / MIB
    );
    assert!(
        peak <= before + bound,
        "resident set grew from {} to {} MiB",
        before / MIB,
        peak / MIB
    );

    // Cut off: every stalled connection after the read timeout (12 s)...
    for s in &mut stalled {
        let (codes, closed) = last_words(s, Duration::from_secs(30)).await;
        assert!(closed, "a stalled connection is closed");
        assert!(
            codes.is_empty(),
            "a stalled peer is just cut off: {codes:?}"
        );
    }
    // ...and every half-sent frame: the admitted ones stalled, the others refused for
    // want of room, with a reason.
    let mut refused = 0;
    for h in half_sent {
        let (codes, closed) = h.await.unwrap();
        assert!(closed, "a half-sent frame's connection is closed");
        assert!(codes.iter().all(|&c| c == LIMIT_EXCEEDED), "{codes:?}");
        refused += codes.len();
    }
    assert!(refused > 0, "frames that found no room were refused");
    // The silent connection lasts until the idle timeout (16 s), not the read timeout.
    let (_, closed) = last_words(&mut silent, Duration::from_secs(30)).await;
    assert!(closed, "an idle connection is closed");

    let text = http_get(&c.metrics, "/metrics");
    let timed_out = metric(&text, "crossdock_coordinator_connections_timed_out_total")
        + metric(&text, "crossdock_worker_connections_timed_out_total");
    assert!(timed_out >= 1001, "timeouts counted: {timed_out}");
    // Still serving.
    good_client(&c.coordinator).await;
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_over_its_connection_limit_is_told_why_and_others_are_served() {
    let (c, _dir) = standalone(&["--max-connections-per-peer", "20"]);
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(connect_from("127.0.0.2", &c.coordinator).await);
    }
    let mut extra = connect_from("127.0.0.2", &c.coordinator).await;
    let (codes, closed) = last_words(&mut extra, Duration::from_secs(5)).await;
    assert!(closed, "the 21st connection is closed");
    assert_eq!(codes, vec![LIMIT_EXCEEDED], "and told why");
    // Another host is served meanwhile.
    good_client(&c.coordinator).await;
    let text = http_get(&c.metrics, "/metrics");
    assert_eq!(
        metric(&text, "crossdock_coordinator_connections_refused_total"),
        1
    );
    // Places freed are places again, once the server has seen the ten connections close
    // (it may be slow to on a loaded machine: until then it refuses for the limit).
    held.truncate(10);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut again = connect_from("127.0.0.2", &c.coordinator).await;
        let (codes, closed) = last_words(&mut again, Duration::from_millis(500)).await;
        if !closed && codes.is_empty() {
            break;
        }
        assert_eq!(codes, vec![LIMIT_EXCEEDED], "refused for another reason");
        assert!(Instant::now() < deadline, "freed places never served again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
