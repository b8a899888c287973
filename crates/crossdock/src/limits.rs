//! The flags that bound what peers may hold on a server (connections, time, frame
//! memory: every command) and what clients may register (quotas: the coordinator).
//! Defaults are [`ConnLimits::default`] and [`Quotas::default`]; `docs/security.md`
//! gives their reasons.

use anyhow::{bail, Result};
use clap::Args;
use crossdock_server::coordinator::config::Quotas;
use crossdock_server::limits::ConnLimits;

use crate::config::{parse_duration, parse_size, FileConfig};

/// Connection limits of a coordinator or worker.
#[derive(Args, Debug, Default)]
pub struct LimitArgs {
    /// Connections open at once; one more is refused with `limit_exceeded` [default: 4096].
    #[arg(long, env = "CROSSDOCK_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Connections open at once from one host (IP address) [default: 1024].
    #[arg(long, env = "CROSSDOCK_MAX_CONNECTIONS_PER_PEER")]
    max_connections_per_peer: Option<usize>,
    /// A connection that sends nothing for this long is closed; `off` never closes
    /// one (clients reconnect on their next request) [default: 10m].
    #[arg(long, env = "CROSSDOCK_IDLE_TIMEOUT")]
    idle_timeout: Option<String>,
    /// Once a frame has begun, a peer silent for this long is cut off and what its
    /// frame held is given back; so is a peer that takes none of a reply for this long
    /// [default: 60s].
    #[arg(long, env = "CROSSDOCK_READ_TIMEOUT")]
    read_timeout: Option<String>,
    /// Memory for request frames over 64 KiB being received at once, over all
    /// connections, one peer host holding at most half (pushed batches count against
    /// --memory instead) [default: 256MiB].
    #[arg(long, env = "CROSSDOCK_FRAME_MEMORY")]
    frame_memory: Option<String>,
}

impl LimitArgs {
    /// The limits: flags, then the file, then the defaults.
    pub fn resolve(&self, file: &FileConfig) -> Result<ConnLimits> {
        let d = ConnLimits::default();
        let limits = ConnLimits {
            max_connections: self
                .max_connections
                .or(file.max_connections)
                .unwrap_or(d.max_connections),
            max_connections_per_peer: self
                .max_connections_per_peer
                .or(file.max_connections_per_peer)
                .unwrap_or(d.max_connections_per_peer),
            idle_timeout: match self.idle_timeout.as_ref().or(file.idle_timeout.as_ref()) {
                None => d.idle_timeout,
                Some(s) if s == "off" => None,
                Some(s) => Some(parse_duration(s)?),
            },
            read_timeout: match self.read_timeout.as_ref().or(file.read_timeout.as_ref()) {
                None => d.read_timeout,
                Some(s) => parse_duration(s)?,
            },
            frame_memory: match self.frame_memory.as_ref().or(file.frame_memory.as_ref()) {
                None => d.frame_memory,
                Some(s) => parse_size(s)?,
            },
        };
        if limits.max_connections == 0 || limits.max_connections_per_peer == 0 {
            bail!("--max-connections and --max-connections-per-peer must be at least 1");
        }
        let largest = crossdock_proto::MAX_CONTROL_FRAME as u64;
        if limits.frame_memory < largest {
            bail!(
                "--frame-memory must be at least {largest} bytes (64MiB), the largest frame \
                 the protocol carries, or such a frame could never be received"
            );
        }
        Ok(limits)
    }
}

/// What clients may register with a coordinator.
#[derive(Args, Debug, Default)]
pub struct QuotaArgs {
    /// Apps registered at once [default: 10000].
    #[arg(long, env = "CROSSDOCK_MAX_APPS")]
    max_apps: Option<usize>,
    /// Shuffles one app may have registered at once [default: 100000].
    #[arg(long, env = "CROSSDOCK_MAX_SHUFFLES_PER_APP")]
    max_shuffles_per_app: Option<usize>,
    /// Partitions of one shuffle [default: 1048576; at most what one status reply carries].
    #[arg(long, env = "CROSSDOCK_MAX_PARTITIONS")]
    max_partitions: Option<u32>,
    /// Maps of one shuffle [default: 1048576].
    #[arg(long, env = "CROSSDOCK_MAX_MAPS")]
    max_maps: Option<u32>,
    /// Longest lease an app may ask for [default: 24h].
    #[arg(long, env = "CROSSDOCK_MAX_LEASE")]
    max_lease: Option<String>,
}

impl QuotaArgs {
    /// The quotas: flags, then the file, then the defaults.
    pub fn resolve(&self, file: &FileConfig) -> Result<Quotas> {
        let d = Quotas::default();
        let q = Quotas {
            max_apps: self.max_apps.or(file.max_apps).unwrap_or(d.max_apps),
            max_shuffles_per_app: self
                .max_shuffles_per_app
                .or(file.max_shuffles_per_app)
                .unwrap_or(d.max_shuffles_per_app),
            max_partitions: self
                .max_partitions
                .or(file.max_partitions)
                .unwrap_or(d.max_partitions),
            max_maps: self.max_maps.or(file.max_maps).unwrap_or(d.max_maps),
            max_lease: match self.max_lease.as_ref().or(file.max_lease.as_ref()) {
                None => d.max_lease,
                Some(s) => parse_duration(s)?,
            },
        };
        q.check().map_err(anyhow::Error::msg)?;
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_win_over_the_file_and_the_defaults_fill_the_rest() {
        let file = FileConfig {
            max_connections: Some(10),
            idle_timeout: Some("off".into()),
            max_apps: Some(3),
            ..FileConfig::default()
        };
        let args = LimitArgs {
            max_connections: Some(20),
            read_timeout: Some("5s".into()),
            ..LimitArgs::default()
        };
        let l = args.resolve(&file).unwrap();
        assert_eq!(l.max_connections, 20);
        assert_eq!(l.idle_timeout, None);
        assert_eq!(l.read_timeout, std::time::Duration::from_secs(5));
        assert_eq!(l.frame_memory, ConnLimits::default().frame_memory);
        let q = QuotaArgs::default().resolve(&file).unwrap();
        assert_eq!(q.max_apps, 3);
        assert_eq!(q.max_partitions, Quotas::default().max_partitions);
    }

    #[test]
    fn limits_that_could_not_work_are_refused() {
        let file = FileConfig::default();
        let small = LimitArgs {
            frame_memory: Some("1MiB".into()),
            ..LimitArgs::default()
        };
        let err = small.resolve(&file).unwrap_err().to_string();
        assert!(err.contains("--frame-memory"), "{err}");
        let huge = QuotaArgs {
            max_partitions: Some(10_000_000),
            ..QuotaArgs::default()
        };
        let err = huge.resolve(&file).unwrap_err().to_string();
        assert!(err.contains("exceeds the largest frame"), "{err}");
        let zero = QuotaArgs {
            max_apps: Some(0),
            ..QuotaArgs::default()
        };
        assert!(zero.resolve(&file).is_err());
    }
}
