//! Serving connections: the accept loop every server runs, and its shutdown signal.

/// Signals shutdown to the accept loops and background tasks of a server.
pub type ShutdownSignal = tokio::sync::watch::Receiver<bool>;

/// Accepts connections until `shutdown` fires, serving each on its own task until then.
pub async fn accept_loop<F, Fut>(
    what: &'static str,
    listener: tokio::net::TcpListener,
    mut shutdown: ShutdownSignal,
    serve: F,
) where
    F: Fn(tokio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = std::io::Result<()>> + Send + 'static,
{
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let fut = serve(stream);
                    let mut stop = shutdown.clone();
                    // Connections end with the server, as they would with its process.
                    tokio::spawn(async move {
                        tokio::select! {
                            res = fut => if let Err(e) = res {
                                tracing::debug!(%peer, error = %e, "{what} connection ended with an error");
                            },
                            _ = stop.changed() => {}
                        }
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
