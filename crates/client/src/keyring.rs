//! The credentials a client proves on every connection it opens, the authorities it
//! checks servers against (TLS), and the handshake that proves them (`docs/security.md`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use crossdock_proto::auth::{proof, ClusterSecret};
use crossdock_proto::io::write_message;
use crossdock_proto::Message;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::connection::read_answer;
use crate::error::{ClientError, Result};
use crate::tls::TlsClient;

/// The keys a client holds: the cluster secret (the coordinator's and workers' own
/// connections) and app tokens (an app's driver and executors). Clones share one set,
/// so a token learned from `RegisterApp` serves every later connection. An empty
/// keyring sends no handshake at all (a cluster with authentication off, or a client
/// about to register its app).
#[derive(Clone, Default)]
pub struct Keyring {
    inner: Arc<Mutex<Keys>>,
}

#[derive(Default)]
struct Keys {
    cluster: Option<Arc<ClusterSecret>>,
    apps: BTreeMap<String, Bytes>,
    /// The authorities TLS connections are checked against; `None`: plain TCP.
    tls: Option<TlsClient>,
}

impl Keyring {
    /// A keyring with no keys.
    pub fn new() -> Keyring {
        Keyring::default()
    }

    /// A keyring holding the cluster secret; with `None` (authentication off), empty.
    pub fn cluster(secret: Option<Arc<ClusterSecret>>) -> Keyring {
        let k = Keyring::new();
        k.inner.lock().expect("keyring lock").cluster = secret;
        k
    }

    /// A keyring holding one app's token.
    pub fn app(app_id: &str, token: Bytes) -> Keyring {
        let k = Keyring::new();
        k.add_app(app_id, token);
        k
    }

    /// Adds (or replaces) an app's token. An empty token (authentication off) is not kept.
    pub fn add_app(&self, app_id: &str, token: Bytes) {
        if !token.is_empty() {
            let mut keys = self.inner.lock().expect("keyring lock");
            keys.apps.insert(app_id.to_string(), token);
        }
    }

    /// Opens every later connection with TLS, checking servers against `tls` (`None`:
    /// plain TCP). Shared by the keyring's clones.
    pub fn with_tls(self, tls: Option<TlsClient>) -> Keyring {
        self.inner.lock().expect("keyring lock").tls = tls;
        self
    }

    /// The TLS configuration connections are opened with, if any.
    pub fn tls(&self) -> Option<TlsClient> {
        self.inner.lock().expect("keyring lock").tls.clone()
    }

    /// The token of `app_id`, if this keyring holds it.
    pub fn token(&self, app_id: &str) -> Option<Bytes> {
        self.inner
            .lock()
            .expect("keyring lock")
            .apps
            .get(app_id)
            .cloned()
    }

    /// Every (app id, key) pair to prove, the cluster's first (with an empty app id).
    fn keys(&self) -> Vec<(String, Bytes)> {
        let keys = self.inner.lock().expect("keyring lock");
        let cluster = keys
            .cluster
            .iter()
            .map(|s| (String::new(), Bytes::copy_from_slice(s.as_bytes())));
        let apps = keys.apps.iter().map(|(a, t)| (a.clone(), t.clone()));
        cluster.chain(apps).collect()
    }
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = self.inner.lock().expect("keyring lock");
        f.debug_struct("Keyring")
            .field("cluster", &keys.cluster.is_some())
            .field("apps", &keys.apps.keys().collect::<Vec<_>>())
            .field("tls", &keys.tls.is_some())
            .finish()
    }
}

/// Proves every key of `keyring` on a freshly opened stream, before anything else is
/// sent on it: `Hello`, then one `Authenticate` per key, each answered in order. Uses
/// request ids from 1 and returns the next free one.
pub(crate) async fn handshake<S>(stream: &mut S, addr: &str, keyring: &Keyring) -> Result<u64>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let keys = keyring.keys();
    if keys.is_empty() {
        return Ok(1);
    }
    let io = |source| ClientError::Io {
        addr: addr.to_string(),
        source,
    };
    write_message(stream, 1, &Message::Hello)
        .await
        .map_err(io)?;
    stream.flush().await.map_err(io)?;
    let nonce = match reply(stream, addr, 1).await? {
        Message::Challenge { nonce } => nonce,
        other => return Err(ClientError::unexpected(addr, other)),
    };
    let mut id = 2;
    for (app_id, key) in &keys {
        let msg = Message::Authenticate {
            app_id: app_id.clone(),
            proof: proof(key, &nonce, app_id),
        };
        write_message(stream, id, &msg).await.map_err(io)?;
        id += 1;
    }
    stream.flush().await.map_err(io)?;
    for expected in 2..id {
        match reply(stream, addr, expected).await? {
            Message::Ok => {}
            other => return Err(ClientError::unexpected(addr, other)),
        }
    }
    Ok(id)
}

/// The next frame of a handshake, which must answer request `id`.
async fn reply<S: AsyncRead + Unpin>(stream: &mut S, addr: &str, id: u64) -> Result<Message> {
    match read_answer(stream, addr, "authentication handshake").await? {
        (_, Message::Error { code, message }) => Err(ClientError::remote(addr, code, message)),
        (got, _) if got != id => Err(ClientError::Corrupt(format!(
            "{addr} answered request {got} during the handshake, expected {id}"
        ))),
        (_, m) => Ok(m),
    }
}
