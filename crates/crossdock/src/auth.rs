//! The flags that turn authentication on or off: the cluster secret the coordinator
//! and the workers share (`docs/security.md`).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use crossdock_proto::auth::ClusterSecret;

use crate::config::FileConfig;

/// Authentication of a coordinator, worker or standalone cluster.
#[derive(Args, Debug, Default)]
pub struct AuthArgs {
    /// File holding the cluster secret (at least 32 bytes; the same file on the
    /// coordinator and every worker). Workers and the coordinator prove it to each
    /// other, and app tokens are derived from it. `crossdock standalone` makes one of
    /// its own in memory when none is given.
    #[arg(long, env = "CROSSDOCK_SECRET_FILE")]
    secret_file: Option<PathBuf>,
    /// Runs without authentication: any client that reaches a port may act for any
    /// app and as the coordinator or a worker. Only for a network nobody else reaches.
    #[arg(long, env = "CROSSDOCK_NO_AUTH", conflicts_with = "secret_file")]
    no_auth: bool,
}

/// Where a missing secret comes from.
pub enum Missing {
    /// A standalone process: a random secret its coordinator and workers share.
    Generate,
    /// A coordinator or worker started alone: it must be given (or refused explicitly).
    Required(&'static str),
}

impl AuthArgs {
    /// The secret, `None` when authentication is off: flags, then the file, then `missing`.
    pub fn resolve(
        &self,
        file: &FileConfig,
        missing: Missing,
    ) -> Result<Option<Arc<ClusterSecret>>> {
        let off = self.no_auth || file.auth == Some(false);
        let path = self.secret_file.as_ref().or(file.secret_file.as_ref());
        match (off, path) {
            (true, Some(_)) if !self.no_auth => {
                bail!("the config file sets auth = false and a secret file; choose one")
            }
            (true, _) => Ok(None),
            (false, Some(path)) => {
                let raw = std::fs::read(path)
                    .with_context(|| format!("reading the cluster secret {}", path.display()))?;
                let secret = ClusterSecret::from_bytes(&raw)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("the cluster secret in {}", path.display()))?;
                Ok(Some(Arc::new(secret)))
            }
            (false, None) => match missing {
                Missing::Generate => Ok(Some(Arc::new(ClusterSecret::generate()))),
                Missing::Required(role) => bail!(
                    "{role} needs the cluster secret: --secret-file PATH (the same file on the \
                     coordinator and every worker; e.g. `head -c 32 /dev/urandom | base64 > \
                     secret`), or --no-auth to run without authentication"
                ),
            },
        }
    }
}
