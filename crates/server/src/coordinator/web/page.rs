//! The web UI's pages, rendered on the server from the same views the REST API returns.
//!
//! Plain HTML with inline style and no script: nothing to build or download, and the
//! page reloads itself every few seconds for live numbers. Every string a client chose
//! (app ids) is escaped. Each number is written twice: for people (`1.5 MiB`) and
//! exact in a `data-value` attribute, which is what the browser test compares with the API.

use super::view::{App, Bucket, Cluster, Overview, Shuffle, Worker};
use crate::names::app_name;
use crate::units::{human_bytes, human_rate};

/// Seconds between the pages' reloads.
const REFRESH_SECS: u32 = 5;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}\
.sub{color:#666;font-size:.9em}table{border-collapse:collapse;font-size:.9em}\
th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left}\
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th{background:#f4f4f4}\
.tiles{display:flex;gap:1em;flex-wrap:wrap}.tile{border:1px solid #ddd;border-radius:4px;\
padding:.5em .9em;min-width:8em}.tile b{display:block;font-size:1.3em}\
.lost{color:#b00}.full{color:#b60}.bar{background:#4a7fb5;height:1em}\
.hot{background:#c0504d}a{color:#2a5d9f}";

/// Escapes text for an HTML element or a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The path of a shuffle's page (the app id percent-encoded into one path segment).
pub fn shuffle_href(app_id: &str, shuffle_id: u32) -> String {
    format!("/apps/{}/shuffles/{shuffle_id}", app_name(app_id))
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\
         <title>{}</title><style>{STYLE}</style></head><body>",
        esc(title)
    )
}

/// A table cell holding a byte count.
fn bytes_td(field: &str, n: u64) -> String {
    format!(
        "<td class=\"n\" data-field=\"{field}\" data-value=\"{n}\">{}</td>",
        human_bytes(n)
    )
}

/// A table cell holding a rate in bytes per second.
fn rate_td(field: &str, r: f64) -> String {
    format!(
        "<td class=\"n\" data-field=\"{field}\" data-value=\"{}\">{}</td>",
        r.round() as u64,
        human_rate(r)
    )
}

/// A table cell holding a count.
fn count_td(field: &str, n: impl std::fmt::Display) -> String {
    format!("<td class=\"n\" data-field=\"{field}\" data-value=\"{n}\">{n}</td>")
}

fn tile(field: &str, label: &str, value: u64, shown: String) -> String {
    format!(
        "<div class=\"tile\" data-field=\"{field}\" data-value=\"{value}\"><b>{shown}</b>{label}</div>"
    )
}

/// `/`: the cluster, its workers and its apps with their shuffles.
pub fn overview(o: &Overview) -> String {
    let c: &Cluster = &o.cluster;
    let mut h = head("Crossdock");
    h.push_str(&format!(
        "<h1>Crossdock</h1><div class=\"sub\">coordinator {} · version {} · replication {} · \
         <a href=\"/api/v1/cluster\">REST API</a> · <a href=\"/metrics\">metrics</a></div>",
        esc(&c.coordinator),
        c.version,
        c.replication
    ));
    h.push_str("<h2>Cluster</h2><div class=\"tiles\">");
    for t in [
        tile(
            "workers_alive",
            "workers alive",
            c.workers_alive as u64,
            c.workers_alive.to_string(),
        ),
        tile(
            "workers_lost",
            "workers lost",
            c.workers_lost as u64,
            c.workers_lost.to_string(),
        ),
        tile("apps", "apps", c.apps as u64, c.apps.to_string()),
        tile(
            "shuffles",
            "shuffles",
            c.shuffles as u64,
            c.shuffles.to_string(),
        ),
        tile(
            "buffered_bytes",
            "in memory",
            c.buffered_bytes,
            human_bytes(c.buffered_bytes),
        ),
        tile(
            "stored_bytes",
            "on disk",
            c.stored_bytes,
            human_bytes(c.stored_bytes),
        ),
        tile(
            "object_bytes",
            "in object store",
            c.object_bytes,
            human_bytes(c.object_bytes),
        ),
        tile(
            "push_bytes_per_sec",
            "pushed",
            c.push_bytes_per_sec.round() as u64,
            human_rate(c.push_bytes_per_sec),
        ),
        tile(
            "fetch_bytes_per_sec",
            "fetched",
            c.fetch_bytes_per_sec.round() as u64,
            human_rate(c.fetch_bytes_per_sec),
        ),
    ] {
        h.push_str(&t);
    }
    h.push_str("</div>");
    workers_table(&mut h, &o.workers);
    apps_table(&mut h, &o.apps);
    h.push_str("</body></html>");
    h
}

fn workers_table(h: &mut String, workers: &[Worker]) {
    h.push_str(&format!("<h2>Workers ({})</h2>", workers.len()));
    if workers.is_empty() {
        h.push_str("<p>No worker has registered.</p>");
        return;
    }
    h.push_str(
        "<table id=\"workers\"><tr><th>id</th><th>address</th><th>host</th><th>zone</th>\
         <th>state</th><th>memory budget</th><th>in memory</th><th>on disk</th><th>in object store</th>\
         <th>push</th><th>fetch</th><th>pushed</th><th>fetched</th><th>partition copies</th>\
         <th>last heartbeat</th></tr>",
    );
    for w in workers {
        let class = match w.state {
            "lost" => " class=\"lost\"",
            "disk full" => " class=\"full\"",
            _ => "",
        };
        h.push_str(&format!(
            "<tr data-worker=\"{}\"><td>{}</td><td data-field=\"addr\">{}</td><td>{}</td><td>{}</td>\
             <td{class} data-field=\"state\">{}</td>{}{}{}{}{}{}{}{}{}<td class=\"n\">{} ms ago</td></tr>",
            w.id,
            w.id,
            esc(&w.addr),
            esc(&w.host),
            esc(&w.zone),
            w.state,
            bytes_td("memory_budget", w.memory_budget),
            bytes_td("buffered_bytes", w.buffered_bytes),
            bytes_td("stored_bytes", w.stored_bytes),
            bytes_td("object_bytes", w.object_bytes),
            rate_td("push_bytes_per_sec", w.push_bytes_per_sec),
            rate_td("fetch_bytes_per_sec", w.fetch_bytes_per_sec),
            bytes_td("pushed_bytes", w.pushed_bytes),
            bytes_td("fetched_bytes", w.fetched_bytes),
            count_td("partition_copies", w.partition_copies),
            w.last_heartbeat_ms,
        ));
    }
    h.push_str("</table>");
}

fn apps_table(h: &mut String, apps: &[App]) {
    h.push_str(&format!("<h2>Applications ({})</h2>", apps.len()));
    if apps.is_empty() {
        h.push_str("<p>No application is registered.</p>");
        return;
    }
    h.push_str(
        "<table id=\"shuffles\"><tr><th>app</th><th>lease expires in</th><th>shuffle</th>\
         <th>maps committed</th><th>partitions</th><th>bytes</th><th>records</th>\
         <th>largest partition</th><th>skew (largest / mean)</th></tr>",
    );
    for a in apps {
        let lease = format!("{:.1} s", a.expires_in_ms as f64 / 1000.0);
        if a.shuffles.is_empty() {
            h.push_str(&format!(
                "<tr><td>{}</td><td class=\"n\">{lease}</td><td colspan=\"7\">no shuffle</td></tr>",
                esc(&a.app_id)
            ));
        }
        for s in &a.shuffles {
            h.push_str(&format!(
                "<tr data-app=\"{}\" data-shuffle=\"{}\"><td>{}</td><td class=\"n\">{lease}</td>\
                 <td><a href=\"{}\">{}</a></td>\
                 <td class=\"n\" data-field=\"maps_committed\" data-value=\"{}\">{} / {}</td>\
                 {}{}{}{}<td class=\"n\" data-field=\"skew\" data-value=\"{:.2}\">{:.2}</td></tr>",
                esc(&a.app_id),
                s.shuffle_id,
                esc(&a.app_id),
                esc(&shuffle_href(&a.app_id, s.shuffle_id)),
                s.shuffle_id,
                s.maps_committed,
                s.maps_committed,
                s.num_maps,
                count_td("num_partitions", s.num_partitions),
                bytes_td("bytes", s.bytes),
                count_td("records", s.records),
                bytes_td("largest_partition_bytes", s.largest_partition_bytes),
                s.skew,
                s.skew,
            ));
        }
    }
    h.push_str("</table>");
}

/// `/apps/{app}/shuffles/{id}`: one shuffle's partitions, their sizes and copies.
pub fn shuffle(s: &Shuffle) -> String {
    let m = &s.summary;
    let mut h = head(&format!("Crossdock: {} shuffle {}", s.app_id, m.shuffle_id));
    h.push_str(&format!(
        "<h1>Shuffle {} of {}</h1><div class=\"sub\"><a href=\"/\">overview</a> · \
         <a href=\"/api/v1{}\">REST API</a></div>",
        m.shuffle_id,
        esc(&s.app_id),
        esc(&shuffle_href(&s.app_id, m.shuffle_id)),
    ));
    h.push_str("<div class=\"tiles\" style=\"margin-top:1em\">");
    for t in [
        tile(
            "maps_committed",
            &format!("of {} maps committed", m.num_maps),
            m.maps_committed as u64,
            m.maps_committed.to_string(),
        ),
        tile(
            "num_partitions",
            "partitions",
            m.num_partitions as u64,
            m.num_partitions.to_string(),
        ),
        tile("bytes", "committed", m.bytes, human_bytes(m.bytes)),
        tile(
            "largest_partition_bytes",
            "largest partition",
            m.largest_partition_bytes,
            human_bytes(m.largest_partition_bytes),
        ),
        tile(
            "median_partition_bytes",
            "median partition",
            m.median_partition_bytes,
            human_bytes(m.median_partition_bytes),
        ),
    ] {
        h.push_str(&t);
    }
    h.push_str(&format!(
        "<div class=\"tile\" data-field=\"skew\" data-value=\"{:.2}\"><b>{:.2}</b>skew (largest / mean)</div></div>",
        m.skew, m.skew
    ));
    histogram(&mut h, &s.histogram);
    h.push_str(&match s.predicted_after_maps {
        Some(n) => format!(
            "<h2>Partitions</h2><p class=\"sub\">Sizes predicted after {n} map(s) committed.</p>"
        ),
        None => "<h2>Partitions</h2><p class=\"sub\">No size prediction yet.</p>".to_string(),
    });
    h.push_str(
        "<table id=\"partitions\"><tr><th>partition</th><th>bytes</th><th>records</th>\
         <th>predicted</th><th>primary</th><th>replica</th></tr>",
    );
    for p in &s.partitions {
        h.push_str(&format!(
            "<tr data-partition=\"{}\"><td>{}</td>{}{}<td class=\"n\">{}</td>\
             <td data-field=\"primary\">{}</td><td data-field=\"replica\">{}</td></tr>",
            p.partition,
            p.partition,
            bytes_td("bytes", p.bytes),
            count_td("records", p.records),
            p.predicted_bytes.map(human_bytes).unwrap_or_default(),
            esc(&p.primary),
            esc(p.replica.as_deref().unwrap_or("")),
        ));
    }
    h.push_str("</table></body></html>");
    h
}

/// The partition-size histogram as bars; the bucket holding the largest partition is
/// drawn hot when it stands apart from the rest.
fn histogram(h: &mut String, buckets: &[Bucket]) {
    h.push_str(
        "<h2>Partition sizes</h2><table id=\"histogram\"><tr><th>bytes</th><th>partitions</th>\
         <th style=\"width:24em\"></th></tr>",
    );
    let most = buckets
        .iter()
        .map(|b| b.partitions)
        .max()
        .unwrap_or(0)
        .max(1);
    let last = buckets.len().saturating_sub(1);
    for (i, b) in buckets.iter().enumerate() {
        let width = (b.partitions as f64 / most as f64 * 100.0).round();
        // The top bucket with a gap below it: partitions far above the rest.
        let hot = i == last && i > 0 && b.partitions > 0 && buckets[i - 1].partitions == 0;
        h.push_str(&format!(
            "<tr data-bucket=\"{i}\"><td>{} – {}</td><td class=\"n\" data-field=\"partitions\" \
             data-value=\"{}\">{}</td><td><div class=\"bar{}\" style=\"width:{width}%\"></div></td></tr>",
            human_bytes(b.lo),
            human_bytes(b.hi),
            b.partitions,
            b.partitions,
            if hot { " hot" } else { "" },
        ));
    }
    h.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_strings_are_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script>&\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        // An app id with a slash stays one path segment.
        assert_eq!(shuffle_href("a/b c", 3), "/apps/a%2Fb%20c/shuffles/3");
    }
}
