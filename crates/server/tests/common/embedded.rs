//! A coordinator and its workers in one process (`crossdock standalone`), for the
//! service tests, and the helpers that drive it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use crossdock_client::{ClientError, CoordinatorClient, Keyring, Placement};
use crossdock_proto::io::{read_exact_bytes, read_header};
use crossdock_proto::{AttemptId, ErrorCode, FrameHeader, Message};
use crossdock_server::standalone::{Standalone, StandaloneConfig};
use crossdock_server::worker::Worker;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::{payload, push_batch, read_batches, reader, stat};

/// A standalone cluster of `workers` workers with memory `memory` each.
pub struct Cluster {
    pub sa: Standalone,
    pub coord: CoordinatorClient,
    _stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start(workers: u32, memory: u64) -> Cluster {
        Cluster::start_configured(workers, memory, Keyring::new(), |_| {}).await
    }

    /// As [`Cluster::start`], every server with the connection limits `limits`.
    pub async fn start_with_limits(
        workers: u32,
        memory: u64,
        limits: crossdock_server::limits::ConnLimits,
    ) -> Cluster {
        Cluster::start_configured(workers, memory, Keyring::new(), |cfg| cfg.limits = limits).await
    }

    /// As [`Cluster::start`], with `configure` applied to the cluster's settings and the
    /// coordinator client opened with `keys` (e.g. the trust of a cluster with TLS).
    pub async fn start_configured(
        workers: u32,
        memory: u64,
        keys: Keyring,
        configure: impl FnOnce(&mut StandaloneConfig),
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (stop, shutdown) = tokio::sync::watch::channel(false);
        let mut cfg = StandaloneConfig {
            listen: "127.0.0.1:0".into(),
            workers,
            memory,
            data_dir: dir.path().to_path_buf(),
            worker_timeout: Duration::from_secs(10),
            replication: 1,
            durability: crossdock_proto::Durability::Memory,
            object_store: None,
            disk_quota: None,
            limits: Default::default(),
            quotas: Default::default(),
            prediction_threshold:
                crossdock_server::coordinator::config::DEFAULT_PREDICTION_THRESHOLD,
            rebalance: false,
            secret: Some(super::secret()),
            tls: None,
            tenancy: Default::default(),
            split_bytes: crossdock_server::worker::config::DEFAULT_SPLIT_BYTES,
            memory_only: false,
            zero_copy_fetch: true,
        };
        configure(&mut cfg);
        let sa = Standalone::start(cfg, shutdown).await.unwrap();
        let coord = CoordinatorClient::connect(&sa.coordinator.addr.to_string(), &keys)
            .await
            .unwrap();
        Cluster {
            sa,
            coord,
            _stop: stop,
            _dir: dir,
        }
    }

    pub async fn shuffle(&self, app: &str, maps: u32, partitions: u32) -> Placement {
        self.coord.register_app(app, 60_000).await.unwrap();
        self.coord
            .register_shuffle(app, 0, maps, partitions)
            .await
            .unwrap()
    }

    /// The coordinator's `/metrics` page, as Prometheus scrapes it: served on a port of
    /// its own until the cluster stops, and read with a plain HTTP GET.
    pub async fn coordinator_metrics(&self) -> String {
        use tokio::io::AsyncReadExt;
        let sources: Vec<Arc<dyn crossdock_server::metrics::Render>> =
            vec![self.sa.coordinator.clone()];
        let addr = crossdock_server::metrics::serve(
            "127.0.0.1:0",
            sources,
            Default::default(),
            self._stop.subscribe(),
        )
        .await
        .unwrap();
        let mut s = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let mut page = String::new();
        s.read_to_string(&mut page).await.unwrap();
        assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
        page
    }

    pub fn worker_for(&self, placement: &Placement, partition: u32) -> Arc<Worker> {
        let addr = &placement.worker_of(partition).unwrap().addr;
        self.sa
            .workers
            .iter()
            .find(|w| &w.addr.to_string() == addr)
            .unwrap()
            .clone()
    }
}

/// Pushes one batch to the primary of `partition`.
pub async fn push(
    placement: &Placement,
    app: &str,
    partition: u32,
    map: u32,
    attempt: u32,
    seq: u32,
    data: &[u8],
) -> Result<(), ClientError> {
    let addr = &placement.worker_of(partition).unwrap().addr;
    push_batch(addr, app, partition, (map, attempt, seq), data).await
}

/// Reads maps `[start, end)` of `partition` from its primary: (map, seq, payload).
pub async fn read_all(
    placement: &Placement,
    app: &str,
    partition: u32,
    start: u32,
    end: u32,
) -> Result<Vec<(u32, u32, Bytes)>, ClientError> {
    let addr = &placement.worker_of(partition).unwrap().addr;
    read_batches(reader(addr, app, partition, start, end)).await
}

/// Sends raw bytes to `addr` and reads one response frame.
pub async fn raw_exchange(addr: &str, bytes: &[u8]) -> Option<(FrameHeader, Message)> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let h = read_header(&mut s).await.ok()??;
    let body = read_exact_bytes(&mut s, h.body_len as usize).await.ok()?;
    Some((h, Message::decode(h.kind, body).unwrap()))
}

pub fn assert_code<T: std::fmt::Debug>(r: Result<T, ClientError>, code: ErrorCode) {
    match r {
        Err(e) => assert_eq!(e.code(), Some(code), "wrong error: {e}"),
        Ok(v) => panic!("expected {code}, got Ok({v:?})"),
    }
}

pub fn assert_error_frame(reply: Option<(FrameHeader, Message)>, code: ErrorCode) {
    match reply {
        Some((_, Message::Error { code: c, message })) => {
            assert_eq!(c, code.as_u16(), "{message}");
            assert!(!message.is_empty());
        }
        other => panic!("expected an error frame {code}, got {other:?}"),
    }
}

/// A full, healthy shuffle; used to show the service is unharmed after bad input.
pub async fn healthy_round_trip(c: &Cluster, app: &str) {
    let placement = c.shuffle(app, 2, 3).await;
    for map in 0..2 {
        let mut stats = Vec::new();
        for p in 0..3 {
            let d = payload(map, p, 0, 1000 + p as usize);
            push(&placement, app, p, map, 0, 0, &d).await.unwrap();
            stats.push(stat(p, d.len()));
        }
        c.coord
            .commit_map(app, 0, map, AttemptId(0), stats)
            .await
            .unwrap();
    }
    for p in 0..3 {
        let got = read_all(&placement, app, p, 0, 2).await.unwrap();
        assert_eq!(got.len(), 2);
        for (map, seq, data) in got {
            assert_eq!(&data[..], &payload(map, p, seq, 1000 + p as usize)[..]);
        }
    }
}
