//! The coordinator's web UI and REST API against a real `crossdock standalone` holding a
//! skewed shuffle: the API's numbers are the ones pushed and committed, its errors are
//! clear, and the pages, loaded in headless Chromium (Debian's package), show exactly the
//! API's numbers. Screenshots of both pages are saved in `target/web-ui/`.
//!
//! Without Chromium the browser half is skipped with a message, unless
//! `CROSSDOCK_REQUIRE_CHROMIUM` is set (as `make test` sets it), which makes it a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{http_get, standalone_of};
use crossdock_client::{CoordinatorClient, FetchRange, Keyring, PartitionReader, WorkerClient};
use crossdock_proto::{checksum, AttemptId, CommitStatus, PartitionStat, PushHeader};
use serde_json::Value;

/// An app id a hostile client could choose: it must come out as text, never markup.
const APP: &str = "web-ui <b>&'test\"";
const MAPS: u32 = 4;
const PARTITIONS: u32 = 8;
/// Partition 0 is hot: each map writes this much into it and 1 KiB into each other one.
const HOT: usize = 48 << 10;
const COLD: usize = 1 << 10;

/// (status code, body) of `GET path`.
fn get(addr: &str, path: &str) -> (u16, String) {
    let resp = http_get(addr, path);
    let (head, body) = resp.split_once("\r\n\r\n").expect("an HTTP response");
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (code, body.to_string())
}

fn api(addr: &str, path: &str) -> Value {
    let (code, body) = get(addr, path);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn payload(map: u32, partition: u32) -> Vec<u8> {
    let len = if partition == 0 { HOT } else { COLD };
    (0..len)
        .map(|i| (i as u32 ^ map ^ partition) as u8)
        .collect()
}

/// Registers the app, pushes and commits shuffle 0 (every map), registers shuffle 1 (no
/// map committed), and reads partition 0 back once. Returns the bytes pushed.
async fn make_shuffles(coordinator: &str) -> u64 {
    let coord = CoordinatorClient::connect(coordinator, &Keyring::new())
        .await
        .unwrap();
    coord.register_app(APP, 600_000).await.unwrap();
    let placement = coord
        .register_shuffle(APP, 0, MAPS, PARTITIONS)
        .await
        .unwrap();
    coord.register_shuffle(APP, 1, MAPS, 3).await.unwrap();
    let mut pushed = 0u64;
    for map in 0..MAPS {
        let mut stats = Vec::new();
        for p in 0..PARTITIONS {
            let w = placement.worker_of(p).unwrap();
            let client = WorkerClient::connect(&w.addr, coord.keyring())
                .await
                .unwrap();
            let data = payload(map, p);
            let header = PushHeader {
                app_id: APP.to_string(),
                shuffle_id: 0,
                partition: p,
                map_id: map,
                attempt_id: AttemptId(0),
                batch_seq: 0,
                crc32c: checksum(&data),
            };
            let pending = client.push(&header, &data).await.unwrap();
            client.finish_push(pending).await.unwrap();
            pushed += data.len() as u64;
            stats.push(PartitionStat {
                partition: p,
                bytes: data.len() as u64,
                records: 10,
            });
        }
        let (status, _) = coord
            .commit_map(APP, 0, map, AttemptId(0), stats)
            .await
            .unwrap();
        assert_eq!(status, CommitStatus::Committed);
    }
    let w = placement.worker_of(0).unwrap();
    let range = FetchRange {
        app_id: APP.to_string(),
        shuffle_id: 0,
        partition: 0,
        start_map: 0,
        end_map: MAPS,
    };
    let mut reader = PartitionReader::new(&w.addr, range, coord.keyring());
    let mut read = 0;
    while let Some(b) = reader.next_batch().await.unwrap() {
        read += b.payload.len();
    }
    assert_eq!(read, HOT * MAPS as usize);
    pushed
}

/// Waits until `check` holds for the API's workers (they report with each heartbeat).
fn wait_for_workers(metrics: &str, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let v = api(metrics, "/api/v1/workers");
        let workers = v.as_array().unwrap().clone();
        if check(&workers) {
            return workers;
        }
        assert!(
            Instant::now() < deadline,
            "workers never reported {what}: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sum(workers: &[Value], field: &str) -> u64 {
    workers.iter().map(|w| w[field].as_u64().unwrap()).sum()
}

#[test]
fn web_ui_and_rest_api_show_the_service_as_it_is() {
    // Durability object-store: every commit waits for its upload, so all three tiers hold
    // the shuffle when the page is read.
    let store = tempfile::tempdir().unwrap();
    let store_url = format!("file://{}", store.path().display());
    let (sa, _dir) = standalone_of(
        "2",
        &[
            "--replication",
            "2",
            "--durability",
            "object-store",
            "--object-store",
            &store_url,
        ],
    );
    let m = sa.metrics.clone();
    let pushed = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(make_shuffles(&sa.coordinator));
    let total = (HOT + (PARTITIONS as usize - 1) * COLD) as u64 * MAPS as u64;
    assert_eq!(pushed, total);

    // Workers: every copy is counted where it was pushed (the replica by forwarding), the
    // read where it was served.
    let workers = wait_for_workers(&m, "the pushes, the read and the uploads", |ws| {
        sum(ws, "pushed_bytes") == 2 * total
            && sum(ws, "fetched_bytes") == HOT as u64 * 4
            && ws.iter().all(|w| {
                // Each copy's file, written and uploaded whole (record headers included).
                let disk = w["stored_bytes"].as_u64().unwrap();
                disk > total && w["object_bytes"].as_u64().unwrap() == disk
            })
    });
    assert_eq!(workers.len(), 2);
    for w in &workers {
        assert_eq!(w["state"], "alive");
        assert_eq!(w["memory_budget"], 64 << 20);
        // Replication 2 on two workers: each holds a copy of every partition of both shuffles.
        assert_eq!(w["partition_copies"], PARTITIONS + 3);
    }

    // The same figures per app on /metrics, under the app's escaped id.
    let page = http_get(&m, "/metrics");
    let app_label = APP.replace('\\', "\\\\").replace('"', "\\\"");
    let per_app = |family: &str| -> u64 {
        let prefix = format!("{family}{{");
        let label = format!("app=\"{app_label}\"}}");
        page.lines()
            .filter(|l| l.starts_with(&prefix) && l.contains(&label))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(
        per_app("crossdock_worker_app_pushed_bytes_total"),
        2 * total,
        "{page}"
    );
    assert_eq!(
        per_app("crossdock_worker_app_fetched_bytes_total"),
        HOT as u64 * 4
    );
    // Every pushed byte is held, in memory or (with its record headers) on disk.
    let held = per_app("crossdock_worker_app_buffered_bytes")
        + per_app("crossdock_worker_app_stored_bytes");
    assert!(held >= 2 * total, "{held} bytes held of {}", 2 * total);

    let cluster = api(&m, "/api/v1/cluster");
    assert_eq!(cluster["workers_alive"], 2);
    assert_eq!(cluster["workers_lost"], 0);
    assert_eq!(
        (cluster["apps"].as_u64(), cluster["shuffles"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(cluster["replication"], 2);
    assert_eq!(cluster["coordinator"], sa.coordinator.as_str());

    let apps = api(&m, "/api/v1/apps");
    assert_eq!(apps[0]["app_id"], APP);
    let shuffles = apps[0]["shuffles"].as_array().unwrap();
    assert_eq!(shuffles.len(), 2);
    assert_eq!(shuffles[1]["maps_committed"], 0);
    assert_eq!(shuffles[1]["skew"], 0.0);

    // The app id is percent-encoded into one path segment.
    let path = format!("/api/v1/apps/{}/shuffles/0", encode(APP));
    let s = api(&m, &path);
    assert_eq!(s["app_id"], APP);
    assert_eq!(s["maps_committed"], MAPS);
    assert_eq!(s["num_partitions"], PARTITIONS);
    assert_eq!(s["bytes"], total);
    assert_eq!(s["records"], (MAPS * PARTITIONS * 10) as u64);
    assert_eq!(s["largest_partition_bytes"], (HOT * MAPS as usize) as u64);
    assert_eq!(s["median_partition_bytes"], (COLD * MAPS as usize) as u64);
    let skew = s["skew"].as_f64().unwrap();
    let want = (HOT * MAPS as usize) as f64 * PARTITIONS as f64 / total as f64;
    assert!((skew - want).abs() < 1e-9, "skew {skew}, want {want}");
    // Predicted once a tenth of the maps committed (the first one).
    assert_eq!(s["predicted_after_maps"], 1);
    let parts = s["partitions"].as_array().unwrap();
    assert_eq!(parts.len(), PARTITIONS as usize);
    let addrs: Vec<&str> = workers
        .iter()
        .map(|w| w["addr"].as_str().unwrap())
        .collect();
    for (i, p) in parts.iter().enumerate() {
        let want = if i == 0 { HOT } else { COLD } * MAPS as usize;
        assert_eq!(p["bytes"], want as u64, "partition {i}");
        // The first map's bytes, extrapolated to every map.
        assert_eq!(p["predicted_bytes"], want as u64, "partition {i}");
        let (primary, replica) = (
            p["primary"].as_str().unwrap(),
            p["replica"].as_str().unwrap(),
        );
        assert!(addrs.contains(&primary) && addrs.contains(&replica) && primary != replica);
    }
    // The histogram: the hot partition alone in the top bucket, the rest in the first.
    let h = s["histogram"].as_array().unwrap();
    assert_eq!(h.len(), 10);
    assert_eq!(h[0]["partitions"], PARTITIONS - 1);
    assert_eq!(h[9]["partitions"], 1);

    // Clear errors; the process keeps serving.
    let (code, body) = get(&m, "/api/v1/apps/nobody/shuffles/0");
    assert_eq!(code, 404);
    assert!(
        body.contains("no shuffle 0 of app 'nobody' is registered"),
        "{body}"
    );
    let (code, _) = get(&m, &format!("/api/v1/apps/{}/shuffles/x", encode(APP)));
    assert_eq!(code, 400);
    let (code, _) = get(&m, "/api/v1/nothing");
    assert_eq!(code, 404);
    assert_eq!(get(&m, "/healthz"), (200, "ok\n".to_string()));

    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("CROSSDOCK_REQUIRE_CHROMIUM").is_none(),
            "CROSSDOCK_REQUIRE_CHROMIUM is set and no chromium is installed (scripts/setup.sh installs it)"
        );
        eprintln!("web_ui: no chromium; the pages were not checked in a browser");
        return;
    };
    let shots = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/web-ui");
    std::fs::create_dir_all(&shots).unwrap();

    // The overview as Chromium renders it: every worker's numbers and the shuffles'.
    let url = format!("http://{m}/");
    let dom = dump_dom(&chromium, &url);
    assert!(dom.contains("<h1>Crossdock</h1>"), "{dom}");
    for w in &workers {
        let row = row(&dom, &format!("data-worker=\"{}\"", w["id"]));
        assert!(row.contains(w["addr"].as_str().unwrap()), "{row}");
        for f in [
            "memory_budget",
            "stored_bytes",
            "object_bytes",
            "pushed_bytes",
            "fetched_bytes",
            "partition_copies",
        ] {
            assert_eq!(cell(row, f), w[f].to_string(), "worker {} {f}", w["id"]);
        }
    }
    for f in ["workers_alive", "apps", "shuffles", "object_bytes"] {
        assert_eq!(cell(&dom, f), cluster[f].to_string(), "{f}");
    }
    // The app id is shown as text: escaped in the serialised DOM, never an element.
    assert!(dom.contains("web-ui &lt;b&gt;&amp;'test\""), "{dom}");
    assert!(!dom.contains("<b>&amp;"), "the app id became markup: {dom}");
    let row0 = row(&dom, "data-shuffle=\"0\"");
    assert_eq!(cell(row0, "maps_committed"), MAPS.to_string());
    assert_eq!(cell(row0, "bytes"), total.to_string());
    assert_eq!(cell(row0, "skew"), format!("{skew:.2}"));
    screenshot(&chromium, &url, &shots.join("overview.png"));

    // The shuffle's page: the histogram and every partition's size and copies.
    let url = format!("http://{m}/apps/{}/shuffles/0", encode(APP));
    let dom = dump_dom(&chromium, &url);
    for (i, p) in parts.iter().enumerate() {
        let row = row(&dom, &format!("data-partition=\"{i}\""));
        assert_eq!(cell(row, "bytes"), p["bytes"].to_string(), "partition {i}");
        assert!(row.contains(p["primary"].as_str().unwrap()), "{row}");
        assert!(row.contains(p["replica"].as_str().unwrap()), "{row}");
    }
    for (i, b) in h.iter().enumerate() {
        let row = row(&dom, &format!("data-bucket=\"{i}\""));
        assert_eq!(
            cell(row, "partitions"),
            b["partitions"].to_string(),
            "bucket {i}"
        );
    }
    assert!(
        row(&dom, "data-bucket=\"9\"").contains("bar hot"),
        "the hot bucket is marked"
    );
    screenshot(&chromium, &url, &shots.join("shuffle.png"));
    eprintln!("web_ui: screenshots in {}", shots.display());
    sa.proc.terminate();
}

/// Percent-encodes an app id as the coordinator's links do.
fn encode(id: &str) -> String {
    crossdock_server::names::app_name(id)
}

/// The text from `marker` to the end of its table row.
fn row<'a>(dom: &'a str, marker: &str) -> &'a str {
    let start = dom
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in the page"));
    let rest = &dom[start..];
    &rest[..rest.find("</tr>").unwrap_or(rest.len())]
}

/// The `data-value` written beside `data-field="field"` in `html`.
fn cell(html: &str, field: &str) -> String {
    let key = format!("data-field=\"{field}\" data-value=\"");
    let start = html
        .find(&key)
        .unwrap_or_else(|| panic!("no {field} in {html}"))
        + key.len();
    html[start..].split('"').next().unwrap().to_string()
}

fn chromium() -> Option<PathBuf> {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Runs headless Chromium on `url` with `what` (`--dump-dom` or `--screenshot=…`) and a
/// fresh profile; flags that keep it off the network beyond the page.
fn chromium_run(chromium: &Path, what: &str, url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1400,900",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(what)
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium {what} {url}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn dump_dom(chromium: &Path, url: &str) -> String {
    chromium_run(chromium, "--dump-dom", url)
}

fn screenshot(chromium: &Path, url: &str, to: &Path) {
    let _ = std::fs::remove_file(to);
    chromium_run(chromium, &format!("--screenshot={}", to.display()), url);
    let png = std::fs::read(to).expect("chromium wrote the screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is a PNG",
        to.display()
    );
    // A blank page compresses to a few KiB; a rendered table does not.
    assert!(
        png.len() > 20_000,
        "{} is only {} bytes",
        to.display(),
        png.len()
    );
}
