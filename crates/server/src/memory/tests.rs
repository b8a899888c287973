use super::*;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

fn fcs() -> Sharing {
    Sharing {
        order: Order::FairCompletion(FcsConfig::default()),
        app_share: 1.0,
    }
}

fn work(t_rs: f64, r_left: u64) -> RemainingWork {
    RemainingWork { t_rs, r_left }
}

/// Starts a take of `n` for `app` and waits until it is queued (or served).
async fn queue(b: &Arc<MemoryBudget>, app: &'static str, n: u64) -> JoinHandle<()> {
    let before = b.waiting().0;
    let b2 = b.clone();
    let h = tokio::spawn(async move { b2.take(app, n).await });
    for _ in 0..200 {
        if b.waiting().0 > before || h.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    h
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test]
async fn take_waits_until_credit_returns() {
    let b = Arc::new(MemoryBudget::new(100));
    b.take("a", 80).await;
    assert_eq!(b.used(), 80);
    let waiter = queue(&b, "a", 30).await;
    settle().await;
    assert!(!waiter.is_finished(), "must wait: only 20 bytes free");
    b.give_back("a", 80);
    waiter.await.unwrap();
    assert_eq!(b.used(), 30);
    assert_eq!(b.peak(), 80);
    assert_eq!(b.held("a"), 30);
}

#[tokio::test]
async fn fifo_serves_in_arrival_order_and_nobody_passes_the_head() {
    let b = Arc::new(MemoryBudget::new(100));
    b.take("big", 100).await;
    let first = queue(&b, "big", 60).await;
    let second = queue(&b, "small", 10).await;
    b.give_back("big", 50);
    settle().await;
    // 50 free: the head needs 60, and the 10 behind it does not pass.
    assert!(!first.is_finished() && !second.is_finished());
    b.give_back("big", 50);
    first.await.unwrap();
    second.await.unwrap();
    assert_eq!(b.used(), 70);
}

#[tokio::test]
async fn fair_completion_serves_the_least_remaining_work_first() {
    let b = Arc::new(MemoryBudget::shared(100, fcs()));
    b.set_work(HashMap::from([
        (Arc::from("large"), work(150.0, 1 << 30)),
        (Arc::from("small"), work(3.0, 1 << 20)),
    ]));
    b.take("large", 100).await;
    let large = queue(&b, "large", 60).await;
    let small = queue(&b, "small", 60).await;
    b.give_back("large", 60);
    settle().await;
    assert!(
        small.is_finished(),
        "the small app came later but is served first"
    );
    assert!(!large.is_finished());
    b.give_back("small", 60);
    large.await.unwrap();
    small.await.unwrap();
    // Under FIFO the same arrivals serve the large app first.
    let f = Arc::new(MemoryBudget::new(100));
    f.take("large", 100).await;
    let large = queue(&f, "large", 60).await;
    let small = queue(&f, "small", 60).await;
    f.give_back("large", 60);
    settle().await;
    assert!(large.is_finished() && !small.is_finished());
    f.give_back("large", 60);
    small.await.unwrap();
}

// On a paused clock: the slackness is computed from the time passed between grants.
#[tokio::test(start_paused = true)]
async fn slackness_cap_serves_a_starved_large_app_first() {
    let b = Arc::new(MemoryBudget::shared(100, fcs()));
    b.set_work(HashMap::from([
        (Arc::from("large"), work(150.0, 100)),
        (Arc::from("small"), work(1.0, 10)),
    ]));
    // The large app got 100 bytes and waits for 50 more; after 500 ms the small one, with
    // less work, is served before it: its whole wait passed over at half its work done, a
    // slackness far above the cap of 5.
    b.take("large", 100).await;
    let large = queue(&b, "large", 50).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let small = queue(&b, "small", 10).await;
    b.give_back("large", 10);
    small.await.unwrap();
    b.give_back("small", 10);
    assert!(
        !large.is_finished(),
        "passed over (and 10 is not room for 50)"
    );
    let small = queue(&b, "small", 50).await;
    b.give_back("large", 40);
    settle().await;
    assert!(
        large.is_finished(),
        "slack past the cap: no longer passed over"
    );
    assert!(!small.is_finished());
    b.give_back("large", 50);
    small.await.unwrap();
}

#[tokio::test]
async fn an_app_served_whenever_credit_returns_is_not_counted_as_starved() {
    let b = Arc::new(MemoryBudget::shared(100, fcs()));
    b.set_work(HashMap::from([
        (Arc::from("large"), work(150.0, 100)),
        (Arc::from("small"), work(1.0, 10)),
    ]));
    // A large pusher always has a request waiting on a full budget, as on a slow disk,
    // and every byte freed goes to it: waiting, but never passed over. (More than half
    // its work is done, so counting its waits as lack of service would put it past the
    // cap and before the small app.)
    b.take("large", 100).await;
    let mut pending = queue(&b, "large", 10).await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let next = queue(&b, "large", 10).await;
        b.give_back("large", 10);
        pending.await.unwrap();
        pending = next;
    }
    // The small app arrives: less work, and the large one is not past the slackness cap.
    let small = queue(&b, "small", 10).await;
    b.give_back("large", 10);
    settle().await;
    assert!(small.is_finished(), "the small app is served first");
    assert!(!pending.is_finished());
    b.give_back("small", 10);
    pending.await.unwrap();
}

/// A full budget of 100 in fair order with a share of 50 per application: "capped" (the
/// most work left; 50 of its 70 units granted) holds its share and waits for 20 more, held
/// back by its own share; "other" holds the other 50; "small" and "tiny" have little work.
async fn capped_at_its_share() -> (Arc<MemoryBudget>, JoinHandle<()>) {
    let b = Arc::new(MemoryBudget::shared(
        100,
        Sharing {
            app_share: 0.5,
            ..fcs()
        },
    ));
    b.set_work(HashMap::from([
        (Arc::from("capped"), work(150.0, 20)),
        (Arc::from("other"), work(1.0, 10)),
        (Arc::from("small"), work(1.0, 10)),
        (Arc::from("tiny"), work(1.0, 10)),
    ]));
    b.take("capped", 50).await;
    b.take("other", 50).await;
    let capped = queue(&b, "capped", 20).await;
    (b, capped)
}

#[tokio::test]
async fn an_app_waiting_on_its_own_quota_is_not_counted_as_passed_over() {
    // (Counted as passed over, the capped app's second of waiting would put its slackness
    // well past the cap of 5.)
    let (b, capped) = capped_at_its_share().await;
    // Meanwhile another app is granted credit again and again for a second.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let next = queue(&b, "other", 10).await;
        b.give_back("other", 10);
        next.await.unwrap();
    }
    assert!(!capped.is_finished(), "still over its share");
    // A small app waits on the full budget; then the capped app's own credit returns, and
    // both requests fit the 20 bytes freed: the one with less work left goes first.
    let small = queue(&b, "small", 20).await;
    b.give_back("capped", 20);
    settle().await;
    assert!(
        small.is_finished(),
        "served by least work, not as if the capped app starved"
    );
    assert!(!capped.is_finished());
    b.give_back("small", 20);
    capped.await.unwrap();
    assert_eq!(b.held("capped"), 50);
}

#[tokio::test]
async fn a_wait_on_its_own_quota_is_not_charged_when_the_quota_lifts() {
    // The capped app waits on its own share for a second in which nobody is granted.
    let (b, capped) = capped_at_its_share().await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Its credit returns while a small app waits: the small one has less work and goes
    // first. The capped app was passed over from that moment only, not for its second at
    // the quota (which would put it far past the slackness cap)...
    let small = queue(&b, "small", 20).await;
    b.give_back("capped", 20);
    small.await.unwrap();
    // ...so at the next choice another app with less work still goes first.
    let tiny = queue(&b, "tiny", 20).await;
    b.give_back("small", 20);
    settle().await;
    assert!(tiny.is_finished(), "served by least work");
    assert!(!capped.is_finished());
    b.give_back("tiny", 20);
    capped.await.unwrap();
}

#[tokio::test]
async fn an_app_at_its_quota_waits_for_its_own_credit_and_blocks_nobody() {
    let b = Arc::new(MemoryBudget::shared(
        100,
        Sharing {
            order: Order::Fifo,
            app_share: 0.5,
        },
    ));
    assert_eq!(b.app_limit(), 50);
    b.take("flood", 40).await;
    // 40 + 20 > 50: it waits although 60 bytes are free...
    let over = queue(&b, "flood", 20).await;
    settle().await;
    assert!(!over.is_finished());
    assert_eq!(b.waiting(), (1, 1));
    // ...and another app behind it is served at once.
    b.take("other", 50).await;
    assert_eq!(b.held("other"), 50);
    // Its own credit returning lets it through.
    b.give_back("flood", 40);
    over.await.unwrap();
    assert_eq!(b.held("flood"), 20);
    // An app holding nothing passes with a request larger than the quota.
    b.take("huge", 30).await;
    let b2 = Arc::new(MemoryBudget::shared(
        100,
        Sharing {
            order: Order::Fifo,
            app_share: 0.1,
        },
    ));
    b2.take("one", 30).await;
    assert_eq!(b2.held("one"), 30);
}

#[tokio::test]
async fn a_dropped_wait_leaves_the_queue_and_leaks_nothing() {
    let b = Arc::new(MemoryBudget::new(100));
    b.take("a", 100).await;
    let gone = queue(&b, "a", 50).await;
    let next = queue(&b, "b", 50).await;
    gone.abort();
    let _ = gone.await;
    assert_eq!(b.waiting().0, 1);
    b.give_back("a", 50);
    next.await.unwrap();
    assert_eq!(b.used(), 100);
    b.give_back("a", 50);
    b.give_back("b", 50);
    assert_eq!(b.used(), 0);
    // A timed-out take (a cancelled future) does not hold credit either.
    b.take("c", 100).await;
    let r = tokio::time::timeout(Duration::from_millis(10), b.take("d", 10)).await;
    assert!(r.is_err());
    b.give_back("c", 100);
    assert_eq!(b.used(), 0);
    assert_eq!(b.held("d"), 0);
}

#[tokio::test]
async fn a_request_waiting_on_its_quota_holds_back_its_apps_later_ones() {
    let b = Arc::new(MemoryBudget::shared(
        100,
        Sharing {
            order: Order::Fifo,
            app_share: 0.5,
        },
    ));
    b.take("a", 40).await;
    // 40 + 16 > 50: waits; a later 4 would fit but must not pass it.
    let big = queue(&b, "a", 16).await;
    let small = queue(&b, "a", 4).await;
    settle().await;
    assert!(!big.is_finished() && !small.is_finished());
    // Another app is not held back.
    b.take("b", 10).await;
    b.give_back("a", 40);
    big.await.unwrap();
    small.await.unwrap();
    assert_eq!(b.held("a"), 20);
}

// On a paused clock: the slackness is computed from the time passed between grants.
#[tokio::test(start_paused = true)]
async fn an_app_never_served_is_not_starved_by_smaller_ones() {
    let cfg = FcsConfig {
        min_service_secs: 0.05,
        ..FcsConfig::default()
    };
    let b = Arc::new(MemoryBudget::shared(
        100,
        Sharing {
            order: Order::FairCompletion(cfg),
            app_share: 1.0,
        },
    ));
    b.set_work(HashMap::from([
        (Arc::from("big"), work(500.0, 1 << 30)),
        (Arc::from("small"), work(1.0, 10)),
    ]));
    b.take("hog", 100).await;
    // "big" has had nothing, and past the "newly launched" bound a smaller app is served
    // before it: its lifetime is all passed over, a slackness far past the cap, so the
    // smaller app asking next goes after it.
    let big = queue(&b, "big", 60).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let small = queue(&b, "small", 10).await;
    b.give_back("hog", 10);
    small.await.unwrap();
    b.give_back("small", 10);
    assert!(
        !big.is_finished(),
        "passed over (and 10 is not room for 60)"
    );
    let small = queue(&b, "small", 60).await;
    b.give_back("hog", 50);
    settle().await;
    assert!(big.is_finished(), "served once past the slackness cap");
    assert!(!small.is_finished());
    b.give_back("big", 60);
    small.await.unwrap();
}
