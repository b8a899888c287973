//! One worker's figures per application, for `/metrics` with the app id as a label.
//!
//! Label cardinality is bounded: at most [`LABELLED_APPS`] apps get their own series, the
//! ones with the most bytes held (memory and disk) and moved (pushed and fetched); the others
//! are summed into one series labelled `app=""`, which no app can be (an empty app id is
//! refused at registration). An app leaves the page when it is deleted. A series of an app
//! that drops out of the top, or the sum it joins, can go down: Prometheus reads that as a
//! counter reset, which `rate()` handles.

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use crate::metrics::describe;

/// Apps with series of their own on one worker's page.
pub const LABELLED_APPS: usize = 20;

/// Bytes moved for one app since the worker started (or since the app's data arrived).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    /// Payload bytes accepted from its pushes (a replica's copy counts where it is held).
    pub pushed: u64,
    /// Payload bytes sent to its readers.
    pub fetched: u64,
}

/// Each app's [`Traffic`], counted on the push and fetch paths.
#[derive(Default)]
pub struct AppTraffic {
    by_app: Mutex<HashMap<String, Traffic>>,
}

impl AppTraffic {
    /// Counts `bytes` accepted from a push of `app_id`.
    pub fn pushed(&self, app_id: &str, bytes: u64) {
        self.add(app_id, |t| t.pushed += bytes);
    }

    /// Counts `bytes` sent to a reader of `app_id`.
    pub fn fetched(&self, app_id: &str, bytes: u64) {
        self.add(app_id, |t| t.fetched += bytes);
    }

    fn add(&self, app_id: &str, f: impl FnOnce(&mut Traffic)) {
        let mut m = self.by_app.lock().expect("app traffic lock");
        match m.get_mut(app_id) {
            Some(t) => f(t),
            None => f(m.entry(app_id.to_string()).or_default()),
        }
    }

    /// Drops a deleted app's counters.
    pub fn forget(&self, app_id: &str) {
        self.by_app.lock().expect("app traffic lock").remove(app_id);
    }

    /// Every app's counters.
    pub fn snapshot(&self) -> HashMap<String, Traffic> {
        self.by_app.lock().expect("app traffic lock").clone()
    }
}

/// One series set of the page: an app (or, with `app` empty, the sum of the others).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AppRow {
    pub app: String,
    pub traffic: Traffic,
    /// Payload bytes of its partitions held in memory.
    pub buffered: u64,
    /// Bytes of its partition files on local disk.
    pub stored: u64,
}

/// Joins the traffic and the bytes held per app into at most `limit` rows of their own,
/// largest first, plus one summing the rest (if any).
pub fn rows(
    traffic: HashMap<String, Traffic>,
    held: HashMap<Arc<str>, (u64, u64)>,
    limit: usize,
) -> Vec<AppRow> {
    let mut by_app: HashMap<String, AppRow> = traffic
        .into_iter()
        .map(|(app, traffic)| {
            let row = AppRow {
                app: app.clone(),
                traffic,
                ..AppRow::default()
            };
            (app, row)
        })
        .collect();
    for (app, (buffered, stored)) in held {
        let row = by_app.entry(app.to_string()).or_insert_with(|| AppRow {
            app: app.to_string(),
            ..AppRow::default()
        });
        row.buffered = buffered;
        row.stored = stored;
    }
    let mut all: Vec<AppRow> = by_app.into_values().collect();
    let size = |r: &AppRow| r.buffered + r.stored + r.traffic.pushed + r.traffic.fetched;
    all.sort_by(|a, b| size(b).cmp(&size(a)).then_with(|| a.app.cmp(&b.app)));
    if all.len() > limit {
        let rest = all.split_off(limit);
        let mut other = AppRow::default();
        for r in rest {
            other.traffic.pushed += r.traffic.pushed;
            other.traffic.fetched += r.traffic.fetched;
            other.buffered += r.buffered;
            other.stored += r.stored;
        }
        all.push(other);
    }
    all
}

/// Escapes a label value for the Prometheus text format.
pub fn label_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Appends the per-app families, every sample carrying `labels` (the worker's) and `app`.
pub fn render(out: &mut String, rows: &[AppRow], labels: &str) {
    type Get = fn(&AppRow) -> u64;
    let families: [(&str, &str, &str, Get); 4] = [
        (
            "crossdock_worker_app_pushed_bytes_total",
            "counter",
            "Payload bytes accepted from an app's pushes (app=\"\": the apps without a series of their own).",
            |r| r.traffic.pushed,
        ),
        (
            "crossdock_worker_app_fetched_bytes_total",
            "counter",
            "Payload bytes sent to an app's readers.",
            |r| r.traffic.fetched,
        ),
        (
            "crossdock_worker_app_buffered_bytes",
            "gauge",
            "Payload bytes of an app's partitions held in memory.",
            |r| r.buffered,
        ),
        (
            "crossdock_worker_app_stored_bytes",
            "gauge",
            "Bytes of an app's partition files on local disk.",
            |r| r.stored,
        ),
    ];
    for (name, kind, help, get) in families {
        describe(out, name, kind, help);
        for r in rows {
            let _ = writeln!(
                out,
                "{name}{{{labels},app=\"{}\"}} {}",
                label_value(&r.app),
                get(r)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(apps: &[(&str, u64)]) -> HashMap<String, Traffic> {
        apps.iter()
            .map(|&(a, n)| {
                (
                    a.to_string(),
                    Traffic {
                        pushed: n,
                        fetched: n / 2,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn the_largest_apps_get_a_series_and_the_rest_one_sum() {
        let t = traffic(&[("a", 10), ("b", 1000), ("c", 5), ("d", 7)]);
        let held = HashMap::from([(Arc::from("c"), (100u64, 900u64)), (Arc::from("e"), (1, 0))]);
        let r = rows(t, held, 2);
        assert_eq!(r.len(), 3);
        // b moved 1500 bytes, c held 1000 and moved 7.
        assert_eq!(r[0].app, "b");
        assert_eq!((r[1].app.as_str(), r[1].stored), ("c", 900));
        // a, d and e summed.
        assert_eq!(r[2].app, "");
        assert_eq!(r[2].traffic.pushed, 10 + 7);
        assert_eq!(r[2].traffic.fetched, 5 + 3);
        assert_eq!(r[2].buffered, 1);
    }

    #[test]
    fn few_apps_have_no_sum() {
        let r = rows(traffic(&[("a", 1)]), HashMap::new(), LABELLED_APPS);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].app, "a");
    }

    #[test]
    fn app_ids_are_escaped_in_labels() {
        let mut out = String::new();
        let row = AppRow {
            app: "a\"b\\c\nd".into(),
            ..AppRow::default()
        };
        render(&mut out, &[row], "worker=\"0\"");
        assert!(
            out.contains(
                r#"crossdock_worker_app_pushed_bytes_total{worker="0",app="a\"b\\c\nd"} 0"#
            ),
            "{out}"
        );
    }

    #[test]
    fn counters_add_up_and_forget() {
        let t = AppTraffic::default();
        t.pushed("x", 5);
        t.pushed("x", 6);
        t.fetched("x", 2);
        assert_eq!(
            t.snapshot()["x"],
            Traffic {
                pushed: 11,
                fetched: 2
            }
        );
        t.forget("x");
        assert!(t.snapshot().is_empty());
    }
}
