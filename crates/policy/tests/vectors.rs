//! The adaptive-fetch decisions every implementation must reproduce
//! (`testdata/policy/adaptive_fetch.json`): this crate, which the simulator drives, and the
//! Spark client's reader, whose tests read the same file.

use crossdock_policy::adaptive_fetch::{ElasticLimit, FetchMonitor};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/policy/adaptive_fetch.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("reading the vectors"))
        .expect("the vectors are JSON")
}

fn u(v: &Value) -> u64 {
    v.as_u64().expect("a number")
}

#[test]
fn the_elastic_limit_follows_the_vectors() {
    let v = vectors();
    let cases = v["elastic_limit"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let mut l = ElasticLimit::new(u(&c["hard"]), u(&c["inc"]), c["alpha"].as_f64().unwrap())
            .with_floor(u(&c["floor"]))
            .starting_at(u(&c["initial"]));
        if c["skip_first"].as_bool().unwrap() {
            l = l.skipping_first_wait();
        }
        if let Some(q) = c.get("quiet") {
            l = l.shrinking_after_quiet(u(q) as u32);
        }
        if let Some(a) = c.get("initial_avg_ms") {
            l = l.with_average(a.as_f64().unwrap());
        }
        if let Some(n) = c.get("waits_to_grow") {
            l = l.growing_after_waits(u(n) as u32);
        }
        let run = |k: &str| c.get(k).map_or(0, |n| u(n) as u32);
        l = l.with_runs(run("initial_quiet"), run("initial_waited"));
        let got: Vec<u64> = c["waits_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                l.on_consume(w.as_f64().unwrap());
                l.soft()
            })
            .collect();
        let want: Vec<u64> = c["soft_after"].as_array().unwrap().iter().map(u).collect();
        assert_eq!(got, want, "{}", c["name"]);
    }
}

#[test]
fn the_source_choice_follows_the_vectors() {
    let v = vectors();
    let k = u(&v["window"]) as usize;
    let cases = v["source_choice"].as_array().unwrap();
    assert!(!cases.is_empty());
    for c in cases {
        let sources = c["sources"].as_array().unwrap();
        // The reader's own executor is 0 on host 0; source i is executor i + 1, on host 0
        // when local, on a host of its own otherwise: the closest successor is source 0.
        let mut host_of = vec![0u32];
        for (i, s) in sources.iter().enumerate() {
            host_of.push(if s["local"].as_bool().unwrap() {
                0
            } else {
                i as u32 + 1
            });
        }
        let mut m = FetchMonitor::new(host_of, k);
        for (i, s) in sources.iter().enumerate() {
            m.on_request(i + 1, u(&s["in_flight"]));
            for w in s["waits_ms"].as_array().unwrap() {
                m.record_wait(i + 1, w.as_f64().unwrap());
            }
        }
        let candidates: Vec<usize> = (1..=sources.len()).collect();
        let chosen = m.recommend_source(0, &candidates).unwrap() - 1;
        assert_eq!(chosen as u64, u(&c["choice"]), "{}", c["name"]);
    }
}
