//! TLS on every connection, with a real coordinator and workers on loopback: a shuffle
//! pushed, replicated (worker to worker), committed (coordinator to workers) and read
//! back exactly over TLS; the bytes on the wire are not the data; and a client that
//! speaks plain TCP, trusts another authority or dials a name the certificate does not
//! hold is refused before it is served anything.

mod common;

use std::sync::{Arc, Mutex};

use crossdock_client::tls::{generate, ServerTls, TlsClient};
use crossdock_client::{
    ClientError, CoordinatorClient, FetchRange, Keyring, PartitionReader, WorkerClient,
};
use crossdock_proto::{AttemptId, CommitStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::embedded::Cluster;
use common::{header, read_batches, secret, stat};

/// A recognizable payload: if it crosses the wire in the clear, the relay sees it.
fn marker_payload(n: usize) -> Vec<u8> {
    b"CROSSDOCK-PLAINTEXT-MARKER-"
        .iter()
        .copied()
        .cycle()
        .take(n)
        .collect()
}

struct TlsCluster {
    cluster: Cluster,
    _certs: tempfile::TempDir,
    /// Trusts the cluster's authority.
    trust: TlsClient,
}

/// Two workers, replication 2, with TLS on certificates made for 127.0.0.1 if `tls`.
async fn start(tls: bool) -> TlsCluster {
    let certs = tempfile::tempdir().unwrap();
    let files = generate(certs.path(), &["127.0.0.1".to_string()]).unwrap();
    let server_tls = ServerTls::from_files(&files.cert, &files.key, &files.ca).unwrap();
    let trust = TlsClient::from_ca_file(&files.ca).unwrap();
    let keys = Keyring::new().with_tls(tls.then(|| trust.clone()));
    let cluster = Cluster::start_configured(2, 64 << 20, keys, |cfg| {
        cfg.replication = 2;
        cfg.tls = tls.then_some(server_tls);
    })
    .await;
    TlsCluster {
        cluster,
        _certs: certs,
        trust,
    }
}

/// Forwards connections to `target`, keeping every byte that crosses it in either
/// direction. Returns its address and the bytes seen.
async fn recording_relay(target: String) -> (String, Arc<Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(&target).await.unwrap();
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pipe(cr, sw, log.clone()));
            tokio::spawn(pipe(sr, cw, log.clone()));
        }
    });
    (addr, seen)
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    log: Arc<Mutex<Vec<u8>>>,
) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        log.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Pushes one batch of `data` to partition 0 through `worker_addr`, commits map 0 and
/// reads partition 0 back.
async fn shuffle_through(
    coord: &CoordinatorClient,
    worker_addr: &str,
    keys: &Keyring,
    app: &str,
    data: &[u8],
) -> Result<Vec<u8>, ClientError> {
    let w = WorkerClient::connect(worker_addr, keys).await?;
    let p = w.push(&header(app, 0, 0, 0, 0, data), data).await?;
    w.finish_push(p).await?;
    let stats = vec![stat(0, data.len())];
    let (status, _) = coord.commit_map(app, 0, 0, AttemptId(0), stats).await?;
    assert_eq!(status, CommitStatus::Committed);
    let range = FetchRange {
        app_id: app.into(),
        shuffle_id: 0,
        partition: 0,
        start_map: 0,
        end_map: 1,
    };
    // Taking stored records: over TLS the worker sends checked chunks all the same.
    let reader =
        PartitionReader::new(worker_addr, range, keys).accepting_records(vec![Some(AttemptId(0))]);
    let batches = read_batches(reader).await?;
    Ok(batches.into_iter().flat_map(|(_, _, b)| b).collect())
}

/// Registers `app` through a client with `keys` and pushes, commits and reads a marked
/// batch through a relay in front of partition 0's worker. Returns what the relay saw.
async fn marked_shuffle(c: &TlsCluster, keys: Keyring, app: &str) -> Vec<u8> {
    let addr = c.cluster.sa.coordinator.addr.to_string();
    let coord = CoordinatorClient::connect(&addr, &keys).await.unwrap();
    coord.register_app(app, 60_000).await.unwrap();
    let placement = coord.register_shuffle(app, 0, 1, 1).await.unwrap();
    let worker = placement.worker_of(0).unwrap().addr.clone();
    let (relay, seen) = recording_relay(worker).await;
    let data = marker_payload(256 << 10);
    let back = shuffle_through(&coord, &relay, coord.keyring(), app, &data)
        .await
        .unwrap();
    assert_eq!(back, data, "read back exactly");
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen.len() > 2 * data.len(),
        "the push and the fetch crossed the relay"
    );
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_shuffle_runs_over_tls_and_its_bytes_are_not_on_the_wire() {
    let c = start(true).await;
    let keys = Keyring::new().with_tls(Some(c.trust.clone()));
    let seen = marked_shuffle(&c, keys, "tls-app").await;
    assert!(
        !contains(&seen, b"CROSSDOCK-PLAINTEXT-MARKER-"),
        "the payload crossed the wire in the clear"
    );
    // Replication 2: the replica got its copy over the worker-to-worker TLS link, and
    // the commit's check over the coordinator-to-worker one.
    let status = CoordinatorClient::connect(
        &c.cluster.sa.coordinator.addr.to_string(),
        &Keyring::cluster(Some(secret())).with_tls(Some(c.trust.clone())),
    )
    .await
    .unwrap()
    .shuffle_status("tls-app", 0)
    .await
    .unwrap();
    assert_eq!(status.committed_maps, 1);
    assert!(status.placement.replica_of(0).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tls_the_same_bytes_are_on_the_wire() {
    // The control of the test above: the relay does see a plain-TCP payload.
    let c = start(false).await;
    let seen = marked_shuffle(&c, Keyring::new(), "plain-app").await;
    assert!(contains(&seen, b"CROSSDOCK-PLAINTEXT-MARKER-"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_clients_other_authorities_and_wrong_names_are_refused() {
    let c = start(true).await;
    let port = c.cluster.sa.coordinator.addr.port();
    let addr = format!("127.0.0.1:{port}");
    // Plain TCP against a TLS server: the server's handshake fails; nothing is answered.
    let plain = async {
        let coord = CoordinatorClient::connect(&addr, &Keyring::new()).await?;
        coord.register_app("intruder", 60_000).await
    };
    assert!(plain.await.is_err(), "a plain-TCP client was served");
    // A client that trusts another authority refuses the server's certificate.
    let other = tempfile::tempdir().unwrap();
    let files = generate(other.path(), &["127.0.0.1".to_string()]).unwrap();
    let stranger = Keyring::new().with_tls(Some(TlsClient::from_ca_file(&files.ca).unwrap()));
    let err = CoordinatorClient::connect(&addr, &stranger)
        .await
        .err()
        .expect("a certificate of another authority was accepted")
        .to_string();
    assert!(err.contains("certificate"), "{err}");
    // The certificate names 127.0.0.1 only: dialled as `localhost`, it does not fit.
    let trusting = Keyring::new().with_tls(Some(c.trust.clone()));
    let err = CoordinatorClient::connect(&format!("localhost:{port}"), &trusting)
        .await
        .err()
        .expect("a certificate for another name was accepted")
        .to_string();
    assert!(err.contains("certificate"), "{err}");
    // And the cluster still serves a client that does everything right.
    let coord = CoordinatorClient::connect(&addr, &trusting).await.unwrap();
    coord.register_app("fine", 60_000).await.unwrap();
}
