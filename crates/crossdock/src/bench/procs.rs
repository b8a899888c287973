//! A cluster of processes for a bench run: a `crossdock coordinator` and P `crossdock
//! worker` processes, each its own process so that its RSS is its own, on loopback
//! without authentication (the benches' own throwaway cluster).

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use crossdock_client::{CoordinatorClient, Keyring, WorkerClient};
use crossdock_proto::Message;

use super::child::{spawn_announcing, stop};

/// A coordinator and P worker processes, stopped when dropped.
pub struct Procs {
    pub coordinator: String,
    children: Vec<Child>,
    workers: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Procs {
    /// Starts the coordinator and `p` memory-only workers of `memory` bytes that delegate
    /// (split under memory pressure) or never split: the all-to-all's cluster.
    pub fn start(p: usize, memory: u64, delegate: bool) -> Result<Procs> {
        // Splits by size are out of reach (the data is far smaller): SMS's workers split
        // only under memory pressure; CSA's and DSA's never.
        let split = if delegate { "1TiB" } else { "off" };
        let worker = [
            "--memory-only",
            "--memory",
            &memory.to_string(),
            "--split-size",
            split,
        ]
        .map(String::from)
        .to_vec();
        Procs::launch("crossdock-alltoall-", &[], p, |_| worker.clone())
    }

    /// Starts a coordinator (memory durability, with `coordinator` added to its
    /// arguments) and `p` workers, worker `i` with `worker(i)` added to its arguments,
    /// each with a data directory of its own under a temporary directory named `prefix…`.
    pub fn launch(
        prefix: &str,
        coordinator: &[String],
        p: usize,
        worker: impl Fn(usize) -> Vec<String>,
    ) -> Result<Procs> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir()?;
        let exe = std::env::current_exe()?;
        let mut procs = Procs {
            coordinator: String::new(),
            children: Vec::new(),
            workers: Vec::new(),
            _dir: dir,
        };
        let root = procs._dir.path().to_path_buf();
        let mut coord = Command::new(&exe);
        coord
            .args(["coordinator", "--listen", "127.0.0.1:0", "--no-auth"])
            .args(["--metrics-listen", "off", "--durability", "memory"])
            .args(coordinator)
            .arg("--data-dir")
            .arg(root.join("coordinator"));
        procs.coordinator = procs.spawn(coord, "crossdock coordinator listening on ")?;
        for i in 0..p {
            let mut w = Command::new(&exe);
            w.args(["worker", "--listen", "127.0.0.1:0", "--no-auth"])
                .args(["--coordinator", &procs.coordinator])
                .args(["--metrics-listen", "off"])
                .args(worker(i))
                .arg("--data-dir")
                .arg(root.join(format!("w{i}")));
            let addr = procs.spawn(w, "crossdock worker listening on ")?;
            procs.workers.push(addr);
        }
        Ok(procs)
    }

    /// Starts `cmd` and returns the address it prints after `prefix`; it is stopped with
    /// the others.
    fn spawn(&mut self, cmd: Command, prefix: &str) -> Result<String> {
        let (child, addr) = spawn_announcing(cmd, prefix)?;
        self.children.push(child);
        Ok(addr)
    }

    /// Waits until the coordinator places a shuffle of `parts` partitions on all `p`
    /// workers (each registers on its own after it printed its address).
    pub async fn wait_for_workers(&self, p: usize, parts: u32) -> Result<()> {
        let coord = CoordinatorClient::connect(&self.coordinator, &Keyring::new()).await?;
        let deadline = Instant::now() + Duration::from_secs(30);
        for probe in 0.. {
            let app = format!("bench-probe-{}-{probe}", std::process::id());
            coord.register_app(&app, 60_000).await?;
            let placed = coord.register_shuffle(&app, 0, 1, parts).await?;
            coord.unregister_app(&app).await?;
            if placed.workers.len() == p {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "only {} of {p} workers registered within 30 s",
                    placed.workers.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        unreachable!("the loop returns")
    }

    /// The largest peak RSS of the workers, and the budget of that worker.
    pub async fn peak_rss(&self, memory: u64) -> Result<(u64, u64)> {
        let mut peak = (0, memory);
        for addr in &self.workers {
            let client = WorkerClient::connect(addr, &Keyring::new()).await?;
            if let Message::WorkerStats {
                peak_rss_bytes,
                process_budget_bytes,
                ..
            } = client.call(&Message::GetWorkerStats).await?
            {
                if peak_rss_bytes > peak.0 {
                    peak = (peak_rss_bytes, process_budget_bytes);
                }
            }
        }
        Ok(peak)
    }
}

impl Drop for Procs {
    /// Stops the workers, then the coordinator (stopped first, it would have the workers
    /// log that it is gone).
    fn drop(&mut self) {
        if let Some((coordinator, workers)) = self.children.split_first_mut() {
            stop(workers);
            stop(std::slice::from_mut(coordinator));
        }
    }
}
