//! The simulated Hadoop cluster: map and reduce slots, heartbeats, the reduce tasks'
//! copy and reduce phases, and the FCS scheduler's launches and preemptions (the pure
//! policy of `crossdock_policy::fair_completion`), driven by an event queue.

use crossdock_policy::fair_completion::{
    remaining_work, select_launch, select_preemptions, FcsConfig, JobProgress, Launch,
    PreemptedTask, RemainingWork, RunningJob, RunningTask, WaitingJob,
};

use super::setup::{FcsArgs, JobSpec, Policy};
use crate::events::EventQueue;

#[derive(Debug, Clone, Copy, PartialEq)]
enum TaskState {
    Fresh,
    /// Running on a node since `seg_start`.
    Running {
        node: usize,
        launched: f64,
    },
    Preempted {
        node: usize,
    },
    Done,
}

#[derive(Debug, Clone)]
struct Task {
    state: TaskState,
    /// Extra copy time owed after a migration.
    penalty: f64,
    tail_left: f64,
    reduce_left: f64,
    /// Time of the running segment's start and of the first launch.
    seg_start: f64,
    first_launch: Option<f64>,
    service: f64,
    version: u64,
    preempt_seq: u64,
    skipped: u32,
}

#[derive(Debug)]
struct Job {
    spec: JobSpec,
    arrived: bool,
    next_map: usize,
    maps_running: usize,
    maps_done: usize,
    map_time_done: f64,
    tasks: Vec<Task>,
    reduces_done: usize,
    done_at: Option<f64>,
    eligible: bool,
}

impl Job {
    fn maps_finished(&self) -> bool {
        self.maps_done == self.spec.maps.len()
    }
    fn running_reduces(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| matches!(t.state, TaskState::Running { .. }))
            .count()
    }
    fn pending_reduces(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| matches!(t.state, TaskState::Fresh | TaskState::Preempted { .. }))
            .count()
    }
    fn work(&self, default_map: f64) -> RemainingWork {
        let avg = if self.maps_done > 0 {
            self.map_time_done / self.maps_done as f64
        } else {
            default_map
        };
        let r_left: f64 = self
            .tasks
            .iter()
            .filter(|t| t.state != TaskState::Done)
            .map(|t| t.tail_left + t.reduce_left)
            .sum();
        remaining_work(&JobProgress {
            maps_left: (self.spec.maps.len() - self.maps_done) as u64,
            maps_per_wave: self.maps_running.max(1) as f64,
            avg_map_secs: avg,
            reduce_total: (r_left * 1000.0) as u64,
            reduce_done: 0,
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Arrive(usize),
    /// (job, node, duration)
    MapDone(usize, usize, f64),
    /// (job, task, version): the running segment ends (tail or reduce finished).
    Segment(usize, usize, u64),
    Heartbeat(usize),
}

struct Sim<'a> {
    a: &'a FcsArgs,
    policy: Policy,
    cfg: FcsConfig,
    q: EventQueue<Ev>,
    jobs: Vec<Job>,
    free_map: Vec<usize>,
    free_red: Vec<usize>,
    active: Vec<usize>,
    finished: usize,
    preempt_seq: u64,
    preemptions: u64,
}

impl Sim<'_> {
    fn progress(&self, j: usize, t: usize) -> f64 {
        let job = &self.jobs[j];
        let task = &job.tasks[t];
        if task.tail_left > 0.0 || task.penalty > 0.0 {
            job.maps_done as f64 / job.spec.maps.len().max(1) as f64 / 3.0
        } else {
            let total = job.spec.reduce_secs;
            2.0 / 3.0 + (1.0 - task.reduce_left / total) / 3.0
        }
    }

    /// Starts or continues the running segment of a task: copy tail once maps are done,
    /// then reduce.
    fn schedule_segment(&mut self, j: usize, t: usize) {
        let now = self.q.now();
        let maps_done = self.jobs[j].maps_finished();
        let task = &mut self.jobs[j].tasks[t];
        task.version += 1;
        task.seg_start = now;
        if task.tail_left > 0.0 || task.penalty > 0.0 {
            if maps_done {
                let d = task.tail_left + task.penalty;
                self.q.after(d, Ev::Segment(j, t, task.version));
            }
        } else {
            self.q
                .after(task.reduce_left, Ev::Segment(j, t, task.version));
        }
    }

    /// Accounts the time a running task spent in its current segment (before preemption).
    fn account(&mut self, j: usize, t: usize) {
        let now = self.q.now();
        let maps_done = self.jobs[j].maps_finished();
        let task = &mut self.jobs[j].tasks[t];
        let spent = now - task.seg_start;
        task.service += spent;
        if task.tail_left > 0.0 || task.penalty > 0.0 {
            if maps_done {
                let mut s = spent;
                let p = s.min(task.penalty);
                task.penalty -= p;
                s -= p;
                task.tail_left = (task.tail_left - s).max(0.0);
            }
        } else {
            task.reduce_left = (task.reduce_left - spent).max(0.0);
        }
        task.seg_start = now;
    }

    fn launch(&mut self, j: usize, t: usize, node: usize, migrate: bool) {
        let now = self.q.now();
        let refetch = self.jobs[j].spec.refetch_secs;
        let frac = self.jobs[j].maps_done as f64 / self.jobs[j].spec.maps.len().max(1) as f64;
        let task = &mut self.jobs[j].tasks[t];
        if migrate {
            task.penalty += if task.tail_left > 0.0 {
                refetch * frac
            } else {
                refetch
            };
        }
        task.first_launch.get_or_insert(now);
        task.skipped = 0;
        task.state = TaskState::Running {
            node,
            launched: now,
        };
        self.free_red[node] -= 1;
        self.schedule_segment(j, t);
    }

    fn preempt(&mut self, j: usize, t: usize) {
        self.account(j, t);
        let TaskState::Running { node, .. } = self.jobs[j].tasks[t].state else {
            return;
        };
        self.preempt_seq += 1;
        self.preemptions += 1;
        let task = &mut self.jobs[j].tasks[t];
        task.version += 1;
        task.preempt_seq = self.preempt_seq;
        task.state = TaskState::Preempted { node };
        self.free_red[node] += 1;
    }

    fn eligible_jobs(&self) -> Vec<usize> {
        self.active
            .iter()
            .copied()
            .filter(|&j| self.jobs[j].eligible && self.jobs[j].pending_reduces() > 0)
            .collect()
    }

    fn assign_reduce(&mut self, node: usize) -> bool {
        let cands = self.eligible_jobs();
        if cands.is_empty() {
            return false;
        }
        match self.policy {
            Policy::Fifo | Policy::Fair => {
                let j = if self.policy == Policy::Fifo {
                    cands[0]
                } else {
                    *cands
                        .iter()
                        .min_by_key(|&&j| (self.jobs[j].running_reduces(), j))
                        .expect("non-empty")
                };
                let t = self.jobs[j]
                    .tasks
                    .iter()
                    .position(|t| t.state == TaskState::Fresh)
                    .expect("pending, never preempted under these policies");
                self.launch(j, t, node, false);
                true
            }
            Policy::Fcs => {
                let mut waiting: Vec<WaitingJob> = cands
                    .iter()
                    .map(|&j| {
                        let job = &self.jobs[j];
                        let mut pre: Vec<(u64, PreemptedTask)> = job
                            .tasks
                            .iter()
                            .enumerate()
                            .filter_map(|(i, t)| match t.state {
                                TaskState::Preempted { node } => Some((
                                    t.preempt_seq,
                                    PreemptedTask {
                                        id: i as u64,
                                        node: node as u32,
                                        skipped: t.skipped,
                                    },
                                )),
                                _ => None,
                            })
                            .collect();
                        pre.sort_by_key(|x| x.0);
                        WaitingJob {
                            work: job.work(self.a.map_secs),
                            fresh: job
                                .tasks
                                .iter()
                                .enumerate()
                                .filter(|(_, t)| t.state == TaskState::Fresh)
                                .map(|(i, _)| i as u64)
                                .take(1)
                                .collect(),
                            preempted: pre.into_iter().map(|x| x.1).collect(),
                        }
                    })
                    .collect();
                let decision = select_launch(node as u32, &mut waiting, &self.cfg);
                for (k, w) in waiting.iter().enumerate() {
                    for p in &w.preempted {
                        self.jobs[cands[k]].tasks[p.id as usize].skipped = p.skipped;
                    }
                }
                match decision {
                    Some(Launch::Fresh(k, id)) | Some(Launch::Resume(k, id)) => {
                        self.launch(cands[k], id as usize, node, false);
                        true
                    }
                    Some(Launch::Migrate(k, id)) => {
                        self.launch(cands[k], id as usize, node, true);
                        true
                    }
                    None => false,
                }
            }
        }
    }

    fn fcs_request(&mut self, j: usize) {
        if self.policy != Policy::Fcs {
            return;
        }
        let demand = self.jobs[j].pending_reduces();
        let available: usize = self.free_red.iter().sum();
        if demand <= available {
            return;
        }
        let now = self.q.now();
        let requester = self.jobs[j].work(self.a.map_secs);
        let mut ids: Vec<usize> = Vec::new();
        let running: Vec<RunningJob> = self
            .active
            .iter()
            .copied()
            .filter(|&k| k != j)
            .map(|k| {
                ids.push(k);
                let job = &self.jobs[k];
                RunningJob {
                    work: job.work(self.a.map_secs),
                    tasks: job
                        .tasks
                        .iter()
                        .enumerate()
                        .filter_map(|(i, t)| match t.state {
                            TaskState::Running { launched, .. } => {
                                let service = t.service + (now - t.seg_start);
                                Some(RunningTask {
                                    id: ((k as u64) << 32) | i as u64,
                                    progress: self.progress(k, i),
                                    total_secs: now - t.first_launch.unwrap_or(now),
                                    service_secs: service,
                                    since_launch_secs: now - launched,
                                })
                            }
                            _ => None,
                        })
                        .collect(),
                }
            })
            .collect();
        let victims = select_preemptions(&requester, demand, available, &running, &self.cfg);
        for v in victims {
            // Ids are global: job index in the high half, task index in the low half.
            let (k, t) = ((v >> 32) as usize, (v & 0xFFFF_FFFF) as usize);
            debug_assert!(ids.contains(&k));
            self.preempt(k, t);
        }
    }

    fn assign_maps(&mut self, node: usize) {
        while self.free_map[node] > 0 {
            let cands: Vec<usize> = self
                .active
                .iter()
                .copied()
                .filter(|&j| self.jobs[j].next_map < self.jobs[j].spec.maps.len())
                .collect();
            let Some(&j) = (match self.policy {
                Policy::Fifo => cands.first(),
                _ => cands
                    .iter()
                    .min_by_key(|&&j| (self.jobs[j].maps_running, j)),
            }) else {
                return;
            };
            let d = self.jobs[j].spec.maps[self.jobs[j].next_map];
            self.jobs[j].next_map += 1;
            self.jobs[j].maps_running += 1;
            self.free_map[node] -= 1;
            self.q.after(d, Ev::MapDone(j, node, d));
        }
    }
}

impl Sim<'_> {
    fn handle(&mut self, ev: Ev) {
        let now = self.q.now();
        match ev {
            Ev::Arrive(j) => {
                self.jobs[j].arrived = true;
                self.active.push(j);
            }
            Ev::MapDone(j, node, d) => {
                self.free_map[node] += 1;
                let job = &mut self.jobs[j];
                job.maps_running -= 1;
                job.maps_done += 1;
                job.map_time_done += d;
                let became_eligible =
                    !job.eligible && job.maps_done as f64 >= 0.05 * job.spec.maps.len() as f64;
                if became_eligible {
                    job.eligible = true;
                }
                let finished = job.maps_finished();
                if finished {
                    let running: Vec<usize> = (0..self.jobs[j].tasks.len())
                        .filter(|&t| {
                            matches!(self.jobs[j].tasks[t].state, TaskState::Running { .. })
                        })
                        .collect();
                    for t in running {
                        self.schedule_segment(j, t);
                    }
                }
                if became_eligible || finished {
                    self.fcs_request(j);
                }
            }
            Ev::Segment(j, t, v) => {
                if self.jobs[j].tasks[t].version != v {
                    return;
                }
                let task = &mut self.jobs[j].tasks[t];
                task.service += now - task.seg_start;
                if task.tail_left > 0.0 || task.penalty > 0.0 {
                    task.tail_left = 0.0;
                    task.penalty = 0.0;
                    self.schedule_segment(j, t);
                } else {
                    task.reduce_left = 0.0;
                    let TaskState::Running { node, .. } = task.state else {
                        return;
                    };
                    task.state = TaskState::Done;
                    self.free_red[node] += 1;
                    let job = &mut self.jobs[j];
                    job.reduces_done += 1;
                    if job.reduces_done == job.spec.reduces {
                        job.done_at = Some(now);
                        self.active.retain(|&x| x != j);
                        self.finished += 1;
                    }
                }
            }
            Ev::Heartbeat(node) => {
                self.assign_maps(node);
                while self.free_red[node] > 0 && self.assign_reduce(node) {}
                if self.finished < self.jobs.len() {
                    self.q.after(3.0, Ev::Heartbeat(node));
                }
            }
        }
    }
}

/// Simulates `specs` under `policy`; returns each job's execution time and the number of
/// preemptions.
pub fn simulate(a: &FcsArgs, specs: &[JobSpec], policy: Policy) -> (Vec<f64>, u64) {
    let nodes = a.nodes.max(1);
    let jobs: Vec<Job> = specs
        .iter()
        .map(|s| Job {
            spec: s.clone(),
            arrived: false,
            next_map: 0,
            maps_running: 0,
            maps_done: 0,
            map_time_done: 0.0,
            tasks: (0..s.reduces)
                .map(|_| Task {
                    state: TaskState::Fresh,
                    penalty: 0.0,
                    tail_left: s.tail_secs,
                    reduce_left: s.reduce_secs,
                    seg_start: 0.0,
                    first_launch: None,
                    service: 0.0,
                    version: 0,
                    preempt_seq: 0,
                    skipped: 0,
                })
                .collect(),
            reduces_done: 0,
            done_at: None,
            eligible: false,
        })
        .collect();
    let mut sim = Sim {
        a,
        policy,
        cfg: FcsConfig {
            migration_delay: a.migration_delay,
            ..FcsConfig::default()
        },
        q: EventQueue::default(),
        jobs,
        free_map: vec![a.map_slots; nodes],
        free_red: vec![a.reduce_slots; nodes],
        active: Vec::new(),
        finished: 0,
        preempt_seq: 0,
        preemptions: 0,
    };
    // Jobs are in arrival order, so `active` stays sorted by arrival.
    for (j, s) in specs.iter().enumerate() {
        sim.q.at(s.arrival, Ev::Arrive(j));
    }
    for n in 0..nodes {
        sim.q.at(3.0 * n as f64 / nodes as f64, Ev::Heartbeat(n));
    }
    // A job that cannot finish would keep the heartbeats going forever: stop 10^6 s after the
    // last arrival and report such jobs as never finishing (infinite time).
    let horizon = specs.iter().map(|s| s.arrival).fold(0.0, f64::max) + 1e6;
    while sim.finished < sim.jobs.len() {
        let Some(ev) = sim.q.pop() else { break };
        if sim.q.now() > horizon {
            break;
        }
        sim.handle(ev);
    }
    let times = sim
        .jobs
        .iter()
        .map(|j| j.done_at.map_or(f64::INFINITY, |d| d - j.spec.arrival))
        .collect();
    (times, sim.preemptions)
}
