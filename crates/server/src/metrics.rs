//! Counters and gauges, and the HTTP endpoint that serves them in Prometheus text format.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crossdock_proto::ErrorCode;

/// Errors answered, by code.
#[derive(Default)]
pub struct ErrorCounts {
    counts: [AtomicU64; ErrorCode::ALL.len()],
}

impl ErrorCounts {
    /// Counts one error of `code`.
    pub fn inc(&self, code: ErrorCode) {
        let i = ErrorCode::ALL
            .iter()
            .position(|c| *c == code)
            .expect("every code is in ALL");
        self.counts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Errors of `code` so far.
    pub fn get(&self, code: ErrorCode) -> u64 {
        let i = ErrorCode::ALL
            .iter()
            .position(|c| *c == code)
            .expect("in ALL");
        self.counts[i].load(Ordering::Relaxed)
    }

    /// Writes one sample per code that occurred.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            let v = self.counts[i].load(Ordering::Relaxed);
            if v > 0 {
                let sep = if labels.is_empty() { "" } else { "," };
                let _ = writeln!(out, "{name}{{{labels}{sep}kind=\"{}\"}} {v}", c.name());
            }
        }
    }
}

/// Writes one sample line.
pub fn sample(out: &mut String, name: &str, labels: &str, value: u64) {
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {value}");
    } else {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// Writes the `# HELP` and `# TYPE` lines of a metric.
pub fn describe(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Something that can write its metrics.
pub trait Render: Send + Sync {
    /// Appends the metrics in Prometheus text format.
    fn render(&self, out: &mut String);
}

/// Serves `GET /metrics` on `addr` until `shutdown` fires. Returns the bound address.
pub async fn serve(
    addr: &str,
    sources: Vec<Arc<dyn Render>>,
    mut shutdown: crate::net::ShutdownSignal,
) -> std::io::Result<SocketAddr> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let sources = sources.clone();
            async move {
                let mut out = String::new();
                for s in &sources {
                    s.render(&mut out);
                }
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    out,
                )
            }
        }),
    );
    tokio::spawn(async move {
        let stop = async move {
            let _ = shutdown.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::error!(error = %e, "metrics endpoint failed");
        }
    });
    Ok(bound)
}

/// This process's peak resident set size in bytes (`VmHWM`), 0 where unknown.
pub fn peak_rss_bytes() -> u64 {
    read_status_kib("VmHWM:") * 1024
}

fn read_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
