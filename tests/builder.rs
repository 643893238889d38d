//! `Builder`: the shard count is checked like the other settings (`shards(0)` and counts
//! above 1024 are errors, not silently clamped), and valid counts build a timer that fires on
//! time.
//!
//! The other settings' errors are tested in `tests/timer.rs` (`builder_rejects_invalid_settings`).

mod common;

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
