//! The Grafana dashboard in `deploy/grafana/crossdock.json` against a live `/metrics`:
//! every metric a query names is one the service exports (a histogram only through its
//! `_bucket`, `_sum` or `_count` series), and every label it groups by exists, so a renamed
//! metric cannot leave a panel silently empty.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{hold_app_data, http_get, standalone};

/// The metric families of a Prometheus text page (`# TYPE name kind`) and every label
/// name its samples carry.
fn families(page: &str) -> (BTreeMap<String, String>, BTreeSet<String>) {
    let mut kinds = BTreeMap::new();
    let mut labels = BTreeSet::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                kinds.insert(name.to_string(), kind.to_string());
            }
        } else if let Some((_, rest)) = line.split_once('{') {
            for pair in rest.split(',') {
                if let Some((k, _)) = pair.split_once('=') {
                    labels.insert(k.trim().to_string());
                }
            }
        }
    }
    (kinds, labels)
}

/// The `crossdock_…` names in a query.
fn metric_names(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("crossdock_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(&tail[..end]);
        rest = &tail[end..];
    }
    out
}

/// The labels of every `by (…)` in a query.
fn grouping_labels(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("by (") {
        let tail = &rest[i + 4..];
        let end = tail.find(')').expect("a closed by (…)");
        out.extend(tail[..end].split(',').map(|l| l.trim().to_string()));
        rest = &tail[end..];
    }
    out
}

/// Why `name` is not something a query can read from `kinds`, if it is not.
fn check_name(name: &str, kinds: &BTreeMap<String, String>) -> Option<String> {
    match kinds.get(name).map(String::as_str) {
        Some("histogram") => Some(format!(
            "{name} is a histogram: read its _bucket/_sum/_count"
        )),
        Some(_) => None,
        None => {
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s));
            match base.and_then(|b| kinds.get(b)).map(String::as_str) {
                Some("histogram") => None,
                _ => Some(format!("{name} is not exported")),
            }
        }
    }
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/grafana/crossdock.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();

    let (sa, _dir) = standalone(&[]);
    // An app's data, so that the per-app series (and their `app` label) are on the page.
    hold_app_data(&sa.coordinator, "dashboard", 4096);
    let page = http_get(&sa.metrics, "/metrics");
    let (kinds, mut labels) = families(&page);
    assert!(kinds.len() > 20, "a metrics page: {page}");
    // Added by Prometheus when it scrapes, or by histogram_quantile's input.
    labels.extend(["instance", "job", "le"].map(String::from));

    let panels = dash["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("?");
        let targets = panel["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if targets.is_empty() {
            problems.push(format!("{title}: no query"));
        }
        for t in targets {
            let expr = t["expr"].as_str().unwrap_or("");
            let names = metric_names(expr);
            if names.is_empty() {
                problems.push(format!("{title}: `{expr}` names no Crossdock metric"));
            }
            for name in names {
                used.insert(name.to_string());
                if let Some(why) = check_name(name, &kinds) {
                    problems.push(format!("{title}: {why}"));
                }
            }
            for label in grouping_labels(expr) {
                if !labels.contains(&label) {
                    problems.push(format!("{title}: no metric has the label `{label}`"));
                }
            }
            if expr.contains("histogram_quantile") && !expr.contains("_bucket") {
                problems.push(format!(
                    "{title}: histogram_quantile without a _bucket series"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        used.len() >= 20,
        "the dashboard reads {} metrics",
        used.len()
    );
    sa.proc.terminate();
}

#[test]
fn the_checks_catch_what_they_are_for() {
    let page = "# TYPE crossdock_a_total counter\ncrossdock_a_total{worker=\"0\"} 1\n\
                # TYPE crossdock_b_seconds histogram\ncrossdock_b_seconds_bucket{le=\"1\"} 0\n";
    let (kinds, labels) = families(page);
    assert!(labels.contains("worker"));
    assert_eq!(check_name("crossdock_a_total", &kinds), None);
    assert_eq!(check_name("crossdock_b_seconds_bucket", &kinds), None);
    assert!(check_name("crossdock_b_seconds", &kinds).is_some());
    assert!(check_name("crossdock_a_total_bucket", &kinds).is_some());
    assert!(check_name("crossdock_gone_total", &kinds).is_some());
    assert_eq!(
        metric_names("sum(rate(crossdock_a_total[1m])) + crossdock_c"),
        ["crossdock_a_total", "crossdock_c"]
    );
    assert_eq!(
        grouping_labels("sum by (instance, worker) (x) / sum by (le) (y)"),
        ["instance", "worker", "le"]
    );
}
