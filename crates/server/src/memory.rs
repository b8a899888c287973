//! The worker's memory budget: credits for buffered shuffle bytes.
//!
//! A push takes credit for its payload *before* the payload is read from the socket, so
//! the worker never holds more buffered bytes than its budget. When no credit is left
//! the connection simply stops reading: the pusher's TCP window fills and its writes
//! wait. Credit returns when a batch has been written to its partition file (or its
//! shuffle is deleted).

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{Notify, Semaphore};

/// A byte budget with a FIFO queue of waiters.
pub struct MemoryBudget {
    total: u64,
    credits: Semaphore,
    peak: AtomicU64,
    /// Woken when a taker had to wait, so the flusher can make room early.
    pub pressure: Notify,
}

impl MemoryBudget {
    /// A budget of `total` bytes (at most 2^61 - 1, tokio's semaphore limit).
    pub fn new(total: u64) -> Self {
        MemoryBudget {
            total,
            credits: Semaphore::new(total as usize),
            peak: AtomicU64::new(0),
            pressure: Notify::new(),
        }
    }

    /// The budget in bytes.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes currently taken.
    pub fn used(&self) -> u64 {
        self.total - self.credits.available_permits() as u64
    }

    /// The largest number of bytes taken at once since start.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes of credit, waiting (in FIFO order) until they are free.
    /// `n` must not exceed the budget, or this would wait forever; callers check.
    pub async fn take(&self, n: u64) {
        debug_assert!(n <= self.total);
        let n32 = u32::try_from(n).expect("batch sizes fit in u32");
        match self.credits.try_acquire_many(n32) {
            Ok(p) => p.forget(),
            Err(_) => {
                self.pressure.notify_one();
                self.credits
                    .acquire_many(n32)
                    .await
                    .expect("budget semaphore is never closed")
                    .forget();
            }
        }
        self.peak.fetch_max(self.used(), Ordering::Relaxed);
    }

    /// Returns `n` bytes of credit.
    pub fn give_back(&self, n: u64) {
        if n > 0 {
            self.credits.add_permits(n as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn take_waits_until_credit_returns() {
        let b = Arc::new(MemoryBudget::new(100));
        b.take(80).await;
        assert_eq!(b.used(), 80);
        let b2 = b.clone();
        let waiter = tokio::spawn(async move { b2.take(30).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "must wait: only 20 bytes free");
        b.give_back(80);
        waiter.await.unwrap();
        assert_eq!(b.used(), 30);
        assert_eq!(b.peak(), 80);
    }
}
