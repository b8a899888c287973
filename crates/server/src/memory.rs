//! The worker's memory budget: credits for buffered shuffle bytes, shared between the
//! applications by a scheduling order and a per-application quota.
//!
//! A push takes credit for its payload *before* the payload is read from the socket, so
//! the worker never holds more buffered bytes than its budget. When no credit is left
//! the connection simply stops reading: the pusher's TCP window fills and its writes
//! wait. Credit returns when a batch has been written to its partition file (or its
//! shuffle is deleted). Fetch streams take their read buffers from a budget of their own.
//!
//! **Who is served when credit returns** is the [`Order`]: first come first served
//! ([`Order::Fifo`]), or the Fair Completion Scheduler ([`Order::FairCompletion`]): the
//! application with the least remaining work first, unless an application's slackness
//! reached the cap (the decision is [`crossdock_policy::fair_completion::select_request`];
//! the worker refreshes every application's remaining work with [`MemoryBudget::set_work`]).
//! Either way a request that cannot be served yet is not passed by later ones, so a large
//! batch is never starved by a stream of small ones.
//!
//! **Quota**: an application holds at most [`MemoryBudget::app_limit`] bytes of credit at
//! once. A request beyond it waits for the application's own credit to return and never
//! blocks the others (it is skipped, not queued ahead of them); the flusher writes an
//! application at its quota to disk first (see `storage::disk`). An application holding
//! nothing may always take one request, so a batch larger than the quota still passes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// Tokio's clock (the system's outside tests): tests of the fair order's slackness run on
// a paused clock, so a preempted test thread cannot change which app is served.
use tokio::time::Instant;

use crossdock_policy::fair_completion::{
    execution_slackness, select_request, FcsConfig, RemainingWork, ServiceRequest,
};
use tokio::sync::{oneshot, Notify};

/// The order in which waiting requests are served.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Order {
    /// Arrival order.
    Fifo,
    /// Least remaining work first, bounded by the slackness cap (Wang 2014, Chapter 4).
    FairCompletion(FcsConfig),
}

impl Order {
    /// Fair completion with the dissertation's parameters.
    pub fn fair() -> Order {
        Order::FairCompletion(FcsConfig::default())
    }

    /// The setting's name: `fifo` or `fair`.
    pub fn name(&self) -> &'static str {
        match self {
            Order::Fifo => "fifo",
            Order::FairCompletion(_) => "fair",
        }
    }
}

/// How a budget is shared between applications.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sharing {
    pub order: Order,
    /// The share of the budget one application may hold, in (0, 1].
    pub app_share: f64,
}

impl Default for Sharing {
    /// First come first served, no quota: one application alone gets the whole budget.
    fn default() -> Self {
        Sharing {
            order: Order::Fifo,
            app_share: 1.0,
        }
    }
}

/// What one application holds of a budget ([`MemoryBudget::holdings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    pub app: Arc<str>,
    /// Bytes it holds.
    pub held: u64,
    /// The most it may hold.
    pub limit: u64,
    /// The largest of its requests waiting on `limit` (0: none).
    pub blocked: u64,
}

/// One application's credit on this budget.
#[derive(Debug, Clone)]
struct AppCredit {
    /// Bytes it holds now.
    held: u64,
    /// The most it held at once.
    peak: u64,
    /// Bytes it was granted since it first asked (its progress).
    granted: u64,
    /// When it first asked.
    first: Instant,
    /// Time it spent passed over: with a request the order could have chosen (not one
    /// waiting on its own quota) while another application's request was granted (see
    /// [`AppCredit::slackness`]).
    passed_over: Duration,
    /// While it has a request waiting: the time up to which its wait was counted.
    waiting_since: Option<Instant>,
    /// Its requests waiting.
    waiting: usize,
    /// Whether, at the last dispatch, all its waiting requests waited on its own quota.
    quota_blocked: bool,
}

impl AppCredit {
    fn new(now: Instant) -> Self {
        AppCredit {
            held: 0,
            peak: 0,
            granted: 0,
            first: now,
            passed_over: Duration::ZERO,
            waiting_since: None,
            waiting: 0,
            quota_blocked: false,
        }
    }

    /// `E_slack` of the dissertation: its lifetime here over the lifetime its service alone
    /// would have needed for the progress made (`granted` of `granted + r_left` bytes).
    /// Its service time is its lifetime less the time it was passed over (waiting while
    /// others were granted credit), not less all the time it had a request waiting: a
    /// pusher with many batches in flight always has one waiting while a slow disk frees
    /// memory, even when every byte freed goes to it, and counted so it would look
    /// starved, past the cap, and be served before everyone (measured with
    /// `bench/congestion.py`: a small application waited for all of a large one's pushes).
    /// Before any progress, when the dissertation's formula has nothing to go on: its
    /// lifetime over its service time, once it is no longer "newly launched" (older than
    /// `min_secs`), so that an application never served cannot wait without bound.
    fn slackness(&self, now: Instant, r_left: u64, min_secs: f64) -> f64 {
        let total = now.duration_since(self.first).as_secs_f64();
        let service = (total - self.passed_over.as_secs_f64()).max(0.0);
        let done = self.granted as f64;
        if done == 0.0 {
            return if total < min_secs {
                1.0
            } else {
                total / service.max(1e-3)
            };
        }
        let progress = done / (done + r_left as f64);
        execution_slackness(total, service, progress)
    }

    /// Starts counting a wait (its first request waiting).
    fn start_waiting(&mut self, now: Instant) {
        self.waiting += 1;
        self.waiting_since.get_or_insert(now);
    }

    /// Stops counting a wait when its last waiting request left the queue.
    fn stop_waiting(&mut self) {
        self.waiting = self.waiting.saturating_sub(1);
        if self.waiting == 0 {
            self.waiting_since = None;
        }
    }
}

struct Waiter {
    /// Arrival order, also the waiter's identity.
    arrival: u64,
    app: Arc<str>,
    n: u64,
    tx: oneshot::Sender<()>,
    /// Counted in its application's `waiting` (it did not pass at once).
    counted: bool,
}

#[derive(Default)]
struct State {
    apps: HashMap<Arc<str>, AppCredit>,
    /// In arrival order.
    waiters: Vec<Waiter>,
    next_arrival: u64,
    /// Every application's remaining work, as last computed by the worker.
    work: HashMap<Arc<str>, RemainingWork>,
    /// Applications that asked for a smaller share than `app_limit`: their limit.
    limits: HashMap<Arc<str>, u64>,
}

/// A byte budget with an ordered queue of waiters and a per-application quota.
pub struct MemoryBudget {
    total: u64,
    app_limit: u64,
    order: Order,
    /// Bytes taken: changed only under the state's lock, read without it (the push path
    /// reads it per batch). The free credit is `total - used`.
    used: AtomicU64,
    peak: AtomicU64,
    state: Mutex<State>,
    /// Woken when a taker had to wait, so the flusher can make room early.
    pub pressure: Notify,
}

impl MemoryBudget {
    /// A budget of `total` bytes, first come first served, no quota.
    pub fn new(total: u64) -> Self {
        MemoryBudget::shared(total, Sharing::default())
    }

    /// A budget of `total` bytes shared as `sharing` says.
    pub fn shared(total: u64, sharing: Sharing) -> Self {
        let share = if sharing.app_share > 0.0 && sharing.app_share <= 1.0 {
            sharing.app_share
        } else {
            1.0
        };
        MemoryBudget {
            total,
            app_limit: ((total as f64 * share) as u64).clamp(1, total.max(1)),
            order: sharing.order,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            state: Mutex::new(State::default()),
            pressure: Notify::new(),
        }
    }

    /// The budget in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The most one application may hold at once.
    pub fn app_limit(&self) -> u64 {
        self.app_limit
    }

    /// Bytes currently taken.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The largest number of bytes taken at once since start.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("memory budget lock")
    }

    /// Takes `n` bytes of credit for `app`, waiting until the order serves it, the budget
    /// has them and the application's quota allows them. `n` must not exceed the budget,
    /// or this would wait forever; callers check. Cancel-safe: a dropped wait leaves the
    /// queue, and credit granted to it returns.
    pub async fn take(&self, app: &str, n: u64) {
        debug_assert!(n <= self.total);
        let now = Instant::now();
        let (arrival, rx) = {
            let mut st = self.lock();
            let app: Arc<str> = match st.apps.get_key_value(app) {
                Some((k, _)) => k.clone(),
                None => {
                    let k: Arc<str> = app.into();
                    st.apps.insert(k.clone(), AppCredit::new(now));
                    k
                }
            };
            // Nobody queued and room: served at once, whatever the order (the order
            // only decides between waiters), without a channel or a pass over the queue.
            if st.waiters.is_empty()
                && n <= self.total - self.used()
                && self.quota_allows(&st, &app, n)
            {
                self.grant(&mut st, &app, n);
                drop(st);
                self.peak.fetch_max(self.used(), Ordering::Relaxed);
                return;
            }
            let arrival = st.next_arrival;
            st.next_arrival += 1;
            let (tx, rx) = oneshot::channel();
            st.waiters.push(Waiter {
                arrival,
                app: app.clone(),
                n,
                tx,
                counted: false,
            });
            self.dispatch(&mut st, now);
            if !st.waiters.iter().any(|w| w.arrival == arrival) {
                drop(st);
                self.peak.fetch_max(self.used(), Ordering::Relaxed);
                return;
            }
            if let Some(w) = st.waiters.iter_mut().find(|w| w.arrival == arrival) {
                w.counted = true;
            }
            let a = st.apps.get_mut(&app).expect("entry made above");
            a.start_waiting(now);
            (arrival, rx)
        };
        self.pressure.notify_one();
        // The guard owns the receiver, so that a grant sent while the wait is being
        // dropped still lands in it and the guard, under the lock, returns it once.
        let mut guard = Waiting {
            budget: self,
            arrival,
            app,
            n,
            rx,
            done: false,
        };
        let _ = (&mut guard.rx).await;
        guard.done = true;
        self.peak.fetch_max(self.used(), Ordering::Relaxed);
    }

    /// Returns `n` bytes of credit taken for `app`.
    pub fn give_back(&self, app: &str, n: u64) {
        if n == 0 {
            return;
        }
        let mut st = self.lock();
        self.release(&mut st, app, n);
        self.dispatch(&mut st, Instant::now());
    }

    fn release(&self, st: &mut State, app: &str, n: u64) {
        let used = self.used();
        debug_assert!(n <= used, "credit returned twice");
        self.used.store(used.saturating_sub(n), Ordering::Relaxed);
        if let Some(a) = st.apps.get_mut(app) {
            a.held = a.held.saturating_sub(n);
        }
    }

    /// Bytes `app` holds now.
    pub fn held(&self, app: &str) -> u64 {
        self.lock().apps.get(app).map_or(0, |a| a.held)
    }

    /// The most `app` held at once (0 for an app it does not know).
    pub fn peak_held(&self, app: &str) -> u64 {
        self.lock().apps.get(app).map_or(0, |a| a.peak)
    }

    /// Requests waiting, and how many of them wait on their application's quota.
    pub fn waiting(&self) -> (usize, usize) {
        let st = self.lock();
        let quota = st
            .waiters
            .iter()
            .filter(|w| !self.within_quota(&st, w))
            .count();
        (st.waiters.len(), quota)
    }

    /// Holds `app` to `share` of the budget where that is below the budget's own
    /// per-application limit (`None`: back to the budget's own).
    pub fn set_app_share(&self, app: &str, share: Option<f64>) {
        let mut st = self.lock();
        match share {
            Some(s) if s > 0.0 => {
                let limit = ((self.total as f64 * s) as u64).clamp(1, self.app_limit);
                st.limits.insert(app.into(), limit);
            }
            _ => {
                st.limits.remove(app);
            }
        }
        self.dispatch(&mut st, Instant::now());
    }

    /// The most `app` may hold at once.
    pub fn limit_of(&self, app: &str) -> u64 {
        let st = self.lock();
        Self::limit_in(self.app_limit, &st, app)
    }

    fn limit_in(app_limit: u64, st: &State, app: &str) -> u64 {
        st.limits.get(app).copied().unwrap_or(app_limit)
    }

    /// The applications holding credit: what each holds, its limit, and the largest of
    /// its requests waiting on that limit (0: none).
    pub fn holdings(&self) -> Vec<Holding> {
        let st = self.lock();
        st.apps
            .iter()
            .filter(|(_, a)| a.held > 0)
            .map(|(k, a)| Holding {
                app: k.clone(),
                held: a.held,
                limit: Self::limit_in(self.app_limit, &st, k),
                blocked: st
                    .waiters
                    .iter()
                    .filter(|w| w.app == *k && !self.within_quota(&st, w))
                    .map(|w| w.n)
                    .max()
                    .unwrap_or(0),
            })
            .collect()
    }

    /// Sets every application's remaining work (FCS orders by it; an application missing
    /// from `work` counts as having none left, so a newcomer is served early) and serves
    /// whoever the new order lets through.
    pub fn set_work(&self, work: HashMap<Arc<str>, RemainingWork>) {
        let mut st = self.lock();
        st.work = work;
        self.dispatch(&mut st, Instant::now());
    }

    /// Forgets a deleted application (what it still holds returns as it is given back).
    pub fn forget(&self, app: &str) {
        let mut st = self.lock();
        if !st.waiters.iter().any(|w| &*w.app == app) {
            st.apps.remove(app);
        }
        st.work.remove(app);
        st.limits.remove(app);
        self.dispatch(&mut st, Instant::now());
    }

    fn within_quota(&self, st: &State, w: &Waiter) -> bool {
        self.quota_allows(st, &w.app, w.n)
    }

    /// Whether `app` may take `n` more under its limit (always, holding nothing).
    fn quota_allows(&self, st: &State, app: &str, n: u64) -> bool {
        let limit = Self::limit_in(self.app_limit, st, app);
        if limit >= self.total {
            return true;
        }
        let held = st.apps.get(app).map_or(0, |a| a.held);
        held == 0 || held + n <= limit
    }

    /// Gives `n` bytes of credit to `app` (the caller checked they are free).
    fn grant(&self, st: &mut State, app: &str, n: u64) {
        self.used.fetch_add(n, Ordering::Relaxed);
        if let Some(a) = st.apps.get_mut(app) {
            a.held += n;
            a.peak = a.peak.max(a.held);
            a.granted += n;
        }
    }

    /// Grants waiting requests while the order's choice fits in the free credit.
    fn dispatch(&self, st: &mut State, now: Instant) {
        loop {
            // Nothing waits (the common case on a give-back): nothing to grant or count.
            if st.waiters.is_empty() {
                return;
            }
            // In arrival order; a request waiting on its app's quota also holds back that
            // app's later requests, so that its own small pushes cannot starve it.
            let mut eligible: Vec<usize> = Vec::new();
            let mut held_back: Vec<&Arc<str>> = Vec::new();
            for (i, w) in st.waiters.iter().enumerate() {
                if held_back.contains(&&w.app) {
                    continue;
                }
                if self.within_quota(st, w) {
                    eligible.push(i);
                } else {
                    held_back.push(&w.app);
                }
            }
            // The applications the order can choose from now: a grant passes over the others
            // of them. One not among them has all its requests waiting on its own quota,
            // held back by its own holdings, not by the order, and is never charged for that
            // time: when it becomes choosable again, its wait starts counting then.
            let mut choosable: Vec<Arc<str>> = Vec::new();
            for &k in &eligible {
                let app = &st.waiters[k].app;
                if !choosable.contains(app) {
                    choosable.push(app.clone());
                }
            }
            for (app, a) in st.apps.iter_mut() {
                let now_blocked = held_back.contains(&app) && !choosable.contains(app);
                if a.quota_blocked && !now_blocked {
                    if let Some(since) = a.waiting_since.as_mut() {
                        *since = (*since).max(now);
                    }
                }
                a.quota_blocked = now_blocked;
            }
            let pick = match self.order {
                Order::Fifo => eligible.first().copied(),
                Order::FairCompletion(cfg) => {
                    let requests: Vec<ServiceRequest> = eligible
                        .iter()
                        .map(|&i| {
                            let w = &st.waiters[i];
                            let work = st.work.get(&w.app).copied().unwrap_or(RemainingWork {
                                t_rs: 0.0,
                                r_left: 0,
                            });
                            let slackness = st.apps.get(&w.app).map_or(1.0, |a| {
                                a.slackness(now, work.r_left, cfg.min_service_secs)
                            });
                            ServiceRequest {
                                work,
                                slackness,
                                arrival: w.arrival,
                            }
                        })
                        .collect();
                    select_request(&requests, &cfg).map(|k| eligible[k])
                }
            };
            let Some(i) = pick else { return };
            if st.waiters[i].n > self.total - self.used() {
                return;
            }
            let w = st.waiters.remove(i);
            self.grant(st, &w.app, w.n);
            // The other choosable applications were passed over since their wait was last
            // counted; for everyone waiting, the count restarts now.
            for (app, a) in st.apps.iter_mut() {
                if let Some(since) = a.waiting_since.as_mut() {
                    if *app != w.app && choosable.contains(app) {
                        a.passed_over += now.saturating_duration_since(*since);
                    }
                    // `now` may be older than a grant made meanwhile by another thread.
                    *since = (*since).max(now);
                }
            }
            if let Some(a) = st.apps.get_mut(&w.app) {
                if w.counted {
                    a.stop_waiting();
                }
            }
            // The receiver lives in the waiter's guard until the guard has taken the
            // waiter out of the queue under this lock, so this send cannot fail.
            let sent = w.tx.send(());
            debug_assert!(sent.is_ok(), "a queued waiter's receiver is alive");
        }
    }
}

/// A request in the queue; dropped before its grant, it leaves the queue, and dropped
/// after the grant but before its taker saw it, it returns the credit.
struct Waiting<'a> {
    budget: &'a MemoryBudget,
    arrival: u64,
    app: &'a str,
    n: u64,
    /// Dropped only after [`Drop::drop`] ran (fields drop after it).
    rx: oneshot::Receiver<()>,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let b = self.budget;
        let mut st = b.lock();
        let now = Instant::now();
        if let Some(pos) = st.waiters.iter().position(|w| w.arrival == self.arrival) {
            st.waiters.remove(pos);
            // Counted: it was queued before this guard existed.
            if let Some(a) = st.apps.get_mut(self.app) {
                a.stop_waiting();
            }
        } else {
            b.release(&mut st, self.app, self.n);
        }
        b.dispatch(&mut st, now);
    }
}

#[cfg(test)]
mod tests;
