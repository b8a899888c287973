//! Fair completion scheduling (FCS) of long-lived consumer tasks.
//!
//! Source: Y. Wang, "Efficient Movement and Task Management in MapReduce for Fast Analytics of
//! Big Data", PhD dissertation, Auburn University, 2014, Chapter 4: Section 4.2.4 (the 70%
//! progress rule), Section 4.3 (remaining-work estimators `T_rs` and `R_left`, execution
//! slackness, Algorithm 1 "select ReduceTasks to preempt", Algorithm 2 "select a ReduceTask
//! to launch", migration delay `D`).
//!
//! In the dissertation FCS orders Hadoop reduce slots between jobs. In Crossdock the same
//! decisions order service resources (memory credits, fetch bandwidth) between applications:
//! a "slot" is a unit of the resource and a "reduce task" is a holder of one unit.
//!
//! Corrections (the dissertation's own inconsistencies, fixed here):
//! - `T_rs = (M_left / M_rate) * T_mavg` only has the unit of time if `M_rate` counts maps
//!   completed per *wave* (the job's map parallelism); with maps per second it would be
//!   seconds squared. [`JobProgress::maps_per_wave`] makes the reading explicit.
//! - Algorithm 1 applies `IsPreemptable` to a job, but the dissertation defines slackness,
//!   "newly launched" and progress per ReduceTask; we filter per task.
//! - "Newly launched" has no threshold in the text; [`FcsConfig::min_service_secs`] is ours.

use std::cmp::Ordering;

/// Progress of one job, the inputs of the remaining-work estimators.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JobProgress {
    /// `M_left`: map tasks not yet completed.
    pub maps_left: u64,
    /// `M_rate`: maps the job completes per wave (its current map parallelism), > 0.
    pub maps_per_wave: f64,
    /// `T_mavg`: average execution time of its completed or running maps, seconds.
    pub avg_map_secs: f64,
    /// `R_total`: intermediate bytes its reducers must process.
    pub reduce_total: u64,
    /// `R_done`: intermediate bytes already reduced.
    pub reduce_done: u64,
}

/// A job's remaining work; orders by `t_rs`, then `r_left` (less is "smaller").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RemainingWork {
    /// Remaining shuffle time, seconds.
    pub t_rs: f64,
    /// Remaining reduce bytes.
    pub r_left: u64,
}

impl RemainingWork {
    /// Total order: `t_rs` first, then `r_left`.
    pub fn cmp_work(&self, other: &RemainingWork) -> Ordering {
        self.t_rs
            .total_cmp(&other.t_rs)
            .then(self.r_left.cmp(&other.r_left))
    }
}

/// `T_rs = (M_left / M_rate) * T_mavg` and `R_left = R_total - R_done`.
pub fn remaining_work(p: &JobProgress) -> RemainingWork {
    let t_rs = if p.maps_left == 0 {
        0.0
    } else if p.maps_per_wave > 0.0 {
        p.maps_left as f64 / p.maps_per_wave * p.avg_map_secs
    } else {
        f64::INFINITY
    };
    RemainingWork {
        t_rs,
        r_left: p.reduce_total.saturating_sub(p.reduce_done),
    }
}

/// `E_slack = T_total / T_est` with `T_est = T_svc / C_pctg`: how much longer a task has
/// existed than it would have needed without preemption. 1.0 when nothing is known yet.
pub fn execution_slackness(total_secs: f64, service_secs: f64, completed: f64) -> f64 {
    if service_secs <= 0.0 || completed <= 0.0 {
        return 1.0;
    }
    let t_est = service_secs / completed;
    total_secs / t_est
}

/// FCS parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FcsConfig {
    /// A task whose slackness reached this cap is not preempted (5 in the dissertation).
    pub slack_cap: f64,
    /// A task past this progress is not preempted (0.7, Section 4.2.4).
    pub max_progress: f64,
    /// A task with less service than this is "newly launched" and not preempted.
    pub min_service_secs: f64,
    /// Migration delay `D` (60 in the dissertation's experiments).
    pub migration_delay: u32,
}

impl Default for FcsConfig {
    fn default() -> Self {
        FcsConfig {
            slack_cap: 5.0,
            max_progress: 0.7,
            min_service_secs: 3.0,
            migration_delay: 60,
        }
    }
}

/// A running consumer task as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunningTask {
    /// Caller's id.
    pub id: u64,
    /// Fraction of its work done, `[0, 1]`.
    pub progress: f64,
    /// Seconds since it first started, preempted time included (`T_total`).
    pub total_secs: f64,
    /// Seconds it actually ran (`T_svc`).
    pub service_secs: f64,
    /// Seconds since its current launch (for the "newly launched" rule).
    pub since_launch_secs: f64,
}

/// `IsPreemptable` of Algorithm 1, per task.
pub fn is_preemptable(t: &RunningTask, cfg: &FcsConfig) -> bool {
    t.since_launch_secs >= cfg.min_service_secs
        && t.progress <= cfg.max_progress
        && execution_slackness(t.total_secs, t.service_secs, t.progress) < cfg.slack_cap
}

/// A job holding slots.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningJob {
    /// Its remaining work.
    pub work: RemainingWork,
    /// Its running tasks.
    pub tasks: Vec<RunningTask>,
}

/// Algorithm 1: a job with remaining work `requester` wants `demand` slots and `available`
/// are free. Victims come from jobs of strictly more remaining work, largest first, only
/// preemptable tasks, until the shortfall is covered. Returns the task ids to preempt.
pub fn select_preemptions(
    requester: &RemainingWork,
    demand: usize,
    available: usize,
    jobs: &[RunningJob],
    cfg: &FcsConfig,
) -> Vec<u64> {
    if available >= demand {
        return Vec::new();
    }
    let mut need = demand - available;
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[b].work.cmp_work(&jobs[a].work).then(a.cmp(&b)));
    let mut out = Vec::new();
    for j in order {
        if need == 0 {
            break;
        }
        if jobs[j].work.cmp_work(requester) != Ordering::Greater {
            continue;
        }
        for t in &jobs[j].tasks {
            if need == 0 {
                break;
            }
            if is_preemptable(t, cfg) {
                out.push(t.id);
                need -= 1;
            }
        }
    }
    out
}

/// A preempted task waiting to resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptedTask {
    /// Caller's id.
    pub id: u64,
    /// Node holding its saved state.
    pub node: u32,
    /// Times it was skipped for locality (the delay counter of Algorithm 2).
    pub skipped: u32,
}

/// A job waiting for slots.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingJob {
    /// Its remaining work.
    pub work: RemainingWork,
    /// Ids of tasks never launched, in launch order.
    pub fresh: Vec<u64>,
    /// Preempted tasks, oldest first.
    pub preempted: Vec<PreemptedTask>,
}

/// What to run on a node with a free slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launch {
    /// Start a never-launched task (job index, task id).
    Fresh(usize, u64),
    /// Resume a preempted task on the node holding its state.
    Resume(usize, u64),
    /// Resume a preempted task elsewhere, re-fetching its data.
    Migrate(usize, u64),
}

/// Algorithm 2: on a free slot of `node`, walk the jobs by increasing remaining work; run a
/// task preempted from this node or a fresh one; otherwise migrate the oldest preempted task
/// whose skip counter passed `D`, incrementing the counters of the others it passes over.
/// Updates `jobs` (removes the chosen task, bumps counters). `None` if nothing can run.
pub fn select_launch(node: u32, jobs: &mut [WaitingJob], cfg: &FcsConfig) -> Option<Launch> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| jobs[a].work.cmp_work(&jobs[b].work).then(a.cmp(&b)));
    for j in order {
        let job = &mut jobs[j];
        if let Some(pos) = job.preempted.iter().position(|t| t.node == node) {
            let t = job.preempted.remove(pos);
            return Some(Launch::Resume(j, t.id));
        }
        if !job.fresh.is_empty() {
            return Some(Launch::Fresh(j, job.fresh.remove(0)));
        }
        for pos in 0..job.preempted.len() {
            if job.preempted[pos].skipped > cfg.migration_delay {
                let t = job.preempted.remove(pos);
                return Some(Launch::Migrate(j, t.id));
            }
            job.preempted[pos].skipped += 1;
        }
    }
    None
}

/// The delay-scheduling estimate of `D` the dissertation borrows:
/// `D = -M * ln((1 - L) / (1 + (1 - L)))` for `M` nodes and expected locality `L`.
pub fn migration_delay(nodes: u32, locality: f64) -> f64 {
    let miss = (1.0 - locality).clamp(1e-12, 1.0);
    -(nodes as f64) * (miss / (1.0 + miss)).ln()
}

/// One application waiting for a unit of a contended service resource (a worker's memory
/// credit for a push, its buffer credit for a fetch stream).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServiceRequest {
    /// The application's remaining work, as [`remaining_work`] computes it.
    pub work: RemainingWork,
    /// The application's execution slackness ([`execution_slackness`]): how much longer it
    /// has existed than its service alone would have taken.
    pub slackness: f64,
    /// Arrival order of the request (smaller: earlier), the tie-break.
    pub arrival: u64,
}

/// Which waiting request a resource serves next under FCS.
///
/// The dissertation's two rules carried over from reduce slots to a service's resources:
/// Algorithm 2 serves jobs "of increasing remaining work" (least `T_rs` first, ties by
/// `R_left`), and Algorithm 1's `IsPreemptable` stops passing over a job whose slackness
/// reached the cap: such a request can no longer wait for smaller ones and is served
/// first (the earliest of them when several are). Progress and "newly launched" have no
/// meaning for a request that has not started, so only the slackness bound applies.
/// Ties in remaining work go to the earlier request. `None` for no requests.
pub fn select_request(requests: &[ServiceRequest], cfg: &FcsConfig) -> Option<usize> {
    let starved = (0..requests.len())
        .filter(|&i| requests[i].slackness >= cfg.slack_cap)
        .min_by_key(|&i| requests[i].arrival);
    starved.or_else(|| {
        (0..requests.len()).min_by(|&a, &b| {
            let (ra, rb) = (&requests[a], &requests[b]);
            ra.work.cmp_work(&rb.work).then(ra.arrival.cmp(&rb.arrival))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: u64, progress: f64, total: f64, service: f64) -> RunningTask {
        RunningTask {
            id,
            progress,
            total_secs: total,
            service_secs: service,
            since_launch_secs: 10.0,
        }
    }

    fn work(t_rs: f64, r_left: u64) -> RemainingWork {
        RemainingWork { t_rs, r_left }
    }

    #[test]
    fn remaining_shuffle_time_in_waves() {
        let p = JobProgress {
            maps_left: 100,
            maps_per_wave: 20.0,
            avg_map_secs: 30.0,
            reduce_total: 10,
            reduce_done: 4,
        };
        let w = remaining_work(&p);
        assert_eq!(w.t_rs, 150.0);
        assert_eq!(w.r_left, 6);
        let done = JobProgress {
            maps_left: 0,
            maps_per_wave: 0.0,
            ..p
        };
        assert_eq!(remaining_work(&done).t_rs, 0.0);
        let stalled = JobProgress {
            maps_per_wave: 0.0,
            ..p
        };
        assert!(remaining_work(&stalled).t_rs.is_infinite());
    }

    #[test]
    fn work_orders_by_shuffle_time_then_bytes() {
        assert_eq!(work(1.0, 100).cmp_work(&work(2.0, 0)), Ordering::Less);
        assert_eq!(work(0.0, 5).cmp_work(&work(0.0, 3)), Ordering::Greater);
        assert_eq!(work(0.0, 3).cmp_work(&work(0.0, 3)), Ordering::Equal);
    }

    #[test]
    fn slackness_matches_definition() {
        // Ran 10 s for 50% of the work (estimate 20 s) but exists for 60 s: slack 3.
        assert_eq!(execution_slackness(60.0, 10.0, 0.5), 3.0);
        assert_eq!(execution_slackness(60.0, 0.0, 0.0), 1.0);
    }

    #[test]
    fn preemptable_rules_70_percent_slack_and_new() {
        let cfg = FcsConfig::default();
        assert!(is_preemptable(&task(1, 0.5, 10.0, 10.0), &cfg));
        assert!(is_preemptable(&task(1, 0.7, 10.0, 10.0), &cfg));
        assert!(!is_preemptable(&task(1, 0.71, 10.0, 10.0), &cfg));
        // Slack 5 reached: 0.5 done in 10 s, alive 100 s -> 100 / 20 = 5.
        assert!(!is_preemptable(&task(1, 0.5, 100.0, 10.0), &cfg));
        let mut fresh = task(1, 0.0, 1.0, 1.0);
        fresh.since_launch_secs = 1.0;
        assert!(!is_preemptable(&fresh, &cfg));
    }

    #[test]
    fn preempts_largest_work_first_and_only_larger_jobs() {
        let cfg = FcsConfig::default();
        let jobs = vec![
            RunningJob {
                work: work(50.0, 0),
                tasks: vec![task(1, 0.1, 5.0, 5.0), task(2, 0.1, 5.0, 5.0)],
            },
            RunningJob {
                work: work(500.0, 0),
                tasks: vec![task(3, 0.1, 5.0, 5.0), task(4, 0.9, 5.0, 5.0)],
            },
            RunningJob {
                work: work(5.0, 0),
                tasks: vec![task(5, 0.1, 5.0, 5.0)],
            },
        ];
        // Requester of work 10 needs 3 slots, 0 free: job 1 (500) first, skipping the 90% task,
        // then job 0 (50); job 2 (5) is smaller than the requester and is never touched.
        assert_eq!(
            select_preemptions(&work(10.0, 0), 3, 0, &jobs, &cfg),
            vec![3, 1, 2]
        );
        assert!(select_preemptions(&work(10.0, 0), 2, 2, &jobs, &cfg).is_empty());
        assert!(select_preemptions(&work(1000.0, 0), 2, 0, &jobs, &cfg).is_empty());
        assert!(select_preemptions(&work(10.0, 0), 1, 0, &[], &cfg).is_empty());
        // Equal T_rs: the tie is broken by R_left.
        let tie = vec![RunningJob {
            work: work(10.0, 9),
            tasks: vec![task(7, 0.1, 5.0, 5.0)],
        }];
        assert_eq!(
            select_preemptions(&work(10.0, 1), 1, 0, &tie, &cfg),
            vec![7]
        );
        assert!(select_preemptions(&work(10.0, 9), 1, 0, &tie, &cfg).is_empty());
    }

    #[test]
    fn launch_prefers_smallest_job_and_local_resume() {
        let cfg = FcsConfig {
            migration_delay: 1,
            ..FcsConfig::default()
        };
        let mut jobs = vec![
            WaitingJob {
                work: work(100.0, 0),
                fresh: vec![10],
                preempted: vec![],
            },
            WaitingJob {
                work: work(1.0, 0),
                fresh: vec![],
                preempted: vec![PreemptedTask {
                    id: 20,
                    node: 7,
                    skipped: 0,
                }],
            },
        ];
        // Node 3: job 1's task lives on node 7, so it is skipped (counter 1); job 0 runs fresh.
        assert_eq!(
            select_launch(3, &mut jobs, &cfg),
            Some(Launch::Fresh(0, 10))
        );
        assert_eq!(jobs[1].preempted[0].skipped, 1);
        // Node 7 resumes it locally.
        let mut again = jobs.clone();
        assert_eq!(
            select_launch(7, &mut again, &cfg),
            Some(Launch::Resume(1, 20))
        );
        // Node 3 again: 1 > D = 1 is false, so the counter becomes 2 and nothing runs;
        // the visit after that migrates the task.
        assert_eq!(select_launch(3, &mut jobs, &cfg), None);
        assert_eq!(
            select_launch(3, &mut jobs, &cfg),
            Some(Launch::Migrate(1, 20))
        );
        assert_eq!(select_launch(3, &mut jobs, &cfg), None);
    }

    #[test]
    fn delay_formula_reproduces_dissertation_example() {
        // M = 20, L = 0.95 gives D ~ 61.
        let d = migration_delay(20, 0.95);
        assert!((d - 60.89).abs() < 0.01, "{d}");
    }
    fn request(t_rs: f64, r_left: u64, slackness: f64, arrival: u64) -> ServiceRequest {
        ServiceRequest {
            work: work(t_rs, r_left),
            slackness,
            arrival,
        }
    }

    #[test]
    fn requests_served_least_remaining_work_first() {
        let cfg = FcsConfig::default();
        // A large application (100 maps left at 20 per wave of 30 s: 150 s) asked first; a
        // small one (2 maps left: 3 s) later; the small one is served first.
        let large = remaining_work(&JobProgress {
            maps_left: 100,
            maps_per_wave: 20.0,
            avg_map_secs: 30.0,
            reduce_total: 1 << 30,
            reduce_done: 0,
        });
        let small = remaining_work(&JobProgress {
            maps_left: 2,
            maps_per_wave: 20.0,
            avg_map_secs: 30.0,
            reduce_total: 1 << 20,
            reduce_done: 0,
        });
        let reqs = [
            ServiceRequest {
                work: large,
                slackness: 1.0,
                arrival: 0,
            },
            ServiceRequest {
                work: small,
                slackness: 1.0,
                arrival: 1,
            },
        ];
        assert_eq!(select_request(&reqs, &cfg), Some(1));
        // Equal shuffle time: fewer bytes left wins; equal work: the earlier request.
        let tie = [request(0.0, 9, 1.0, 0), request(0.0, 3, 1.0, 1)];
        assert_eq!(select_request(&tie, &cfg), Some(1));
        let same = [request(0.0, 3, 1.0, 7), request(0.0, 3, 1.0, 2)];
        assert_eq!(select_request(&same, &cfg), Some(1));
        assert_eq!(select_request(&[], &cfg), None);
    }

    #[test]
    fn slackness_cap_stops_the_large_application_from_starving() {
        let cfg = FcsConfig::default();
        // The dissertation's cap of 5: 0.5 done after 10 s of service while alive 100 s is
        // slack 5, so the large application is served before the smaller ones.
        let slack = execution_slackness(100.0, 10.0, 0.5);
        assert_eq!(slack, 5.0);
        let reqs = [
            request(1.0, 10, 1.0, 0),
            request(500.0, 1 << 30, slack, 5),
            request(2.0, 10, 1.0, 1),
        ];
        assert_eq!(select_request(&reqs, &cfg), Some(1));
        // Just under the cap it still waits.
        let under = [request(1.0, 10, 1.0, 0), request(500.0, 1 << 30, 4.99, 5)];
        assert_eq!(select_request(&under, &cfg), Some(0));
        // Among several at the cap, the earliest goes first.
        let both = [request(500.0, 1, 6.0, 9), request(900.0, 1, 5.0, 4)];
        assert_eq!(select_request(&both, &cfg), Some(1));
    }
}
