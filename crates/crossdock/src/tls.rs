//! The flags that turn TLS on (`docs/security.md`, "TLS"), and `crossdock tls-certs`,
//! which makes a certificate authority and one server certificate for a cluster that
//! has no PKI of its own.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
pub use crossdock_client::tls::generate;
pub use crossdock_client::tls::CertFiles;
use crossdock_client::tls::{ServerTls, TlsClient};

use crate::config::FileConfig;

/// TLS of a coordinator, worker or standalone cluster: all three files, or none.
#[derive(Args, Debug, Default, Clone)]
pub struct TlsArgs {
    /// PEM file of this server's certificate chain (its own certificate first). With
    /// --tls-key and --tls-ca, every connection the server accepts or opens uses TLS.
    #[arg(long, env = "CROSSDOCK_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// PEM file of the private key of --tls-cert.
    #[arg(long, env = "CROSSDOCK_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// PEM file of the authorities whose certificates this server trusts when it
    /// connects to the coordinator or to other workers.
    #[arg(long, env = "CROSSDOCK_TLS_CA")]
    tls_ca: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS settings of a server, `None` for plain TCP: flags first, then the file.
    pub fn resolve(&self, file: &FileConfig) -> Result<Option<ServerTls>> {
        let cert = self.tls_cert.as_ref().or(file.tls_cert.as_ref());
        let key = self.tls_key.as_ref().or(file.tls_key.as_ref());
        let ca = self.tls_ca.as_ref().or(file.tls_ca.as_ref());
        match (cert, key, ca) {
            (None, None, None) => Ok(None),
            (Some(cert), Some(key), Some(ca)) => ServerTls::from_files(cert, key, ca)
                .map(Some)
                .context("setting up TLS"),
            _ => bail!(
                "TLS needs all of --tls-cert, --tls-key and --tls-ca (or none); \
                 `crossdock tls-certs --out DIR --hosts HOST,...` makes a set"
            ),
        }
    }
}

/// The trust of a client (the benchmark) in servers: the authorities of `ca`.
pub fn client(ca: &Path) -> Result<TlsClient> {
    TlsClient::from_ca_file(ca).context("setting up TLS")
}

#[derive(Args)]
pub struct TlsCertsArgs {
    /// Directory to write ca.pem, ca-key.pem, cert.pem and key.pem into (created).
    #[arg(long)]
    pub out: PathBuf,
    /// Host names and IP addresses the servers are reached at (comma-separated): the
    /// certificate is valid for these only.
    #[arg(long, default_value = "127.0.0.1,localhost")]
    pub hosts: String,
}

/// `crossdock tls-certs`.
pub fn tls_certs(a: TlsCertsArgs) -> Result<()> {
    let hosts: Vec<String> = a
        .hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(String::from)
        .collect();
    let files = generate(&a.out, &hosts)?;
    println!(
        "wrote {} (trust this), {} and {} (every server), and ca-key.pem (keep it offline) for {}",
        files.ca.display(),
        files.cert.display(),
        files.key.display(),
        hosts.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_files_configure_both_ends_and_keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = generate(dir.path(), &["127.0.0.1".into(), "localhost".into()]).unwrap();
        ServerTls::from_files(&f.cert, &f.key, &f.ca).unwrap();
        let mode = std::fs::metadata(&f.key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn some_but_not_all_files_are_refused() {
        let a = TlsArgs {
            tls_cert: Some("c.pem".into()),
            ..TlsArgs::default()
        };
        let e = a.resolve(&FileConfig::default()).unwrap_err().to_string();
        assert!(
            e.contains("all of --tls-cert, --tls-key and --tls-ca"),
            "{e}"
        );
    }
}
