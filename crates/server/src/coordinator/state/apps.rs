//! The registered apps, their leases and their shuffles.

use crate::app_limits::AppLimits;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::StateError;
use super::prediction::SizeHistory;
use super::progress::ShuffleEntry;

/// A registered app.
#[derive(Debug)]
pub struct App {
    pub lease: Duration,
    pub expires: Instant,
    /// The limits it asked the workers to hold it to.
    pub limits: AppLimits,
    shuffles: HashMap<u32, Arc<ShuffleEntry>>,
    /// Final partition sizes of its last completed shuffles (soft state).
    history: SizeHistory,
}

impl App {
    /// The app's shuffles, by id.
    pub fn shuffles(&self) -> impl Iterator<Item = (u32, &Arc<ShuffleEntry>)> {
        self.shuffles.iter().map(|(&id, s)| (id, s))
    }

    /// How many shuffles the app has registered.
    pub fn shuffle_count(&self) -> usize {
        self.shuffles.len()
    }
}

/// The apps, by id.
#[derive(Debug, Default)]
pub struct Apps {
    apps: HashMap<String, App>,
    /// Copies of partitions per worker over every registered shuffle: the load that
    /// placement counts before workers report bytes. Kept up to date as shuffles come,
    /// go and move, so that placing a shuffle costs nothing per other shuffle. Behind
    /// its own lock because a relocation moves copies under a shared borrow.
    placed: Mutex<HashMap<u32, u64>>,
}

/// Adds (`add`) or removes a shuffle's copies from a tally.
fn tally(placed: &mut HashMap<u32, u64>, copies: &HashMap<u32, u64>, add: bool) {
    for (&w, &n) in copies {
        let v = placed.entry(w).or_default();
        *v = if add { *v + n } else { v.saturating_sub(n) };
        if *v == 0 {
            placed.remove(&w);
        }
    }
}

impl Apps {
    /// Registers an app or renews the lease of an already registered one.
    pub fn register(
        &mut self,
        app_id: &str,
        lease_ms: u32,
        now: Instant,
    ) -> Result<(), StateError> {
        crate::names::check_app_id(app_id)?;
        if lease_ms == 0 {
            return Err(StateError::ZeroLease);
        }
        let lease = Duration::from_millis(lease_ms as u64);
        let app = self.apps.entry(app_id.to_string()).or_insert_with(|| App {
            lease,
            expires: now + lease,
            limits: AppLimits::default(),
            shuffles: HashMap::new(),
            history: SizeHistory::default(),
        });
        app.lease = lease;
        app.expires = now + lease;
        Ok(())
    }

    /// Sets the limits an app asked for (each registration says them again).
    pub fn set_limits(&mut self, app_id: &str, limits: AppLimits) {
        if let Some(app) = self.apps.get_mut(app_id) {
            app.limits = limits;
        }
    }

    /// The limits an app asked for (none for an unknown app).
    pub fn limits(&self, app_id: &str) -> AppLimits {
        self.apps
            .get(app_id)
            .map_or(AppLimits::default(), |a| a.limits)
    }

    /// Extends an app's lease by its length from `now`.
    pub fn renew(&mut self, app_id: &str, now: Instant) -> Result<(), StateError> {
        let app = self.get_mut(app_id)?;
        app.expires = now + app.lease;
        Ok(())
    }

    /// Removes an app. True if it was registered.
    pub fn remove(&mut self, app_id: &str) -> bool {
        match self.apps.remove(app_id) {
            Some(app) => {
                self.forget(&app);
                true
            }
            None => false,
        }
    }

    /// Takes a removed app's shuffles out of the tally of placed copies.
    fn forget(&self, app: &App) {
        let mut placed = self.placed.lock().expect("placed lock");
        for s in app.shuffles.values() {
            tally(&mut placed, &s.lock().copies_per_worker(), false);
        }
    }

    /// Copies of partitions per worker, over every shuffle.
    pub fn placed(&self) -> HashMap<u32, u64> {
        self.placed.lock().expect("placed lock").clone()
    }

    /// Records that the layout of shuffle `shuffle_id` of `app_id`, which is `s`, went
    /// from `before` to `after` copies per worker. Ignored if `s` is not (or no longer)
    /// the registered shuffle, whose copies are then not in the tally.
    pub fn moved(
        &self,
        app_id: &str,
        shuffle_id: u32,
        s: &ShuffleEntry,
        before: &HashMap<u32, u64>,
        after: &HashMap<u32, u64>,
    ) {
        let registered = self
            .apps
            .get(app_id)
            .and_then(|a| a.shuffles.get(&shuffle_id))
            .is_some_and(|r| std::ptr::eq(Arc::as_ptr(r), s));
        if registered {
            let mut placed = self.placed.lock().expect("placed lock");
            tally(&mut placed, before, false);
            tally(&mut placed, after, true);
        }
    }

    /// Removes and returns the ids of apps whose lease ran out by `now`.
    pub fn take_expired(&mut self, now: Instant) -> Vec<String> {
        let expired: Vec<String> = self
            .apps
            .iter()
            .filter(|(_, a)| a.expires <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for id in &expired {
            self.remove(id);
        }
        expired
    }

    /// The app `app_id`.
    pub fn get(&self, app_id: &str) -> Result<&App, StateError> {
        self.apps.get(app_id).ok_or_else(|| StateError::UnknownApp {
            app: app_id.to_string(),
        })
    }

    fn get_mut(&mut self, app_id: &str) -> Result<&mut App, StateError> {
        self.apps
            .get_mut(app_id)
            .ok_or_else(|| StateError::UnknownApp {
                app: app_id.to_string(),
            })
    }

    /// True if the app is registered.
    pub fn contains(&self, app_id: &str) -> bool {
        self.apps.contains_key(app_id)
    }

    /// The ids of every app.
    pub fn ids(&self) -> Vec<String> {
        self.apps.keys().cloned().collect()
    }

    /// Every app, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &App)> {
        self.apps.iter()
    }

    /// A registered shuffle.
    pub fn shuffle(&self, app_id: &str, shuffle_id: u32) -> Result<Arc<ShuffleEntry>, StateError> {
        self.get(app_id)?
            .shuffles
            .get(&shuffle_id)
            .cloned()
            .ok_or_else(|| StateError::UnknownShuffle {
                app: app_id.to_string(),
                shuffle: shuffle_id,
            })
    }

    /// Adds a shuffle unless one with its id is there; returns the one that counts.
    pub fn add_shuffle(
        &mut self,
        app_id: &str,
        shuffle_id: u32,
        entry: ShuffleEntry,
    ) -> Result<Arc<ShuffleEntry>, StateError> {
        let app = self
            .apps
            .get_mut(app_id)
            .ok_or_else(|| StateError::UnknownApp {
                app: app_id.to_string(),
            })?;
        let s = app.shuffles.entry(shuffle_id).or_insert_with(|| {
            let mut placed = self.placed.lock().expect("placed lock");
            tally(&mut placed, &entry.lock().copies_per_worker(), true);
            Arc::new(entry)
        });
        Ok(s.clone())
    }

    /// Sets a shuffle (replay: the journal's record is what counts). Ignored for an
    /// app that is gone.
    pub fn put_shuffle(&mut self, app_id: &str, shuffle_id: u32, entry: ShuffleEntry) {
        if let Some(app) = self.apps.get_mut(app_id) {
            let mut placed = self.placed.lock().expect("placed lock");
            tally(&mut placed, &entry.lock().copies_per_worker(), true);
            if let Some(old) = app.shuffles.insert(shuffle_id, Arc::new(entry)) {
                tally(&mut placed, &old.lock().copies_per_worker(), false);
            }
        }
    }

    /// Removes a shuffle; returns it if it was registered.
    pub fn remove_shuffle(&mut self, app_id: &str, shuffle_id: u32) -> Option<Arc<ShuffleEntry>> {
        let s = self.get_mut(app_id).ok()?.shuffles.remove(&shuffle_id)?;
        let mut placed = self.placed.lock().expect("placed lock");
        tally(&mut placed, &s.lock().copies_per_worker(), false);
        Some(s)
    }

    /// Remembers the final sizes of a completed shuffle of `app_id` (ignored if the app
    /// is gone).
    pub fn remember_sizes(&mut self, app_id: &str, sizes: Arc<[u64]>) {
        if let Some(app) = self.apps.get_mut(app_id) {
            app.history.remember(sizes);
        }
    }

    /// The final sizes of `app_id`'s most recent completed shuffle of `num_partitions`.
    pub fn size_prior(&self, app_id: &str, num_partitions: u32) -> Option<Arc<[u64]>> {
        self.apps.get(app_id)?.history.prior(num_partitions)
    }

    /// Every shuffle of every app: (app id, shuffle id, shuffle).
    pub fn all_shuffles(&self) -> impl Iterator<Item = (&String, u32, &Arc<ShuffleEntry>)> {
        self.apps
            .iter()
            .flat_map(|(app, a)| a.shuffles().map(move |(id, s)| (app, id, s)))
    }

    /// (apps, shuffles).
    pub fn counts(&self) -> (u64, u64) {
        let shuffles = self.apps.values().map(|a| a.shuffles.len() as u64).sum();
        (self.apps.len() as u64, shuffles)
    }
}
