//! Integration tests for `tokio_timing_wheel::time`, the mirror of `tokio::time`: every name
//! a `use tokio::time::{...}` imports resolves to the wheel's, and `error::Elapsed` converts
//! where Tokio's does.

use std::error::Error;
use std::pin::Pin;

use futures::StreamExt;
use tokio_test::{assert_pending, assert_ready, task};
use tokio_timing_wheel::time::error::Elapsed;
use tokio_timing_wheel::time::{
    self, interval, interval_at, sleep, sleep_until, timeout, timeout_at, Duration, Instant,
    Interval, MissedTickBehavior, Sleep, Timeout,
};

mod common;
use common::ms;

/// Each mirrored name is the wheel's item, not a re-export of Tokio's: these only compile if
/// every type is the crate's own.
#[test]
fn the_mirrored_names_are_the_crates_own_items() {
    use std::future::Ready;
    use tokio_timing_wheel as wheel;
    let _: fn(Sleep) -> wheel::Sleep = |s| s;
    let _: fn(Timeout<Ready<()>>) -> wheel::Timeout<Ready<()>> = |t| t;
    let _: fn(Interval) -> wheel::Interval = |i| i;
    let _: fn(MissedTickBehavior) -> wheel::MissedTickBehavior = |b| b;
    let _: fn(Elapsed) -> wheel::Elapsed = |e| e;
    let _: fn(Duration) -> wheel::Sleep = sleep;
    let _: fn(Instant) -> wheel::Sleep = sleep_until;
    let _: fn(Duration, Ready<()>) -> wheel::Timeout<Ready<()>> = timeout;
    let _: fn(Instant, Ready<()>) -> wheel::Timeout<Ready<()>> = timeout_at;
    let _: fn(Duration) -> wheel::Interval = interval;
    let _: fn(Instant, Duration) -> wheel::Interval = interval_at;
}

#[tokio::test(start_paused = true)]
async fn the_mirrored_names_are_the_wheels_timers() {
    let start = Instant::now();
    sleep(ms(10)).await;
    sleep_until(start + ms(25)).await;
    assert_eq!(start.elapsed(), ms(25), "exact deadlines in paused time");

    // `Sleep` is the wheel's: `Unpin`, resettable, `is_elapsed` as Tokio's.
    let mut s: Sleep = sleep(ms(5));
    assert!(!s.is_elapsed());
    Pin::new(&mut s).reset(Instant::now() + ms(1));
    (&mut s).await;
    assert!(s.is_elapsed());

    let t: Timeout<_> = timeout(ms(5), std::future::pending::<()>());
    assert_eq!(t.deadline(), Instant::now() + ms(5));
    let err: Elapsed = t.await.unwrap_err();
    assert!(!err.is_shutdown());
    assert_eq!(timeout_at(Instant::now(), async { 7 }).await, Ok(7));

    let mut i: Interval = interval(ms(10));
    i.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let first = i.tick().await;
    assert_eq!(i.tick().await, first + ms(10));
    let at = Instant::now() + ms(3);
    let ticks: Vec<Instant> = interval_at(at, ms(2)).take(2).collect().await;
    assert_eq!(ticks, [at, at + ms(2)]);

    // Tokio's clock controls still drive it.
    let mut s = task::spawn(time::sleep(Duration::from_secs(60)));
    assert_pending!(s.poll());
    tokio::time::advance(Duration::from_secs(60)).await;
    assert_ready!(s.poll());
}

#[tokio::test(start_paused = true)]
async fn elapsed_converts_as_tokios_does() {
    let err = timeout(ms(1), std::future::pending::<()>())
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "deadline has elapsed");

    let io: std::io::Error = err.clone().into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    assert!(io.get_ref().unwrap().is::<Elapsed>());

    let boxed: Box<dyn Error + Send + Sync> = err.clone().into();
    assert!(boxed.downcast_ref::<Elapsed>().is_some());

    // `?` in a function returning io::Result.
    async fn call() -> std::io::Result<()> {
        timeout(ms(1), std::future::pending::<()>()).await?;
        Ok(())
    }
    assert_eq!(
        call().await.unwrap_err().kind(),
        std::io::ErrorKind::TimedOut
    );

    #[cfg(feature = "tower")]
    {
        let tower: tower::timeout::error::Elapsed = err.into();
        let boxed: tower::BoxError = tower.into();
        assert!(boxed.is::<tower::timeout::error::Elapsed>());
    }
}

/// `tokio::time::error` has two names, `Elapsed` and `Error`: an import of both keeps
/// compiling (`Error` is Tokio's own timer error; the wheel never returns one).
#[test]
fn every_name_of_tokios_time_error_module_resolves() {
    use tokio_timing_wheel::time::error::Error;
    fn is_tokios(_: Option<tokio::time::error::Error>) {}
    is_tokios(None::<Error>);
    assert!(!Error::shutdown().is_at_capacity());
}
