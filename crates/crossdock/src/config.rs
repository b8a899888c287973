//! Configuration: flags, `CROSSDOCK_*` environment variables and a TOML file.
//!
//! Precedence, highest first: command-line flag, environment variable, the file given
//! by `--config` (or `CROSSDOCK_CONFIG`), the built-in default. The file uses the same
//! names as the flags, with underscores:
//!
//! ```toml
//! listen = "127.0.0.1:7337"
//! data_dir = "/var/lib/crossdock"
//! memory = "4GiB"
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// Keys a configuration file may set. Unknown keys are an error, so a typo is caught.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub memory: Option<String>,
    pub workers: Option<u32>,
    pub coordinator: Option<String>,
    pub advertise_addr: Option<String>,
    pub host: Option<String>,
    pub zone: Option<String>,
    pub metrics_listen: Option<String>,
    pub worker_timeout: Option<String>,
    pub replication: Option<u32>,
    pub fsync: Option<bool>,
    pub durability: Option<String>,
    pub object_store: Option<String>,
    pub disk_quota: Option<String>,
    pub split_size: Option<String>,
    pub memory_only: Option<bool>,
    pub zero_copy_fetch: Option<bool>,
    pub max_connections: Option<usize>,
    pub max_connections_per_peer: Option<usize>,
    pub idle_timeout: Option<String>,
    pub read_timeout: Option<String>,
    pub frame_memory: Option<String>,
    pub max_apps: Option<usize>,
    pub max_shuffles_per_app: Option<usize>,
    pub max_partitions: Option<u32>,
    pub max_maps: Option<u32>,
    pub max_lease: Option<String>,
    pub prediction_threshold: Option<f64>,
    pub rebalance: Option<bool>,
    pub scheduling: Option<String>,
    pub app_memory_share: Option<f64>,
    pub app_stored_quota: Option<String>,
    pub congestion_step: Option<String>,
    pub secret_file: Option<PathBuf>,
    /// `false` turns authentication off (as `--no-auth`).
    pub auth: Option<bool>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
}

impl FileConfig {
    /// Reads the file, or returns the empty configuration when no file is given.
    pub fn load(path: Option<&Path>) -> Result<FileConfig> {
        let Some(path) = path else {
            return Ok(FileConfig::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
    }
}

/// Splits `12.5GiB` into 12.5 and `GiB`.
fn number_and_unit(s: &str) -> Result<(f64, &str), std::num::ParseFloatError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    Ok((num.parse()?, unit))
}

/// Parses a byte size: `1073741824`, `512MiB`, `1GiB`, `64KiB`, `2GB` (powers of ten for
/// KB/MB/GB/TB, powers of two for KiB/MiB/GiB/TiB).
pub fn parse_size(s: &str) -> Result<u64> {
    let (num, unit) = number_and_unit(s)
        .with_context(|| format!("'{s}' is not a size such as 512MiB or 1GiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => bail!(
            "unknown size unit '{other}' in '{s}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
        ),
    };
    let v = num * mult as f64;
    if !(v.is_finite() && v >= 0.0 && v < u64::MAX as f64) {
        bail!("size '{s}' is out of range");
    }
    Ok(v as u64)
}

/// Parses a duration: `500ms`, `10s`, `2m`, `1h`, or a plain number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let (num, unit) = number_and_unit(s)
        .with_context(|| format!("'{s}' is not a duration such as 500ms or 10s"))?;
    let secs = match unit.trim() {
        "" | "s" => num,
        "ms" => num / 1000.0,
        "m" | "min" => num * 60.0,
        "h" => num * 3600.0,
        other => bail!("unknown duration unit '{other}' in '{s}' (use ms, s, m or h)"),
    };
    if !(secs.is_finite() && secs > 0.0) {
        bail!("duration '{s}' must be positive");
    }
    Ok(Duration::from_secs_f64(secs))
}

pub use crossdock_server::units::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn file_rejects_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "memory = \"2GiB\"\nworkers = 3\n").unwrap();
        let c = FileConfig::load(Some(&p)).unwrap();
        assert_eq!(c.memory.as_deref(), Some("2GiB"));
        assert_eq!(c.workers, Some(3));
        std::fs::write(&p, "memroy = \"2GiB\"\n").unwrap();
        let err = FileConfig::load(Some(&p)).unwrap_err();
        assert!(format!("{err:#}").contains("memroy"), "{err:#}");
    }

    #[test]
    fn human() {}
}
