//! Helpers shared by the tests that run the `crossdock` binary as real processes.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const EXE: &str = env!("CARGO_BIN_EXE_crossdock");

/// A `crossdock standalone` of one 64 MiB worker with its metrics served, as the tests that
/// probe one service start it: its process and the addresses it printed.
pub struct Standalone {
    pub proc: Proc,
    pub coordinator: String,
    pub worker: String,
    /// `host:port` of the `/metrics` endpoint.
    pub metrics: String,
}

/// Starts a [`Standalone`] with `extra` arguments; its data lives in the returned
/// directory.
pub fn standalone(extra: &[&str]) -> (Standalone, tempfile::TempDir) {
    standalone_of("1", extra)
}

/// A [`Standalone`] of `workers` workers of 64 MiB (its `worker` is the first).
pub fn standalone_of(workers: &str, extra: &[&str]) -> (Standalone, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "standalone",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        workers,
        "--memory",
        "64MiB",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--metrics-listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let proc = Proc::start(&args);
    let coordinator = proc.wait_line("crossdock standalone listening on ");
    let worker = proc.wait_line("worker 0 listening on ");
    let metrics = proc
        .wait_line("metrics on ")
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_string();
    let sa = Standalone {
        proc,
        coordinator,
        worker,
        metrics,
    };
    (sa, dir)
}

/// A child process that is killed if the test fails before stopping it.
pub struct Proc {
    pub child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Proc {
    pub fn start(args: &[&str]) -> Proc {
        let mut child = Command::new(EXE)
            .args(args)
            .env("CROSSDOCK_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("crossdock starts");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Proc { child, lines }
    }

    /// The rest of the first stdout line that starts with `prefix`.
    pub fn wait_line(&self, prefix: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no line starting with '{prefix}'"));
            if let Some(rest) = line.strip_prefix(prefix) {
                return rest.split_whitespace().next().unwrap_or("").to_string();
            }
        }
    }

    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "process did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn run(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("CROSSDOCK_LOG", "warn")
        .output()
        .unwrap()
}

/// `crossdock bench push-fetch --json` against the cluster at `coordinator`: `bytes`
/// over 4 maps and 8 partitions in 256 KiB batches, `runs` times.
pub fn push_fetch(coordinator: &str, bytes: &str, runs: &str) -> Output {
    run(&[
        "bench",
        "push-fetch",
        "--coordinator",
        coordinator,
        "--bytes",
        bytes,
        "--maps",
        "4",
        "--partitions",
        "8",
        "--batch-size",
        "256KiB",
        "--runs",
        runs,
        "--json",
    ])
}

pub fn bench_json(out: &Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap()).expect("last line is JSON")
}

pub fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body
}

pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Registers `app_id` at `coordinator` with one shuffle of one map and one partition, and
/// pushes and commits `bytes` into it, so that the service holds data of the app (its
/// per-app metrics have a series) until the lease of ten minutes runs out.
pub fn hold_app_data(coordinator: &str, app_id: &str, bytes: usize) {
    use crossdock_client::{CoordinatorClient, Keyring, WorkerClient};
    use crossdock_proto::{checksum, AttemptId, CommitStatus, PartitionStat, PushHeader};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let coord = CoordinatorClient::connect(coordinator, &Keyring::new())
            .await
            .unwrap();
        coord.register_app(app_id, 600_000).await.unwrap();
        let placement = coord.register_shuffle(app_id, 0, 1, 1).await.unwrap();
        let w = placement.worker_of(0).unwrap();
        let client = WorkerClient::connect(&w.addr, coord.keyring())
            .await
            .unwrap();
        let data = vec![7u8; bytes];
        let header = PushHeader {
            app_id: app_id.to_string(),
            shuffle_id: 0,
            partition: 0,
            map_id: 0,
            attempt_id: AttemptId(0),
            batch_seq: 0,
            crc32c: checksum(&data),
        };
        let pending = client.push(&header, &data).await.unwrap();
        client.finish_push(pending).await.unwrap();
        let stat = PartitionStat {
            partition: 0,
            bytes: bytes as u64,
            records: 1,
        };
        let (status, _) = coord
            .commit_map(app_id, 0, 0, AttemptId(0), vec![stat])
            .await
            .unwrap();
        assert_eq!(status, CommitStatus::Committed);
    });
}
