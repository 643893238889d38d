//! The arming protocol: which wheel time the driver's Tokio sleep must be set for, and who
//! runs the driver's work (a firing pass, re-arming) when several threads ask at once.
//!
//! Wakeups stay rare. A registration asks for work only when it files work due earlier than
//! the time the driver is armed for ([`Arm::lower`]); a pass first sets that time to
//! "unarmed" (`u64::MAX`), so every registration racing with the pass asks, then lowers it to
//! the earliest work it found ([`Arm::commit`]). Both sides only ever lower it within a
//! pass, so neither can overwrite an earlier time the other published. (The pass may thereby
//! keep a time it has already handled: one spurious pass, never a lost wakeup.)
//!
//! A registration lowers the armed time and asks for the re-arm in one step, under its shard's
//! lock, so that whoever sees its entry in the shard also finds the driver armed for it (a
//! shard stages later entries on that: see `Wheel::stage_recent`).
//!
//! Work requests ([`Arm::request`], and [`Arm::lower`]'s) set flags and elect one runner: the
//! thread that finds no runner becomes it and takes the flags ([`Arm::next_work`], through
//! `Driver::run`, which gives the role up, the work kept for the next runner, if the work
//! unwinds or must run on the runtime instead: [`Arm::abandon`]) until none are left, giving
//! up the role in the same step; the others return at once and the runner does their work. A
//! request made from inside the runner's own work (Tokio firing the sleep while the runner
//! re-arms it) just sets a flag, so nothing re-enters.
//!
//! Every transition happens under one small lock, taken only off the common path (a
//! registration that creates an earlier head, a pass, a re-arm). The common path, a
//! registration later than the armed time, reads an atomic copy of the armed time: it sees a
//! pass's "unarmed" store because the pass wrote it before locking the registration's shard,
//! and the registration reads it after locking that shard.

use std::sync::atomic::Ordering::{Acquire, Release};

use crate::loom::{lock, AtomicU64, Mutex};

/// Work flag: make a firing pass (the Tokio sleep fired, or is due).
pub(crate) const PASS: u8 = 1;
/// Work flag: set the Tokio sleep for the armed time (a registration lowered it).
pub(crate) const REARM: u8 = 2;

/// Shared between the driver and every registering thread.
#[derive(Debug)]
pub(crate) struct Arm {
    /// A copy of `State::armed`, written under the lock, for the registration fast path.
    armed_hint: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// The wheel time the driver will wake at, at the latest; `u64::MAX` when not armed.
    armed: u64,
    /// Work requested and not yet taken by the runner (`PASS | REARM`).
    pending: u8,
    /// Whether a thread is the runner.
    running: bool,
}

impl Arm {
    pub(crate) fn new() -> Arm {
        Arm {
            armed_hint: AtomicU64::new(u64::MAX),
            state: Mutex::new(State {
                armed: u64::MAX,
                pending: 0,
                running: false,
            }),
        }
    }

    fn set_armed(&self, state: &mut State, at: u64) {
        state.armed = at;
        self.armed_hint.store(at, Release);
    }

    /// Called by a registration that made `head` new work of its shard, with the shard's lock
    /// still held: if the driver is armed later than `head`, lowers the armed time and asks
    /// for [`REARM`] in the same step. Returns whether the caller became the runner (then,
    /// once it has released the shard's lock, it must call `Driver::run`, which takes the work
    /// with [`next_work`](Self::next_work) until it returns `None`). Done under the shard's
    /// lock so that any thread that sees the shard's wheel after this registration also finds
    /// the driver armed for it, with a runner bound to set the alarm (this thread, or a task
    /// of the runtime it hands the work to): a shard stages later entries on that promise
    /// (`Wheel::stage_recent`).
    pub(crate) fn lower(&self, head: u64) -> bool {
        // Fast path, no write to the shared line: the driver already wakes in time.
        if head >= self.armed_hint.load(Acquire) {
            return false;
        }
        let mut state = lock(&self.state);
        if head >= state.armed {
            return false;
        }
        self.set_armed(&mut state, head);
        state.pending |= REARM;
        !std::mem::replace(&mut state.running, true)
    }

    /// Whether the driver is armed to wake no later than `at` (a lock-free read of the armed
    /// time, which a pass sets to "none" when it begins: see `Shard::hand_over`).
    #[inline]
    pub(crate) fn armed_by(&self, at: u64) -> bool {
        self.armed_hint.load(Acquire) <= at
    }

    /// The wheel time the Tokio sleep must be set for (`u64::MAX`: none).
    pub(crate) fn armed(&self) -> u64 {
        lock(&self.state).armed
    }

    /// Pass side, before looking at the shards: from now on every new bucket asks to re-arm.
    pub(crate) fn begin_pass(&self) {
        let mut state = lock(&self.state);
        self.set_armed(&mut state, u64::MAX);
    }

    /// Pass side, after looking at every shard: arms for `next` (or stays unarmed), keeping
    /// an earlier time a racing registration published.
    pub(crate) fn commit(&self, next: Option<u64>) {
        let mut state = lock(&self.state);
        let at = state.armed.min(next.unwrap_or(u64::MAX));
        self.set_armed(&mut state, at);
    }

    /// Asks for `flags` work. Returns whether the caller became the runner: it must then call
    /// `Driver::run` (as `Driver::kick` does), which calls
    /// [`next_work`](Self::next_work) until it returns `None`. Otherwise the current runner
    /// will see the flags.
    pub(crate) fn request(&self, flags: u8) -> bool {
        let mut state = lock(&self.state);
        state.pending |= flags;
        !std::mem::replace(&mut state.running, true)
    }

    /// Runner side, unwinding (or on a thread that cannot pass: see `Driver::run`): gives up
    /// the role, leaving pending work (and a pass, so that what the interrupted one had not
    /// fired is fired) for the next request, which becomes the runner.
    pub(crate) fn abandon(&self) {
        let mut state = lock(&self.state);
        state.pending |= PASS | REARM;
        state.running = false;
    }

    /// Runner side: adds work for itself (the alarm turned out to be due already).
    pub(crate) fn add(&self, flags: u8) {
        lock(&self.state).pending |= flags;
    }

    /// Runner side: takes the pending work. Returns `None` once there is none, having given
    /// up the runner role in the same step (a request is either taken here or finds no runner
    /// and makes its caller the runner).
    pub(crate) fn next_work(&self) -> Option<u8> {
        let mut state = lock(&self.state);
        debug_assert!(state.running, "only the runner takes work");
        match std::mem::take(&mut state.pending) {
            0 => {
                state.running = false;
                None
            }
            work => Some(work),
        }
    }
}
