//! Connections a server keeps to other servers' data endpoints (the coordinator to its
//! workers, a primary worker to its replicas), one per address, reopened when broken.

use std::collections::HashMap;
use std::sync::Arc;

use crossdock_client::{ClientError, Keyring, RpcConnection};

/// One pipelined connection per peer address, each authenticated with the cluster's
/// keyring.
pub struct Peers {
    keyring: Keyring,
    conns: tokio::sync::Mutex<HashMap<String, Arc<RpcConnection>>>,
}

impl Peers {
    /// No connections yet; each new one proves the keys of `keyring`.
    pub fn new(keyring: Keyring) -> Peers {
        Peers {
            keyring,
            conns: Default::default(),
        }
    }

    /// The keys every connection proves (the cluster secret, when authentication is on).
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The open connection to `addr`, connecting if there is none or it broke. The
    /// connect happens outside the map's lock, so an unreachable peer delays only the
    /// callers that need it.
    pub async fn get(&self, addr: &str) -> Result<Arc<RpcConnection>, ClientError> {
        let cached = self
            .conns
            .lock()
            .await
            .get(addr)
            .filter(|c| !c.is_closed())
            .cloned();
        if let Some(c) = cached {
            return Ok(c);
        }
        let c = Arc::new(RpcConnection::connect(addr, &self.keyring).await?);
        self.conns.lock().await.insert(addr.to_string(), c.clone());
        Ok(c)
    }
}
