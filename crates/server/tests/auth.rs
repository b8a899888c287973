//! Authentication and authorization, attacked as issue 12 lists the attacks: a client
//! without credentials, a client with another app's token, a replayed handshake, a
//! fake worker. Every attempt is refused as `unauthorized`, and the victim's data reads
//! back exact afterwards.

mod common;

use bytes::Bytes;
use crossdock_client::{ClientError, CoordinatorClient, Keyring, RpcConnection, WorkerClient};
use crossdock_proto::auth::{proof, ClusterSecret};
use crossdock_proto::{
    Appended, AttemptId, Durability, ErrorCode, Message, PartitionBytes, FLAG_REPLICA,
};

use crossdock_server::worker::{Worker, WorkerConfig};

use common::nodes::{expected, read_from, run_map, Cluster};
use common::{app_keys, attempts, header, secret};

/// Registers `app` (2 maps x 2 partitions), runs both maps and checks they read back.
async fn victim(c: &Cluster, app: &str) -> crossdock_client::Placement {
    c.coord.register_app(app, 60_000).await.unwrap();
    let placement = c.coord.register_shuffle(app, 0, 2, 2).await.unwrap();
    for m in 0..2 {
        run_map(c, &placement, app, m, 0, 2).await.unwrap();
    }
    assert_intact(c, &placement, app).await;
    placement
}

async fn assert_intact(c: &Cluster, placement: &crossdock_client::Placement, app: &str) {
    for p in 0..2 {
        let addr = &placement.worker_of(p).unwrap().addr;
        assert_eq!(
            read_from(addr, app, p, 2).await.unwrap(),
            expected(p, &[0, 0])
        );
    }
    let st = c.status(app).await;
    assert_eq!(attempts(&st.map_attempts), vec![Some(0), Some(0)]);
}

fn unauthorized<T: std::fmt::Debug>(r: Result<T, ClientError>, what: &str) {
    match r {
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{what}: {e}"),
        Ok(v) => panic!("{what}: expected unauthorized, got {v:?}"),
    }
}

/// Every request an outsider could use against `app`'s data or the cluster.
fn attacks(app: &str, attacker_addr: &str) -> Vec<(&'static str, Message)> {
    let a = || app.to_string();
    vec![
        ("fetch", fetch(app)),
        (
            "delete the app on a worker",
            Message::DeleteApp {
                app_id: a(),
                everywhere: true,
            },
        ),
        (
            "delete the shuffle on a worker",
            Message::DeleteShuffle {
                app_id: a(),
                shuffle_id: 0,
                everywhere: true,
            },
        ),
        (
            "revoke a map",
            Message::MapCommitted {
                app_id: a(),
                shuffle_id: 0,
                map_id: 0,
                attempt_id: AttemptId(7),
                partitions: vec![PartitionBytes {
                    partition: 0,
                    bytes: 1,
                }],
                durability: Durability::Memory,
            },
        ),
        (
            "redirect pushes to the attacker",
            Message::PrepareShuffle {
                app_id: a(),
                shuffle_id: 0,
                num_maps: 2,
                num_partitions: 2,
                partitions: vec![0, 1],
                forward_to: vec![attacker_addr.into(), attacker_addr.into()],
                app_stored_quota: Default::default(),
                app_memory_share_ppm: Default::default(),
                continued_in: Default::default(),
                continued_at: Default::default(),
            },
        ),
        (
            "replace the commits",
            Message::SyncCommits {
                app_id: a(),
                shuffle_id: 0,
                map_attempts: vec![AttemptId(9), AttemptId(9)],
            },
        ),
    ]
}

fn fetch(app: &str) -> Message {
    Message::Fetch {
        app_id: app.into(),
        shuffle_id: 0,
        partition: 0,
        start_map: 0,
        end_map: 2,
        resume_after: None,
        run_bytes: Default::default(),
        end_batch_seq: Default::default(),
        expected_attempt: crossdock_proto::Appended(None),
        flags: crossdock_proto::Appended(None),
    }
}

fn coordinator_attacks(app: &str) -> Vec<(&'static str, Message)> {
    vec![
        (
            "unregister the app",
            Message::UnregisterApp { app_id: app.into() },
        ),
        (
            "unregister the shuffle",
            Message::UnregisterShuffle {
                app_id: app.into(),
                shuffle_id: 0,
            },
        ),
        (
            "report its data corrupt",
            Message::ReportLostCopy {
                app_id: app.into(),
                shuffle_id: 0,
                partition: 0,
                worker_addr: "127.0.0.1:1".into(),
            },
        ),
        (
            "commit a map",
            Message::CommitMap {
                app_id: app.into(),
                shuffle_id: 0,
                map_id: 0,
                attempt_id: AttemptId(5),
                partitions: vec![],
                run_starts: Default::default(),
            },
        ),
        (
            "read its status",
            Message::GetShuffleStatus {
                app_id: app.into(),
                shuffle_id: 0,
                runs_from: Appended::of(0),
                runs_to: Appended::of(2),
            },
        ),
        (
            "join as a worker",
            Message::RegisterWorker {
                addr: "127.0.0.1:1".into(),
                memory_budget: 1 << 30,
                incarnation: 1,
                host: String::new(),
                zone: String::new(),
            },
        ),
    ]
}

/// Sends every attack on a connection holding `keys` and expects each refused.
async fn refused_everywhere(c: &Cluster, placement: &crossdock_client::Placement, keys: &Keyring) {
    let app = "victim";
    for w in &placement.workers {
        let conn = RpcConnection::connect(&w.addr, keys).await.unwrap();
        for (what, msg) in attacks(app, "127.0.0.1:9") {
            unauthorized(conn.call(&msg).await, what);
        }
        let data = b"forged".to_vec();
        let client = WorkerClient::connect(&w.addr, keys).await.unwrap();
        let pending = client.push(&header(app, 0, 0, 1, 0, &data), &data).await;
        unauthorized(client.finish_push(pending.unwrap()).await, "push");
    }
    let conn = RpcConnection::connect(&c.coord_addr, keys).await.unwrap();
    for (what, msg) in coordinator_attacks(app) {
        unauthorized(conn.call(&msg).await, what);
    }
    // Registering the victim's id again would hand out its token: refused.
    let other = CoordinatorClient::connect(&c.coord_addr, keys)
        .await
        .unwrap();
    unauthorized(
        other.register_app(app, 60_000).await,
        "take over the app id",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_or_another_apps_token_reaches_nothing() {
    let c = Cluster::start(2, 1).await;
    let placement = victim(&c, "victim").await;

    // No credentials at all, then a real token of another app.
    refused_everywhere(&c, &placement, &Keyring::new()).await;
    let attacker = CoordinatorClient::connect(&c.coord_addr, &Keyring::new())
        .await
        .unwrap();
    let token = attacker.register_app("attacker", 60_000).await.unwrap();
    assert_eq!(token.len(), 32);
    refused_everywhere(&c, &placement, attacker.keyring()).await;
    // A token made up, and the victim's token derived from a wrong secret.
    let forged = Keyring::app("victim", Bytes::from_static(&[0x42; 32]));
    let wrong = ClusterSecret::from_bytes(b"not the cluster's secret, but long enough").unwrap();
    for keys in [forged, Keyring::app("victim", wrong.app_token("victim"))] {
        let addr = &placement.workers[0].addr;
        unauthorized(
            RpcConnection::connect(addr, &keys).await.map(drop),
            "a forged token",
        );
        let coordinator = WorkerClient::connect(&c.coord_addr, &keys).await;
        unauthorized(coordinator.map(drop), "a forged token");
    }
    let fake_cluster = Keyring::cluster(Some(std::sync::Arc::new(wrong)));
    unauthorized(
        RpcConnection::connect(&c.coord_addr, &fake_cluster)
            .await
            .map(drop),
        "a wrong cluster secret",
    );

    // Even the owner may not pose as a worker forwarding a batch to a replica (a replica's
    // copy skips forwarding and counts as the other copy).
    let addr = &placement.workers[0].addr;
    let own = RpcConnection::connect(addr, &app_keys("victim"))
        .await
        .unwrap();
    let data = b"forged".to_vec();
    let h = header("victim", 0, 0, 1, 0, &data);
    let rx = own
        .start_push_flagged(&h, &data, FLAG_REPLICA)
        .await
        .unwrap();
    unauthorized(own.wait(rx).await, "a push posing as a replica's copy");

    assert_intact(&c, &placement, "victim").await;
    // The owner still does everything, on connections of its own.
    let owner = CoordinatorClient::connect(&c.coord_addr, &app_keys("victim"))
        .await
        .unwrap();
    owner.renew_lease("victim").await.unwrap();
    assert_eq!(
        owner.register_app("victim", 60_000).await.unwrap().len(),
        32
    );
    owner.unregister_app("victim").await.unwrap();
}

/// Sends one request on a raw stream and reads its answer.
async fn exchange(s: &mut tokio::net::TcpStream, id: u64, msg: Message) -> Message {
    use crossdock_proto::io::{read_exact_bytes, read_header, write_message};
    use tokio::io::AsyncWriteExt;
    write_message(s, id, &msg).await.unwrap();
    s.flush().await.unwrap();
    let h = read_header(s).await.unwrap().unwrap();
    assert_eq!(h.request_id, id);
    let body = read_exact_bytes(s, h.body_len as usize).await.unwrap();
    Message::decode(h.kind, body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_replayed_on_another_connection_is_refused() {
    let c = Cluster::start(1, 1).await;
    let placement = victim(&c, "victim").await;
    let addr = placement.workers[0].addr.clone();
    let token = secret().app_token("victim");
    // A recorded, valid handshake...
    let mut first = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let Message::Challenge { nonce } = exchange(&mut first, 1, Message::Hello).await else {
        panic!("no challenge");
    };
    let recorded = Message::Authenticate {
        app_id: "victim".into(),
        proof: proof(&token, &nonce, "victim"),
    };
    assert_eq!(exchange(&mut first, 2, recorded.clone()).await, Message::Ok);
    // ...is worth nothing on a new connection (it has a nonce of its own)...
    let mut second = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let Message::Challenge { nonce: other } = exchange(&mut second, 1, Message::Hello).await else {
        panic!("no challenge");
    };
    assert_ne!(nonce, other);
    let Message::Error { code, .. } = exchange(&mut second, 2, recorded.clone()).await else {
        panic!("a replayed proof was accepted");
    };
    assert_eq!(code, ErrorCode::Unauthorized.as_u16());
    // ...nor without asking for a challenge at all.
    let mut third = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let Message::Error { code, .. } = exchange(&mut third, 1, recorded).await else {
        panic!("a proof without a challenge was accepted");
    };
    assert_eq!(code, ErrorCode::Unauthorized.as_u16());
    // The refused connection stays usable and still gets no data.
    let Message::Error { code, .. } = exchange(&mut third, 2, fetch("victim")).await else {
        panic!("a fetch without authentication was served");
    };
    assert_eq!(code, ErrorCode::Unauthorized.as_u16());
    assert_intact(&c, &placement, "victim").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_with_the_wrong_secret_is_never_given_data() {
    let c = Cluster::start(1, 1).await;
    let dir = tempfile::tempdir().unwrap();
    // A worker holding another secret tries to join: the coordinator refuses it.
    let wrong = ClusterSecret::from_bytes(b"a secret the cluster does not share, long").unwrap();
    let cfg = WorkerConfig {
        listen: "127.0.0.1:0".into(),
        advertise: None,
        host: String::new(),
        zone: String::new(),
        coordinator: c.coord_addr.clone(),
        memory: 64 << 20,
        data_dir: dir.path().join("intruder"),
        extra_data_dirs: Vec::new(),
        object_store: None,
        disk_quota: None,
        limits: Default::default(),
        secret: Some(std::sync::Arc::new(wrong)),
        tls: None,
        tenancy: Default::default(),
        split_bytes: crossdock_server::worker::config::DEFAULT_SPLIT_BYTES,
        memory_only: false,
        zero_copy_fetch: true,
    };
    let (_stop, shutdown) = tokio::sync::watch::channel(false);
    let w = Worker::start(cfg, shutdown).await.unwrap();
    // Several heartbeat periods (50 ms) of retrying.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // New shuffles are placed on the real workers only, and read back exact.
    let placement = victim(&c, "victim").await;
    assert_eq!(placement.workers.len(), 1, "{:?}", placement.workers);
    assert!(placement.workers.iter().all(|x| x.addr != w.advertised));
}
