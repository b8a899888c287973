//! Limits an application asks to be held to on every worker, stricter than the workers'
//! own settings (`--app-memory-share`, `--app-stored-quota`).
//!
//! The client sends them when it registers the app (`RegisterApp`'s appended fields), the
//! coordinator keeps them with the app (journalled, so a restart keeps them) and hands
//! them to each worker with every `PrepareShuffle`. A worker applies the smaller of the
//! app's and its own: an application can lower its limits (a job that must not crowd out
//! its neighbours, or that wants to hear early that it stores more than expected) but
//! never raise them, since the client is not the operator.

/// What an application asked for; zero means "the worker's setting".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AppLimits {
    /// Most shuffle bytes it may store on one worker.
    pub stored_quota: u64,
    /// Its share of a worker's memory, in parts per million.
    pub memory_share_ppm: u64,
}

/// Parts per million of a whole share.
pub const WHOLE: u64 = 1_000_000;

impl AppLimits {
    /// The share as a fraction, if one was asked for.
    pub fn memory_share(&self) -> Option<f64> {
        (self.memory_share_ppm != 0).then(|| self.memory_share_ppm as f64 / WHOLE as f64)
    }

    /// The stored quota, if one was asked for.
    pub fn stored_quota(&self) -> Option<u64> {
        (self.stored_quota != 0).then_some(self.stored_quota)
    }

    /// Refuses a share above the whole.
    pub fn check(&self) -> Result<(), String> {
        if self.memory_share_ppm > WHOLE {
            return Err(format!(
                "a memory share of {} parts per million is more than the whole ({WHOLE})",
                self.memory_share_ppm
            ));
        }
        Ok(())
    }
}

/// The smaller of two optional limits (`None`: no limit).
pub fn stricter(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_the_workers_setting_and_the_stricter_wins() {
        let none = AppLimits::default();
        assert_eq!((none.memory_share(), none.stored_quota()), (None, None));
        let some = AppLimits {
            stored_quota: 5,
            memory_share_ppm: 250_000,
        };
        assert_eq!(some.memory_share(), Some(0.25));
        assert_eq!(some.stored_quota(), Some(5));
        assert_eq!(stricter(Some(5), Some(3)), Some(3));
        assert_eq!(stricter(None, Some(3)), Some(3));
        assert_eq!(stricter(Some(5), None), Some(5));
        assert_eq!(stricter(None, None), None);
        assert!(some.check().is_ok());
        let over = AppLimits {
            memory_share_ppm: WHOLE + 1,
            ..none
        };
        assert!(over.check().unwrap_err().contains("more than the whole"));
    }
}
