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

/// Writes a server's connection metrics, `crossdock_<role>_connections_*`, from its
/// gate's (open, refused, timed out) counts.
pub fn render_connections(
    out: &mut String,
    role: &str,
    (open, refused, timed_out): (u64, u64, u64),
) {
    let rows = [
        ("open", "gauge", "Connections open now.", open),
        (
            "refused_total",
            "counter",
            "Connections refused at a connection limit.",
            refused,
        ),
        (
            "timed_out_total",
            "counter",
            "Connections closed because the peer was idle or stalled inside a frame.",
            timed_out,
        ),
    ];
    for (suffix, kind, help, value) in rows {
        let name = format!("crossdock_{role}_connections_{suffix}");
        describe(out, &name, kind, help);
        sample(out, &name, "", value);
    }
}

/// Something that can write its metrics.
pub trait Render: Send + Sync {
    /// Appends the metrics in Prometheus text format.
    fn render(&self, out: &mut String);
}

/// Serves `GET /metrics`, `GET /healthz` (`ok` while the process serves) and `routes`
/// (the coordinator's web UI and API) on `addr` until `shutdown` fires. Returns the bound
/// address.
pub async fn serve(
    addr: &str,
    sources: Vec<Arc<dyn Render>>,
    routes: axum::Router,
    mut shutdown: crate::net::ShutdownSignal,
) -> std::io::Result<SocketAddr> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = routes.route("/healthz", get(|| async { "ok\n" })).route(
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

/// Upper bounds, in microseconds, of [`LatencyHistogram`]'s buckets: 1-2-5 steps from 50 µs
/// to 10 s, fine enough to tell a loopback round trip from a disk sync from a stall.
const LATENCY_BOUNDS_US: [u64; 18] = [
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    u64::MAX,
];

/// A latency distribution with fixed buckets, rendered as a Prometheus histogram (a
/// dashboard, or the benchmarks' `bench/services.py`, takes quantiles from the buckets).
/// Recording is two relaxed atomic adds.
#[derive(Default)]
pub struct LatencyHistogram {
    buckets: [AtomicU64; LATENCY_BOUNDS_US.len()],
    sum_us: AtomicU64,
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: std::time::Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let i = LATENCY_BOUNDS_US.partition_point(|&b| b < us);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Observations recorded so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Writes the histogram's `_bucket`, `_sum` and `_count` samples (seconds), after
    /// its `# HELP` and `# TYPE` lines.
    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        self.render_labelled(out, name, help, "");
    }

    /// As [`LatencyHistogram::render`], every sample carrying `labels` (`k="v",…`) before
    /// its `le`: one worker's histogram among several on one page.
    pub fn render_labelled(&self, out: &mut String, name: &str, help: &str, labels: &str) {
        describe(out, name, "histogram", help);
        let sep = if labels.is_empty() { "" } else { "," };
        let braced = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let mut cumulative = 0u64;
        for (bound, bucket) in LATENCY_BOUNDS_US.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = if *bound == u64::MAX {
                "+Inf".to_string()
            } else {
                format!("{}", *bound as f64 / 1e6)
            };
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
            );
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{braced} {sum}");
        let _ = writeln!(out, "{name}_count{braced} {cumulative}");
    }
}

/// Upper bounds of [`RatioHistogram`]'s buckets: 1-2-5 steps from 1e-6 to 10. A share
/// std of a uniform hash shuffle of thousands of partitions is around 1e-6; a relative
/// error of a total can exceed 1 (a prediction twice the truth is 1).
const RATIO_BOUNDS: [f64; 22] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1,
    0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// A distribution of dimensionless figures (errors, ratios) with fixed buckets, rendered
/// as a Prometheus histogram. For figures observed rarely (once per shuffle): the sum is
/// kept as an `f64` updated by compare-and-swap.
#[derive(Default)]
pub struct RatioHistogram {
    /// One per bound of [`RATIO_BOUNDS`], then the `+Inf` bucket.
    buckets: [AtomicU64; RATIO_BOUNDS.len() + 1],
    sum_bits: AtomicU64,
}

impl RatioHistogram {
    /// Records one observation; a NaN is ignored.
    pub fn observe(&self, v: f64) {
        if v.is_nan() {
            return;
        }
        let i = RATIO_BOUNDS.partition_point(|&b| b < v);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    /// Writes the histogram's `_bucket`, `_sum` and `_count` samples, after its `# HELP`
    /// and `# TYPE` lines.
    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        describe(out, name, "histogram", help);
        let mut cumulative = 0u64;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = RATIO_BOUNDS
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let sum = f64::from_bits(self.sum_bits.load(Ordering::Relaxed));
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ratios_fall_in_their_buckets() {
        let h = RatioHistogram::default();
        h.observe(0.0); // the first bucket
        h.observe(3e-4); // (2e-4, 5e-4]
        h.observe(0.5); // a bound belongs to its own bucket
        h.observe(40.0); // past the last finite bound
        h.observe(f64::NAN); // ignored
        let mut out = String::new();
        h.render(&mut out, "x_error", "Test.");
        assert!(out.contains("# TYPE x_error histogram"), "{out}");
        assert!(out.contains("x_error_bucket{le=\"0.000001\"} 1\n"), "{out}");
        assert!(out.contains("x_error_bucket{le=\"0.0002\"} 1\n"), "{out}");
        assert!(out.contains("x_error_bucket{le=\"0.0005\"} 2\n"), "{out}");
        assert!(out.contains("x_error_bucket{le=\"0.5\"} 3\n"), "{out}");
        assert!(out.contains("x_error_bucket{le=\"10\"} 3\n"), "{out}");
        assert!(out.contains("x_error_bucket{le=\"+Inf\"} 4\n"), "{out}");
        assert!(out.contains("x_error_sum 40.5003\n"), "{out}");
        assert!(out.contains("x_error_count 4\n"), "{out}");
    }

    #[test]
    fn observations_fall_in_their_buckets() {
        let h = LatencyHistogram::default();
        for _ in 0..98 {
            h.observe(Duration::from_micros(300)); // the (200, 500] µs bucket
        }
        h.observe(Duration::from_millis(30)); // (20, 50] ms
        h.observe(Duration::from_secs(60)); // past the last finite bound
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "Test.");
        assert!(out.contains("x_seconds_bucket{le=\"0.0002\"} 0\n"), "{out}");
        assert!(
            out.contains("x_seconds_bucket{le=\"0.0005\"} 98\n"),
            "{out}"
        );
        assert!(out.contains("x_seconds_bucket{le=\"0.02\"} 98\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"0.05\"} 99\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"10\"} 99\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"+Inf\"} 100\n"), "{out}");
        assert!(out.contains("x_seconds_count 100\n"), "{out}");
    }

    #[test]
    fn labelled_samples_put_their_labels_before_le() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(300));
        let mut out = String::new();
        h.render_labelled(&mut out, "x_seconds", "Test.", "worker=\"1\"");
        assert!(out.contains("# TYPE x_seconds histogram"), "{out}");
        assert!(
            out.contains("x_seconds_bucket{worker=\"1\",le=\"0.0005\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_sum{worker=\"1\"} 0.0003\n"),
            "{out}"
        );
        assert!(out.contains("x_seconds_count{worker=\"1\"} 1\n"), "{out}");
    }

    #[test]
    fn renders_cumulative_buckets_sum_and_count() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(40));
        h.observe(Duration::from_micros(1_500));
        let mut out = String::new();
        h.render(&mut out, "x_seconds", "Test.");
        assert!(out.contains("# TYPE x_seconds histogram"), "{out}");
        assert!(
            out.contains("x_seconds_bucket{le=\"0.00005\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("x_seconds_bucket{le=\"0.001\"} 1\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"0.002\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"+Inf\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_sum 0.00154\n"), "{out}");
        assert!(out.contains("x_seconds_count 2\n"), "{out}");
    }
}
