//! Connections a server keeps to other servers' data endpoints (the coordinator to its
//! workers, a primary worker to its replicas), one per address, reopened when broken.

use std::collections::HashMap;
use std::sync::Arc;

use crossdock_client::{ClientError, RpcConnection};

/// One pipelined connection per peer address.
#[derive(Default)]
pub struct Peers {
    conns: tokio::sync::Mutex<HashMap<String, Arc<RpcConnection>>>,
}

impl Peers {
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
        let c = Arc::new(RpcConnection::connect(addr).await?);
        self.conns.lock().await.insert(addr.to_string(), c.clone());
        Ok(c)
    }
}
