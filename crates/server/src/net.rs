//! Serving connections: the accept loop every server runs, and its shutdown signal.

use std::sync::Arc;

use crossdock_client::tls::{Stream, TlsServer};

use crate::limits::Gate;

/// Signals shutdown to the accept loops and background tasks of a server.
pub type ShutdownSignal = tokio::sync::watch::Receiver<bool>;

/// Accepts connections until `shutdown` fires, serving each on its own task until then
/// (after the TLS handshake, within the read timeout, when `tls` is given). A connection
/// beyond `gate`'s limits is told why (an `Error` frame with request id 0, code
/// `limit_exceeded`, in the clear: no handshake is spent on it) and closed at once.
pub async fn accept_loop<F, Fut>(
    what: &'static str,
    listener: tokio::net::TcpListener,
    gate: Arc<Gate>,
    tls: Option<TlsServer>,
    mut shutdown: ShutdownSignal,
    serve: F,
) where
    F: Fn(Stream, std::net::IpAddr) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let ticket = match gate.admit(peer.ip()) {
                        Ok(t) => t,
                        Err(err) => {
                            tracing::debug!(%peer, "{what}: {}", err.message);
                            // Best effort and never blocking: the frame fits an empty
                            // socket buffer, and a peer that cannot take it learns
                            // from the close.
                            let _ = stream.try_write(&err.to_message().encode_frame(0));
                            continue;
                        }
                    };
                    let (serve, tls) = (serve.clone(), tls.clone());
                    let handshake = gate.limits().read_timeout;
                    let conn = async move {
                        stream.set_nodelay(true)?;
                        let stream = match tls {
                            None => Stream::Plain(stream),
                            Some(tls) => tokio::time::timeout(handshake, tls.accept(stream))
                                .await
                                .map_err(|_| {
                                    std::io::Error::new(
                                        std::io::ErrorKind::TimedOut,
                                        "no TLS handshake within the read timeout",
                                    )
                                })??,
                        };
                        serve(stream, peer.ip()).await
                    };
                    let mut stop = shutdown.clone();
                    let gate = gate.clone();
                    // Connections end with the server, as they would with its process.
                    tokio::spawn(async move {
                        tokio::select! {
                            res = conn => if let Err(e) = res {
                                if e.kind() == std::io::ErrorKind::TimedOut {
                                    gate.count_timeout();
                                }
                                tracing::debug!(%peer, error = %e, "{what} connection ended with an error");
                            },
                            _ = stop.changed() => {}
                        }
                        drop(ticket);
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "{what}: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}
