//! Byte counts and rates written for people: the CLI's messages and the web UI.

/// A byte count in binary units with one decimal (`512 B`, `1.0 GiB`).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// A throughput in bytes per second (`0 B/s`, `12.5 MiB/s`).
pub fn human_rate(bytes_per_sec: f64) -> String {
    format!("{}/s", human_bytes(bytes_per_sec.max(0.0).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_rates() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1 << 30), "1.0 GiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_rate(0.0), "0 B/s");
        assert_eq!(human_rate(12.5 * 1048576.0), "12.5 MiB/s");
    }
}
