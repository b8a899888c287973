//! The flags that say how a worker is shared between applications: the order waiting
//! pushes and fetches are served in, per-application quotas, congestion throttling.
//! Defaults are [`Tenancy::default`]; `docs/operations.md` ("Many applications on one
//! service") gives their reasons.

use anyhow::{bail, Result};
use clap::Args;
use crossdock_server::memory::Order;
use crossdock_server::worker::config::Tenancy;

use crate::config::{parse_duration, parse_size, FileConfig};

/// How a worker is shared between applications.
#[derive(Args, Debug, Default)]
pub struct TenancyArgs {
    /// Who is served first when memory credit or fetch buffers are short: `fair` (the
    /// application with the least remaining work, unless one waited five times its
    /// service time: fair completion scheduling) or `fifo` (arrival order) [default: fair].
    #[arg(long, env = "CROSSDOCK_SCHEDULING")]
    scheduling: Option<String>,
    /// The share of a worker's memory budget one application may hold, 0 to 1; a push
    /// beyond it waits for that application's own memory to be written to disk, never
    /// for another's, e.g. 0.5 on a shared cluster [default: 1, no limit].
    #[arg(long, env = "CROSSDOCK_APP_MEMORY_SHARE")]
    app_memory_share: Option<f64>,
    /// Most shuffle bytes one application may have stored on one worker (memory, disk
    /// and object store); a push beyond it is refused with `limit_exceeded`, e.g. 200GiB
    /// [default: no limit].
    #[arg(long, env = "CROSSDOCK_APP_STORED_QUOTA")]
    app_stored_quota: Option<String>,
    /// Congestion throttling: the delay added to the heaviest pusher's batches each time
    /// the worker's write latency doubles (removed as it halves); 0 turns it off
    /// [default: 50ms].
    #[arg(long, env = "CROSSDOCK_CONGESTION_STEP")]
    congestion_step: Option<String>,
}

impl TenancyArgs {
    /// The settings: flags, then the file, then the defaults.
    pub fn resolve(&self, file: &FileConfig) -> Result<Tenancy> {
        let d = Tenancy::default();
        let order = match self.scheduling.as_deref().or(file.scheduling.as_deref()) {
            None => d.order,
            Some("fair") => Order::fair(),
            Some("fifo") => Order::Fifo,
            Some(other) => bail!("--scheduling {other}: expected fair or fifo"),
        };
        let share = self
            .app_memory_share
            .or(file.app_memory_share)
            .unwrap_or(d.app_memory_share);
        if !(share > 0.0 && share <= 1.0) {
            bail!("--app-memory-share {share}: expected a share above 0 and at most 1");
        }
        let quota = match self
            .app_stored_quota
            .as_ref()
            .or(file.app_stored_quota.as_ref())
        {
            None => None,
            Some(s) => Some(parse_size(s)?),
        };
        if quota == Some(0) {
            bail!("--app-stored-quota 0 would refuse every push; leave it out for no limit");
        }
        let step = match self
            .congestion_step
            .as_ref()
            .or(file.congestion_step.as_ref())
        {
            None => d.congestion_step,
            Some(s) if ["0", "0s", "0ms", "off"].contains(&s.trim()) => std::time::Duration::ZERO,
            Some(s) => parse_duration(s)?,
        };
        Ok(Tenancy {
            order,
            app_memory_share: share,
            app_stored_quota: quota,
            congestion_step: step,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn flags_win_over_the_file_and_the_defaults_fill_the_rest() {
        let file = FileConfig {
            scheduling: Some("fifo".into()),
            app_stored_quota: Some("1GiB".into()),
            ..FileConfig::default()
        };
        let t = TenancyArgs::default().resolve(&file).unwrap();
        assert_eq!(t.order, Order::Fifo);
        assert_eq!(t.app_stored_quota, Some(1 << 30));
        assert_eq!(t.app_memory_share, 1.0);
        assert_eq!(t.congestion_step, Duration::from_millis(50));
        let args = TenancyArgs {
            scheduling: Some("fair".into()),
            app_memory_share: Some(0.5),
            congestion_step: Some("0".into()),
            ..TenancyArgs::default()
        };
        let t = args.resolve(&file).unwrap();
        assert!(matches!(t.order, Order::FairCompletion(_)));
        assert_eq!(t.app_memory_share, 0.5);
        assert_eq!(t.congestion_step, Duration::ZERO);
        assert_eq!(
            TenancyArgs::default()
                .resolve(&FileConfig::default())
                .unwrap(),
            Tenancy::default()
        );
    }

    #[test]
    fn settings_that_could_not_work_are_refused() {
        let file = FileConfig::default();
        for (args, needle) in [
            (
                TenancyArgs {
                    scheduling: Some("lifo".into()),
                    ..TenancyArgs::default()
                },
                "--scheduling lifo",
            ),
            (
                TenancyArgs {
                    app_memory_share: Some(1.5),
                    ..TenancyArgs::default()
                },
                "--app-memory-share",
            ),
            (
                TenancyArgs {
                    app_memory_share: Some(0.0),
                    ..TenancyArgs::default()
                },
                "--app-memory-share",
            ),
            (
                TenancyArgs {
                    app_stored_quota: Some("0".into()),
                    ..TenancyArgs::default()
                },
                "--app-stored-quota",
            ),
        ] {
            let err = args.resolve(&file).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
