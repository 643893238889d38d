//! `Builder`: every setting is checked (the tick, the wheel size, `max_pending`, the shard
//! count: `shards(0)` and counts above 1024 are errors, not silently clamped), building needs
//! a runtime with a time driver, and valid settings build a timer that fires on time.

mod common;

use std::time::Duration;

use tokio::time::Instant;
use tokio_timing_wheel::{BuildError, Timer};

use common::ms;

#[tokio::test]
async fn zero_shards_is_an_error() {
    let err = Timer::builder().shards(0).build().unwrap_err();
    assert_eq!(err, BuildError::ZeroShards);
    assert_eq!(err.to_string(), "shards must be at least 1");
}

#[tokio::test]
async fn more_than_1024_shards_is_an_error_naming_the_count() {
    for n in [1025, 4096, usize::MAX] {
        let err = Timer::builder().shards(n).build().unwrap_err();
        assert_eq!(
            err,
            BuildError::TooManyShards {
                shards: n,
                max: 1024
            }
        );
        assert_eq!(
            err.to_string(),
            format!("shards must be at most 1024, got {n}")
        );
    }
}

#[tokio::test(start_paused = true)]
async fn shard_counts_from_1_to_1024_build_a_working_timer() {
    for n in [1, 2, 7, 1024] {
        let timer = Timer::builder().shards(n).build().unwrap();
        let start = Instant::now();
        timer.sleep(ms(15)).await;
        assert_eq!(start.elapsed(), ms(15), "{n} shards");
        let out = timer.spawn_after(ms(5), async { 3 }).await;
        assert_eq!(out.unwrap(), 3, "{n} shards");
        assert_eq!(timer.pending(), 0);
    }
}

#[tokio::test]
async fn the_last_shard_setting_counts() {
    // A bad count replaced before `build` is no error, and a good one replaced by a bad one is.
    assert!(Timer::builder().shards(0).shards(4).build().is_ok());
    assert_eq!(
        Timer::builder().shards(4).shards(0).build().unwrap_err(),
        BuildError::ZeroShards
    );
}

#[test]
fn shard_errors_are_std_errors_and_need_no_runtime_to_format() {
    let errors: Vec<Box<dyn std::error::Error + Send + Sync>> = vec![
        Box::new(BuildError::ZeroShards),
        Box::new(BuildError::TooManyShards {
            shards: 2000,
            max: 1024,
        }),
    ];
    assert!(errors[0].to_string().contains("at least 1"));
    assert!(errors[1].to_string().contains("2000"));
    // Outside a runtime the missing runtime is reported first, as for every other setting.
    assert_eq!(
        Timer::builder().shards(0).build().unwrap_err(),
        BuildError::NoRuntime
    );
}

#[tokio::test]
async fn builder_rejects_invalid_settings() {
    let err = Timer::builder().tick(Duration::ZERO).build().unwrap_err();
    assert_eq!(err, BuildError::ZeroTick);
    assert!(!err.to_string().is_empty());

    let err = Timer::builder().tick(Duration::MAX).build().unwrap_err();
    assert_eq!(err, BuildError::TickTooLarge);
    assert!(!err.to_string().is_empty());

    for size in [0usize, 1, 48, 100, 1 << 17] {
        let err = Timer::builder().wheel_size(size).build().unwrap_err();
        assert_eq!(err, BuildError::InvalidWheelSize { size, max: 65536 });
        assert!(err.to_string().contains(&size.to_string()), "{err}");
    }

    let err = Timer::builder().max_pending(0).build().unwrap_err();
    assert_eq!(err, BuildError::ZeroMaxPending);
    assert!(!err.to_string().is_empty());

    // Errors are std errors.
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err);
    assert!(!boxed.to_string().is_empty());
}

#[test]
fn build_outside_a_runtime_is_no_runtime() {
    let err = Timer::builder().build().unwrap_err();
    assert_eq!(err, BuildError::NoRuntime);
    assert!(!err.to_string().is_empty());
}

#[test]
fn build_on_a_runtime_without_time_is_no_time_driver() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt.block_on(async { Timer::builder().build().unwrap_err() });
    assert_eq!(err, BuildError::NoTimeDriver);
    assert!(!err.to_string().is_empty());

    let _guard = rt.enter();
    assert_eq!(
        Timer::builder().build().unwrap_err(),
        BuildError::NoTimeDriver
    );
}

#[tokio::test(start_paused = true)]
async fn huge_tick_builds_and_fires_not_early() {
    let day = Duration::from_secs(86_400);
    let timer = Timer::builder().tick(day).build().unwrap();
    assert_eq!(timer.tick(), day);

    let start = Instant::now();
    timer.sleep(Duration::from_secs(1)).await;
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_secs(1), "early: {elapsed:?}");
    assert!(elapsed <= Duration::from_secs(1) + day, "late: {elapsed:?}");

    let start = Instant::now();
    let t = timer.spawn_after(Duration::from_secs(3 * 86_400 + 5), async {
        Instant::now()
    });
    let at = t.await.unwrap();
    assert!(at >= start + Duration::from_secs(3 * 86_400 + 5));
    assert!(at <= start + Duration::from_secs(3 * 86_400 + 5) + day);
}

async fn check_wheel_size(size: usize) {
    let timer = Timer::builder().wheel_size(size).build().unwrap();
    let start = Instant::now();
    let delays = [
        Duration::from_micros(300),
        ms(1),
        ms(2),
        ms(7),
        ms(64),
        ms(65),
        ms(1_000),
        ms(4_097),
        Duration::from_secs(3_600),
        Duration::from_secs(86_400 * 3),
    ];
    let mut handles = Vec::new();
    for d in delays {
        let timer = timer.clone();
        handles.push(tokio::spawn(async move {
            timer.sleep(d).await;
            (d, Instant::now())
        }));
    }
    for h in handles {
        let (d, at) = h.await.unwrap();
        assert!(at >= start + d, "wheel {size}: {d:?} fired early");
        assert!(
            at <= start + d + timer.tick(),
            "wheel {size}: {d:?} fired {:?} late",
            at - (start + d)
        );
    }
    assert_eq!(timer.pending(), 0);
}

#[tokio::test(start_paused = true)]
async fn smallest_and_largest_wheel_sizes_work() {
    check_wheel_size(2).await;
    check_wheel_size(65_536).await;
}

#[tokio::test(start_paused = true)]
async fn explicit_shard_counts_work() {
    for shards in [1, 3, 64] {
        let timer = Timer::builder().shards(shards).build().unwrap();
        let start = Instant::now();
        timer.sleep(ms(15)).await;
        assert!(start.elapsed() >= ms(15));
        assert!(start.elapsed() <= ms(16));
    }
}
