//! The `crossdock` binary as real processes: standalone + bench, metrics, signals,
//! separate coordinator and worker processes, and clear errors for bad settings.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{bench_json, http_get, metric, push_fetch, run, Proc, EXE};

#[test]
fn standalone_serves_the_bench_exposes_metrics_and_cleans_up_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let sentinel = dir.path().join("not-ours.txt");
    std::fs::write(&sentinel, "keep me").unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let sa = Proc::start(&[
        "standalone",
        "--listen",
        "127.0.0.1:0",
        "--workers",
        "2",
        "--memory",
        "64MiB",
        "--data-dir",
        data_dir,
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let addr = sa.wait_line("crossdock standalone listening on ");
    let own = sa.wait_line("data in ");
    let metrics_url = sa.wait_line("metrics on ");
    assert!(std::path::Path::new(&own).starts_with(dir.path()));

    let j = bench_json(&push_fetch(&addr, "48MiB", "2"));
    assert_eq!(j["verified"], true);
    assert!(j["push_gbps"].as_f64().unwrap() > 0.0);
    assert!(j["fetch_gbps"].as_f64().unwrap() > 0.0);
    assert_eq!(
        j["budget_bytes"],
        2 * (64u64 << 20),
        "two workers share the standalone process"
    );
    assert_eq!(j["worker_budget_bytes"], 64u64 << 20);
    assert_eq!(j["rss_within_budget"], true);
    assert!(j["peak_worker_rss_bytes"].as_u64().unwrap() > 0);

    let metrics_addr = metrics_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");
    let text = http_get(metrics_addr, "/metrics");
    assert!(text.contains("200 OK"), "{text}");
    assert_eq!(
        metric(&text, "crossdock_worker_pushed_bytes_total"),
        2 * (48 << 20)
    );
    assert_eq!(
        metric(&text, "crossdock_worker_fetched_bytes_total"),
        2 * (48 << 20)
    );
    assert_eq!(metric(&text, "crossdock_coordinator_workers_alive"), 2);
    assert!(text.contains("crossdock_worker_budget_bytes{worker=\"0\"} 67108864"));
    // Every pushed batch and every fetch was timed, on one of the two workers.
    for family in [
        "crossdock_worker_push_ack_seconds_count",
        "crossdock_worker_fetch_first_frame_seconds_count",
    ] {
        let counted: f64 = text
            .lines()
            .filter(|l| l.starts_with(family))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert!(counted > 0.0, "{family}: {text}");
    }

    let status = sa.terminate();
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    assert!(
        !std::path::Path::new(&own).exists(),
        "its own data directory is deleted"
    );
    assert_eq!(
        std::fs::read_to_string(&sentinel).unwrap(),
        "keep me",
        "nothing else is touched"
    );
}

#[test]
fn separate_coordinator_and_worker_processes() {
    let dir = tempfile::tempdir().unwrap();
    let cdir = dir.path().join("c");
    // Without the cluster secret (or an explicit --no-auth) neither starts.
    for args in [
        &["coordinator"][..],
        &["worker", "--coordinator", "127.0.0.1:1"],
    ] {
        let out = run(&[args, &["--listen", "127.0.0.1:0"]].concat());
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--secret-file") && err.contains("--no-auth"),
            "{err}"
        );
    }
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "too short\n").unwrap();
    let out = run(&["coordinator", "--secret-file", secret.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 32"));
    std::fs::write(&secret, "a cluster secret of more than thirty-two bytes\n").unwrap();
    let coord = Proc::start(&[
        "coordinator",
        "--secret-file",
        secret.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        cdir.to_str().unwrap(),
        "--metrics-listen",
        "off",
    ]);
    let caddr = coord.wait_line("crossdock coordinator listening on ");
    let wdir = dir.path().join("w");
    let worker = Proc::start(&[
        "worker",
        "--secret-file",
        secret.to_str().unwrap(),
        "--coordinator",
        &caddr,
        "--listen",
        "127.0.0.1:0",
        "--memory",
        "64MiB",
        "--data-dir",
        wdir.to_str().unwrap(),
        "--metrics-listen",
        "off",
    ]);
    worker.wait_line("crossdock worker listening on ");
    // The worker registers in the background; retry until the bench finds it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let out = loop {
        let out = run(&[
            "bench",
            "push-fetch",
            "--coordinator",
            &caddr,
            "--bytes",
            "8MiB",
            "--maps",
            "2",
            "--partitions",
            "4",
            "--runs",
            "1",
            "--json",
        ]);
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(bench_json(&out)["verified"], true);
    assert!(worker.terminate().success());
    assert!(coord.terminate().success());
}

#[test]
fn bench_without_a_coordinator_starts_its_own_cluster() {
    let out = run(&[
        "bench",
        "push-fetch",
        "--bytes",
        "16MiB",
        "--maps",
        "2",
        "--partitions",
        "4",
        "--runs",
        "1",
        "--memory",
        "32MiB",
        "--baseline",
        "--json",
    ]);
    let j = bench_json(&out);
    assert_eq!(j["verified"], true);
    assert!(j["baseline_tcp_gbps"].as_f64().unwrap() > 0.0);
    assert!(j["ratio_to_tcp"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_all_to_all_bench_fails_what_overflows_and_checks_what_completes() {
    // 4 pushers × 4 MiB; each memory-only worker takes 78% of it all. At α = 3 the
    // hottest worker is owed 84%: DSA must be refused (memory exceeded, the worker
    // intact); at α = 0 everything completes and is read back byte for byte.
    let out = run(&[
        "bench",
        "alltoall",
        "--processes",
        "4",
        "--bytes-per-process",
        "4MiB",
        "--batch-size",
        "64KiB",
        "--alphas",
        "0,3",
        "--algo",
        "dsa,sms",
        "--runs",
        "1",
        "--json",
    ]);
    let j = bench_json(&out);
    let points = j["points"].as_array().unwrap();
    let (even, skewed) = (&points[0]["methods"], &points[1]["methods"]);
    for m in ["dsa", "sms"] {
        assert_eq!(even[m]["completed"], 1, "{m} at α 0: {}", even[m]);
        assert!(j["worker_rss"][m]["within"].as_bool().unwrap());
    }
    assert_eq!(skewed["dsa"]["completed"], 0);
    let why = skewed["dsa"]["failure"].as_str().unwrap();
    assert!(why.contains("memory exceeded"), "{why}");
    assert!(points[1]["largest_demand_share"].as_f64().unwrap() > 0.78);
    // Delegation races the data still arriving; whichever way it goes, it never reads
    // back anything wrong.
    if let Some(why) = skewed["sms"]["failure"].as_str() {
        assert!(why.contains("memory exceeded"), "{why}");
    }
}

#[test]
fn the_placement_bench_re_places_a_skewed_shuffle_and_reads_every_byte_back() {
    // Three worker processes labelled as hosts, a Zipf 1.3 shuffle of 20 maps: placed in
    // blocks at registration the largest host holds about 1.7× the mean; re-placed on the
    // prediction (the bench waits for the moves before the later maps push), partitions
    // move and the balance improves. Every byte of both modes is read back and every
    // slot's bytes checked against its commits (the bench fails otherwise).
    let out = run(&[
        "bench",
        "placement",
        "--bytes",
        "12MiB",
        "--batch-size",
        "64KiB",
        "--runs",
        "1",
        "--json",
    ]);
    let j = bench_json(&out);
    let (blocks, moved) = (&j["modes"]["blocks"], &j["modes"]["re-placed"]);
    assert_eq!(blocks["partitions_moved"], 0.0);
    assert!(moved["partitions_moved"].as_f64().unwrap() >= 1.0, "{j}");
    let (before, after) = (
        blocks["max_over_mean"].as_f64().unwrap(),
        moved["max_over_mean"].as_f64().unwrap(),
    );
    assert!(before > 1.5 && after < 1.4, "{j}");
}

#[test]
fn bad_settings_fail_fast_with_a_clear_message() {
    let out = run(&["worker", "--listen", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--coordinator"));

    let out = run(&["standalone", "--memory", "lots"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a size"));

    let out = run(&["standalone", "--prediction-threshold", "1.5"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 0 and 1"));

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "memroy = \"1GiB\"\n").unwrap();
    let out = run(&["standalone", "--config", cfg.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("memroy"));

    let out = run(&[
        "bench",
        "push-fetch",
        "--coordinator",
        "127.0.0.1:1",
        "--runs",
        "1",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"));
}

#[test]
fn every_subcommand_has_help() {
    for sub in [
        "standalone",
        "coordinator",
        "worker",
        "bench",
        "sim",
        "spark-conf",
    ] {
        let out = run(&[sub, "--help"]);
        assert!(out.status.success(), "{sub} --help");
        assert!(!out.stdout.is_empty());
    }
    let out = run(&["bench", "push-fetch", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--baseline"));
}

#[test]
fn settings_come_from_file_env_and_flags_in_that_order() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            "workers = 1\nmemory = \"32MiB\"\ndata_dir = \"{}\"\nmetrics_listen = \"off\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let mut child = Command::new(EXE)
        .args([
            "standalone",
            "--config",
            cfg.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("CROSSDOCK_WORKERS", "3")
        .env("CROSSDOCK_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let lines: Vec<String> = BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .take_while(|l| !l.starts_with("data in"))
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    let workers: Vec<&String> = lines.iter().filter(|l| l.starts_with("worker ")).collect();
    assert_eq!(
        workers.len(),
        3,
        "the environment beats the file: {lines:?}"
    );
    assert!(
        workers[0].contains("32.0 MiB"),
        "the file beats the default: {lines:?}"
    );
}

#[test]
fn spark_conf_prints_the_three_properties() {
    let dir = tempfile::tempdir().unwrap();
    let jar = dir.path().join("client.jar");
    std::fs::write(&jar, b"PK").unwrap();
    // `crossdock spark-conf` for this jar, for the Spark line `spark`.
    let conf = |spark: &str| {
        run(&[
            "spark-conf",
            "--coordinator",
            "10.1.2.3:7337",
            "--jar",
            jar.to_str().unwrap(),
            "--spark",
            spark,
        ])
    };
    let out = conf("4");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Two properties enable Crossdock; the jar is deployment (the manager installs the
    // shuffle-data-IO plug-in itself).
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(
        lines[0],
        "spark.shuffle.manager=org.apache.spark.shuffle.crossdock.CrossdockShuffleManager"
    );
    assert_eq!(lines[1], "spark.crossdock.coordinator=10.1.2.3:7337");
    assert_eq!(
        lines[2],
        format!("spark.jars={}", jar.canonicalize().unwrap().display())
    );
    let missing = run(&[
        "spark-conf",
        "--coordinator",
        "h:1",
        "--jar",
        "/nonexistent/x.jar",
    ]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("make build"));

    // Spark 3.5 loads the shuffle manager before `spark.jars`: the jar goes on the class path.
    let out = conf("3.5");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let canonical = jar.canonicalize().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(
        lines[2],
        format!("spark.driver.extraClassPath={}", canonical.display())
    );
    assert_eq!(
        lines[3],
        format!("spark.executor.extraClassPath={}", canonical.display())
    );
    // PySpark 3.5's sessions apply only the extensions named here.
    assert_eq!(
        lines[4],
        "spark.sql.extensions=org.apache.spark.sql.crossdock.CrossdockSqlExtensions"
    );
    let other = run(&["spark-conf", "--coordinator", "h:1", "--spark", "3.4"]);
    assert!(!other.status.success(), "only 4 and 3.5 are built");
}
