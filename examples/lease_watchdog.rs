//! A distributed lock's lease watchdog, as Redisson's: while a client holds the lock, a
//! watchdog renews the lease every third of it, so a long critical section never loses the
//! lock; a client that dies stops renewing, and the lease expires on its own.
//!
//! ```sh
//! cargo run --release -p examples --example lease_watchdog    # about 2 s
//! ```
//!
//! On the wheel:
//! - the lock server's lease expiry is a [`DelayedTask`](tokio_timing_wheel::DelayedTask)
//!   that frees the lock; a renewal moves it with
//!   [`DelayedTask::reset`](tokio_timing_wheel::DelayedTask::reset) (a later deadline costs one
//!   comparison: no cancel, no new task, no allocation);
//! - the watchdog is an [`interval`](tokio_timing_wheel::interval) of a third of the lease.
//!
//! It asserts its own outcome: the lock is never lost while its holder lives, however long
//! it holds it; released, it is free at once; after a crash it is freed one lease after the
//! last renewal, never before.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_timing_wheel::{interval, spawn_after, DelayedTask, MissedTickBehavior};

const LEASE: Duration = Duration::from_millis(300);

/// The lock server: who holds the lock, and the lease's expiry.
#[derive(Default)]
struct LockServer {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    owner: Option<&'static str>,
    expiry: Option<DelayedTask<()>>,
    /// When the lease last expired on its own (the holder had stopped renewing).
    expired_at: Option<Instant>,
    last_renewal: Option<Instant>,
}

impl LockServer {
    /// Takes the lock for `lease` if it is free.
    fn try_lock(self: &Arc<Self>, owner: &'static str, lease: Duration) -> bool {
        let mut s = self.state.lock().unwrap();
        if s.owner.is_some() {
            return false;
        }
        s.owner = Some(owner);
        s.last_renewal = Some(Instant::now());
        let server = self.clone();
        s.expiry = Some(spawn_after(lease, async move {
            let mut s = server.state.lock().unwrap();
            if s.owner == Some(owner) {
                s.owner = None;
                s.expiry = None;
                s.expired_at = Some(Instant::now());
            }
        }));
        true
    }

    /// Pushes the lease back (the watchdog's call); false if `owner` no longer holds it.
    fn renew(&self, owner: &'static str, lease: Duration) -> bool {
        let mut s = self.state.lock().unwrap();
        if s.owner != Some(owner) {
            return false;
        }
        let now = Instant::now();
        s.last_renewal = Some(now);
        s.expiry
            .as_mut()
            .is_some_and(|expiry| expiry.reset(now + lease))
    }

    fn unlock(&self, owner: &'static str) {
        let mut s = self.state.lock().unwrap();
        if s.owner == Some(owner) {
            s.owner = None;
            if let Some(expiry) = s.expiry.take() {
                expiry.cancel();
            }
        }
    }

    fn owner(&self) -> Option<&'static str> {
        self.state.lock().unwrap().owner
    }
}

/// Renews `owner`'s lease every third of it until told to stop (or the lock is lost).
/// Returns the number of renewals.
async fn watchdog(
    server: Arc<LockServer>,
    owner: &'static str,
    mut stop: oneshot::Receiver<()>,
) -> u32 {
    let mut every = interval(LEASE / 3);
    every.set_missed_tick_behavior(MissedTickBehavior::Delay);
    every.tick().await; // the first tick is immediate: the lease was just taken
    let mut renewals = 0;
    loop {
        tokio::select! {
            _ = &mut stop => return renewals,
            _ = every.tick() => {
                if !server.renew(owner, LEASE) {
                    return renewals;
                }
                renewals += 1;
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let server = Arc::new(LockServer::default());

    // A critical section four leases long: the watchdog keeps the lock.
    let start = Instant::now();
    assert!(server.try_lock("alice", LEASE));
    let (stop, stopped) = oneshot::channel();
    let dog = tokio::spawn(watchdog(server.clone(), "alice", stopped));
    for _ in 0..40 {
        tokio::time::sleep(LEASE / 10).await;
        assert_eq!(server.owner(), Some("alice"), "lock lost while held");
        assert!(!server.try_lock("bob", LEASE), "bob got a held lock");
    }
    assert!(start.elapsed() >= LEASE * 4);
    stop.send(()).unwrap();
    let renewals = dog.await.unwrap();
    server.unlock("alice");
    assert_eq!(server.owner(), None);
    println!(
        "alice held the lock {:?} with a {LEASE:?} lease: {renewals} renewals",
        start.elapsed()
    );
    assert!(renewals >= 9, "{renewals} renewals");

    // Bob takes it, and crashes: his watchdog dies with him, and the lease expires.
    assert!(server.try_lock("bob", LEASE));
    let (_crash, stopped) = oneshot::channel::<()>();
    let dog = tokio::spawn(watchdog(server.clone(), "bob", stopped));
    tokio::time::sleep(LEASE).await;
    dog.abort(); // the crash
    let _ = dog.await;
    let crashed_at = Instant::now();
    // Bounded, so that a lease that never expires fails the example instead of hanging it.
    while server.owner().is_some() {
        assert!(crashed_at.elapsed() < LEASE * 10, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let s = server.state.lock().unwrap();
    let (last, expired) = (s.last_renewal.unwrap(), s.expired_at.unwrap());
    drop(s);
    println!(
        "bob crashed; his lease expired {:?} after his last renewal ({:?} after the crash)",
        expired - last,
        expired - crashed_at
    );
    assert!(expired - last >= LEASE, "expired early");
    assert!(
        expired - last < LEASE + Duration::from_millis(100),
        "expired late"
    );
    assert!(server.try_lock("carol", LEASE), "the expired lock is free");
    server.unlock("carol");
    println!("ok");
}
