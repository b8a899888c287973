//! TLS for every connection (`docs/security.md`, "TLS"): the stream both ends read and
//! write whether or not it is encrypted, and the two configurations built from PEM
//! files: [`TlsClient`] (the certificate authorities a client trusts) and [`TlsServer`]
//! (a server's certificate chain and key).
//!
//! Clients check the server's certificate against the trusted authorities and against
//! the host of the address they dialled (a DNS name or an IP address in the
//! certificate's subject alternative names), so an attacker on the path can neither read
//! nor alter the traffic, nor pose as a worker. Who the client is remains the business
//! of the handshake in [`crate::keyring`]: TLS here authenticates servers only.
//!
//! rustls with its `ring` provider: no system OpenSSL, TLS 1.2 and 1.3 only.

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::addr::host_of;

/// A connection as both ends use it: plain TCP, or TLS over TCP.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Why a TLS configuration could not be built from its files.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {what} from {}: {source}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("{} holds no {what} (expected PEM: -----BEGIN {what}-----)", path.display())]
    Empty { what: &'static str, path: PathBuf },
    #[error("{}: {source}", path.display())]
    Rejected {
        path: PathBuf,
        source: rustls::Error,
    },
}

/// The ring provider, for both ends: the one compiled in, whatever else the process
/// links (no process-wide default needs installing).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            what: "CERTIFICATE",
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// What a client trusts: the certificate authorities of a PEM file.
#[derive(Clone)]
pub struct TlsClient {
    connector: tokio_rustls::TlsConnector,
}

impl TlsClient {
    /// Trusts the certificates of the PEM file `ca` (one or more authorities, or the
    /// servers' own self-signed certificates).
    pub fn from_ca_file(ca: &Path) -> Result<TlsClient, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(ca, "trusted certificates")? {
            roots.add(cert).map_err(|source| TlsError::Rejected {
                path: ca.to_path_buf(),
                source,
            })?;
        }
        let config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Rejected {
                path: ca.to_path_buf(),
                source,
            })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// Runs the TLS handshake on `tcp`, checking the server's certificate against the
    /// host of `addr` (`host:port`, IPv6 as `[addr]:port`).
    pub async fn connect(&self, addr: &str, tcp: TcpStream) -> io::Result<Stream> {
        let host = host_of(addr);
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{host}' cannot be checked against a certificate: {e}"),
            )
        })?;
        let tls = self.connector.connect(name, tcp).await?;
        Ok(Stream::Tls(Box::new(tls.into())))
    }
}

/// A server's identity: its certificate chain and private key, from PEM files.
#[derive(Clone)]
pub struct TlsServer {
    acceptor: tokio_rustls::TlsAcceptor,
}

impl TlsServer {
    /// The chain in `cert` (the server's certificate first) and the key in `key`
    /// (PKCS#8, PKCS#1 or SEC1).
    pub fn from_files(cert: &Path, key: &Path) -> Result<TlsServer, TlsError> {
        let chain = certificates(cert, "the certificate chain")?;
        let key_der = PrivateKeyDer::from_pem_file(key).map_err(|source| match source {
            rustls::pki_types::pem::Error::NoItemsFound => TlsError::Empty {
                what: "PRIVATE KEY",
                path: key.to_path_buf(),
            },
            source => TlsError::Pem {
                what: "the private key",
                path: key.to_path_buf(),
                source,
            },
        })?;
        let rejected = |source| TlsError::Rejected {
            path: cert.to_path_buf(),
            source,
        };
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(rejected)?
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .map_err(rejected)?;
        Ok(TlsServer {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// Runs the server's side of the TLS handshake on an accepted connection.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<Stream> {
        let tls = self.acceptor.accept(tcp).await?;
        Ok(Stream::Tls(Box::new(tls.into())))
    }
}

/// A server's TLS settings: its own identity for the connections it accepts, and the
/// authorities it checks its peers against on the connections it opens (coordinator to
/// workers, workers to the coordinator and to their replicas).
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub identity: TlsServer,
    pub peers: TlsClient,
}

impl ServerTls {
    /// From the PEM files of the server's certificate chain, its key, and the
    /// authorities to trust.
    pub fn from_files(cert: &Path, key: &Path, ca: &Path) -> Result<ServerTls, TlsError> {
        Ok(ServerTls {
            identity: TlsServer::from_files(cert, key)?,
            peers: TlsClient::from_ca_file(ca)?,
        })
    }
}

/// Why [`generate`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("no host to make a certificate for")]
    NoHosts,
    #[error("making a certificate: {0}")]
    Make(#[from] rcgen::Error),
    #[error("writing {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// The files [`generate`] writes.
pub struct CertFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Writes a new certificate authority (`ca.pem`, its key `ca-key.pem`) and a server
/// certificate it signed for `hosts` (`cert.pem`, key `key.pem`) into `dir`. Give every
/// server `cert.pem`, `key.pem` and `ca.pem`, and the engines' clients `ca.pem`; keep
/// `ca-key.pem` offline (it signs more certificates). Keys are written readable by
/// their owner only.
pub fn generate(dir: &Path, hosts: &[String]) -> Result<CertFiles, CertError> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    if hosts.is_empty() {
        return Err(CertError::NoHosts);
    }
    std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Crossdock cluster CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate()?;
    let ca = ca_params.self_signed(&ca_key)?;
    let mut params = CertificateParams::new(hosts.to_vec())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "Crossdock server");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &ca, &ca_key)?;
    let files = CertFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    write(&files.ca, &ca.pem(), false)?;
    write(&dir.join("ca-key.pem"), &ca_key.serialize_pem(), true)?;
    write(&files.cert, &cert.pem(), false)?;
    write(&files.key, &key.serialize_pem(), true)?;
    Ok(files)
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), CertError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if secret { 0o600 } else { 0o644 };
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| CertError::Write {
            path: path.to_path_buf(),
            source,
        })
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsClient")
    }
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsServer")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = TlsClient::from_ca_file(&empty).unwrap_err().to_string();
        assert!(e.contains("empty.pem holds no CERTIFICATE"), "{e}");
        let e = TlsClient::from_ca_file(&dir.path().join("nope.pem"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nope.pem"), "{e}");
    }
}
