//! One exchange: P pushers send their data in the method's order, commit, and every
//! partition is read back from all its slots and checked byte for byte.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use crossdock_client::{
    CoordinatorClient, FetchRange, Keyring, PartitionReader, Placement, WorkerClient,
};
use crossdock_policy::skew::pairwise_peers;
use crossdock_proto::{checksum, AttemptId, CommitStatus, ErrorCode, PushHeader};
use tokio::sync::{Barrier, Semaphore};

use super::{by_rank, Algo, AllToAllArgs, RunOutcome, Sizes};
use crate::bench::procs::Procs;
use crate::bench::Pool;

/// How long one exchange may take before it is reported as stuck.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// What all pushers share in one run.
struct Shared {
    algo: Algo,
    app: String,
    placement: Placement,
    /// Partitions placed on each worker (index into `placement.workers`).
    by_worker: Vec<Vec<u32>>,
    sizes: Sizes,
    pool: Arc<Pool>,
    batch: u64,
    window: usize,
    barrier: Barrier,
    failed: AtomicBool,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, why: String) {
        self.failed.store(true, Ordering::Release);
        self.first_error.lock().expect("lock").get_or_insert(why);
    }
}

/// A push sent and not yet acknowledged: (partition, slot, worker address, bytes, push).
type InFlight = (u32, u32, String, u64, crossdock_client::PendingPush);

#[allow(clippy::too_many_arguments)]
pub async fn one_run(
    procs: &Procs,
    a: &AllToAllArgs,
    algo: Algo,
    alpha: f64,
    sizes: &Sizes,
    pool: &Arc<Pool>,
    batch: u64,
    run: usize,
) -> Result<RunOutcome> {
    let p = a.processes;
    let parts = (p * a.partitions_per_process) as u32;
    let coord = Arc::new(CoordinatorClient::connect(&procs.coordinator, &Keyring::new()).await?);
    let app = format!(
        "alltoall-{}-{}-{}-{run}",
        std::process::id(),
        algo.name().to_lowercase(),
        (alpha * 10.0).round() as u32
    );
    coord.register_app(&app, 600_000).await?;
    let placement = coord.register_shuffle(&app, 0, p as u32, parts).await?;
    if placement.workers.len() != p {
        bail!(
            "the shuffle was placed on {} workers, not {p}",
            placement.workers.len()
        );
    }
    let index: HashMap<u32, usize> = placement
        .workers
        .iter()
        .enumerate()
        .map(|(i, w)| (w.id, i))
        .collect();
    let mut by_worker = vec![Vec::new(); placement.workers.len()];
    for (x, w) in placement.partition_workers.iter().enumerate() {
        by_worker[index[w]].push(x as u32);
    }
    // The generator's destinations are Zipf ranks; rank r goes to the worker r mod P
    // (round robin, as the simulator and the paper's analysis assume) whatever partition
    // numbers the coordinator placed there.
    let sizes = by_rank(sizes, &by_worker);
    let demand = by_worker
        .iter()
        .map(|xs| {
            xs.iter()
                .map(|&x| sizes.iter().map(|row| row[x as usize]).sum::<u64>())
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0);
    let shared = Arc::new(Shared {
        algo,
        app: app.clone(),
        placement,
        by_worker,
        sizes,
        pool: pool.clone(),
        batch,
        window: a.window,
        barrier: Barrier::new(p),
        failed: AtomicBool::new(false),
        first_error: Mutex::new(None),
    });
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..p {
        let (shared, coord) = (shared.clone(), coord.clone());
        tasks.push(tokio::spawn(
            async move { pusher(&shared, &coord, i).await },
        ));
    }
    let mut loads: BTreeMap<String, u64> = BTreeMap::new();
    let aborts: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    // Every pusher committed (or gave up): the paper's global barrier.
    let joined = tokio::time::timeout(RUN_TIMEOUT, async {
        for t in tasks {
            for (addr, bytes) in t.await? {
                *loads.entry(addr).or_default() += bytes;
            }
        }
        anyhow::Ok(())
    })
    .await;
    let exchange_secs = start.elapsed().as_secs_f64();
    match joined {
        Err(_) => {
            aborts.iter().for_each(|a| a.abort());
            shared.fail(format!("stuck: not done after {} s", RUN_TIMEOUT.as_secs()))
        }
        Ok(r) => r?,
    }
    let mut outcome = RunOutcome {
        failure: shared.first_error.lock().expect("lock").clone(),
        exchange_secs,
        read_secs: 0.0,
        loads: loads.values().copied().collect(),
        splits: 0,
        delegated: 0,
        demand,
    };
    if outcome.failure.is_none() {
        let status = coord.shuffle_status(&app, 0).await?;
        outcome.splits = status.split_parents.len() as u32;
        outcome.delegated = status.partition_bytes[parts as usize..].iter().sum();
        let read = Instant::now();
        if let Err(e) = read_back(&shared, &coord, &status, parts).await {
            outcome.failure = Some(format!("read back wrong: {e:#}"));
        }
        outcome.read_secs = read.elapsed().as_secs_f64();
    }
    coord.unregister_app(&app).await?;
    Ok(outcome)
}

/// Pusher `i`: its data to every worker in the method's order, then its commit. Returns
/// the bytes each worker acknowledged.
async fn pusher(s: &Shared, coord: &CoordinatorClient, i: usize) -> Vec<(String, u64)> {
    let p = s.placement.workers.len();
    let keyring = Keyring::new();
    let mut clients: HashMap<String, WorkerClient> = HashMap::new();
    // Errors end this pusher's sending, never its part in CSA's step barriers (the
    // others would wait at them forever).
    for w in &s.placement.workers {
        match WorkerClient::connect(&w.addr, &keyring).await {
            Ok(c) => {
                clients.insert(w.addr.clone(), c);
            }
            Err(e) => s.fail(describe(&e)),
        }
    }
    // Where each partition's next batch goes: (slot, worker), moved on by redirects.
    let mut route: Vec<(u32, String)> = (0..s.placement.partition_workers.len() as u32)
        .map(|x| (x, s.placement.worker_of(x).expect("placed").addr.clone()))
        .collect();
    let mut acked: HashMap<String, u64> = HashMap::new();
    let mut per_slot: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut inflight: VecDeque<InFlight> = VecDeque::new();
    for step in 0..p {
        let dst = if step == 0 {
            i
        } else {
            pairwise_peers(i, p, step).0
        };
        for &x in &s.by_worker[dst] {
            let mut left = s.sizes[i][x as usize];
            let mut seq = 0u32;
            while left > 0 && !s.failed.load(Ordering::Acquire) {
                let len = left.min(s.batch);
                let (slot, addr) = route[x as usize].clone();
                if !clients.contains_key(&addr) {
                    match WorkerClient::connect(&addr, &keyring).await {
                        Ok(c) => {
                            clients.insert(addr.clone(), c);
                        }
                        Err(e) => {
                            s.fail(describe(&e));
                            break;
                        }
                    }
                }
                let payload = s.pool.slice(i as u32, x, seq, len as usize);
                let header = PushHeader {
                    app_id: s.app.clone(),
                    shuffle_id: 0,
                    partition: slot,
                    map_id: i as u32,
                    attempt_id: AttemptId(0),
                    batch_seq: seq,
                    crc32c: checksum(payload),
                };
                match clients[&addr].push(&header, payload).await {
                    Ok(pending) => inflight.push_back((x, slot, addr, len, pending)),
                    Err(e) => s.fail(describe(&e)),
                }
                if inflight.len() >= s.window {
                    let f = inflight.pop_front().expect("non-empty");
                    settle(s, &clients, f, &mut route, &mut acked, &mut per_slot).await;
                }
                left -= len;
                seq += 1;
            }
        }
        if s.algo == Algo::Csa {
            // The step ends once its every batch is acknowledged, for every pusher.
            while let Some(f) = inflight.pop_front() {
                settle(s, &clients, f, &mut route, &mut acked, &mut per_slot).await;
            }
            s.barrier.wait().await;
        }
    }
    while let Some(f) = inflight.pop_front() {
        settle(s, &clients, f, &mut route, &mut acked, &mut per_slot).await;
    }
    if !s.failed.load(Ordering::Acquire) {
        let stats = crate::bench::slot_stats(&per_slot);
        match coord
            .commit_map(&s.app, 0, i as u32, AttemptId(0), stats)
            .await
        {
            Ok((CommitStatus::Committed, _)) => {}
            Ok((other, _)) => s.fail(format!("map {i}'s commit answered {other:?}")),
            Err(e) => s.fail(describe(&e)),
        }
    }
    acked.into_iter().collect()
}

/// Waits for one push's acknowledgement: counts it, follows a redirect, or records the
/// failure.
async fn settle(
    s: &Shared,
    clients: &HashMap<String, WorkerClient>,
    (x, slot, addr, len, pending): InFlight,
    route: &mut [(u32, String)],
    acked: &mut HashMap<String, u64>,
    per_slot: &mut BTreeMap<u32, (u64, u64)>,
) {
    match clients[&addr].finish_push(pending).await {
        Ok(redirect) => {
            *acked.entry(addr).or_default() += len;
            let e = per_slot.entry(slot).or_default();
            e.0 += len;
            e.1 += 1;
            // A late answer of an earlier slot points at a split already passed.
            if let Some(r) = redirect.filter(|_| route[x as usize].0 == slot) {
                route[x as usize] = (r.slot, r.addr);
            }
        }
        Err(e) => s.fail(describe(&e)),
    }
}

/// The failure as the table shows it: a worker's refusal for lack of memory named as such.
fn describe(e: &crossdock_client::ClientError) -> String {
    if e.code() == Some(ErrorCode::LimitExceeded) && e.to_string().contains("memory exceeded") {
        format!("memory exceeded ({e})")
    } else {
        e.to_string()
    }
}

/// Reads every slot of every partition back and checks every byte against what each
/// pusher generated.
async fn read_back(
    s: &Arc<Shared>,
    coord: &CoordinatorClient,
    status: &crossdock_client::ShuffleStatus,
    parts: u32,
) -> Result<()> {
    let slots = Arc::new(Semaphore::new(s.placement.workers.len()));
    let mut tasks = Vec::new();
    for x in 0..parts {
        let permit = slots.clone().acquire_owned().await?;
        let reads: Vec<(u32, String)> = status
            .slots_of(x)
            .into_iter()
            .map(|slot| {
                let w = status.placement.worker_of(slot).expect("placed");
                (slot, w.addr.clone())
            })
            .collect();
        let (s, keyring) = (s.clone(), coord.keyring().clone());
        let maps = status.num_maps;
        tasks.push(tokio::spawn(async move {
            let r = check_partition(&s, &keyring, x, &reads, maps).await;
            drop(permit);
            r
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn check_partition(
    s: &Shared,
    keyring: &Keyring,
    x: u32,
    reads: &[(u32, String)],
    maps: u32,
) -> Result<()> {
    let mut seen = HashSet::new();
    let mut bytes = vec![0u64; maps as usize];
    for (slot, addr) in reads {
        let range = FetchRange {
            app_id: s.app.clone(),
            shuffle_id: 0,
            partition: *slot,
            start_map: 0,
            end_map: maps,
        };
        let mut reader = PartitionReader::new(addr, range, keyring);
        while let Some(b) = reader.next_batch().await? {
            let want = s.pool.slice(b.map_id, x, b.batch_seq, b.payload.len());
            if b.payload[..] != want[..] || !seen.insert((b.map_id, b.batch_seq)) {
                bail!(
                    "partition {x}: batch (map {}, seq {}) in slot {slot} is wrong or repeated",
                    b.map_id,
                    b.batch_seq
                );
            }
            bytes[b.map_id as usize] += b.payload.len() as u64;
        }
    }
    for (m, &got) in bytes.iter().enumerate() {
        let want = s.sizes[m][x as usize];
        if got != want {
            bail!("partition {x}: map {m} sent {want} bytes, {got} read back");
        }
    }
    Ok(())
}
