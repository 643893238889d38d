//! Differential tests: our future and Tokio's, driven through the same script, step by step.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::CountingWaker;

/// How a step polls: with the task's cooperative budget, with it spent, or spent and under
/// `tokio::task::unconstrained`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Budget {
    Has,
    Spent,
    Unconstrained,
}

/// How ours may differ from Tokio's at a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rel {
    /// The same answer, as many wakes, the same `is_elapsed`.
    Same,
    /// The same answer and wakes; `is_elapsed` differs as `src/sleep.rs` documents.
    SameAnswer,
    /// An intended improvement, ours no worse: no more wakes so far than Tokio's (on the steps
    /// compared), never `Ready` where Tokio's is `Pending`, `Ready` at the latest on the poll
    /// after one where Tokio's is, and elapsed whenever Tokio's is.
    NoWorse,
    /// A difference `src/sleep.rs` documents: not compared, and its wakes not counted.
    Documented,
}

/// Each side's waker (ours is side 0, Tokio's side 1), and what the steps so far compared.
#[derive(Debug, Default)]
pub(crate) struct Referee {
    wakers: [Arc<CountingWaker>; 2],
    seen: [usize; 2],
    counted: [usize; 2],
    owed: bool,
}

impl Referee {
    /// Polls `f` with side `side`'s waker, on a fresh budget (it yields first) used as `budget`.
    pub(crate) async fn poll<F: Future + ?Sized>(
        &self,
        side: usize,
        f: Pin<&mut F>,
        budget: Budget,
    ) -> Poll<F::Output> {
        tokio::task::yield_now().await;
        let waker = Waker::from(self.wakers[side].clone());
        let mut cx = Context::from_waker(&waker);
        if budget != Budget::Has {
            super::exhaust_budget();
        }
        if budget == Budget::Unconstrained {
            Pin::new(&mut tokio::task::unconstrained(f)).poll(&mut cx)
        } else {
            f.poll(&mut cx)
        }
    }

    /// How many times side `side`'s waker was woken since the referee was made.
    pub(crate) fn woken(&self, side: usize) -> usize {
        self.wakers[side].count()
    }

    /// Judges a step by `rel`: its answers (none for a step that only waits), the wakes since
    /// the last step (counted after a yield, when Tokio delivers the wakes it deferred out of
    /// budget) and `is_elapsed` (none where there is none). Returns our answer.
    pub(crate) async fn judge<T: PartialEq + Debug>(
        &mut self,
        rel: Rel,
        what: &str,
        answers: Option<[Poll<T>; 2]>,
        elapsed: Option<[bool; 2]>,
    ) -> Option<Poll<T>> {
        tokio::task::yield_now().await;
        let now = [self.wakers[0].count(), self.wakers[1].count()];
        let woken = [now[0] - self.seen[0], now[1] - self.seen[1]];
        self.seen = now;
        let at =
            format!("{what}: ours, Tokio's: {answers:?}, woken {woken:?}, elapsed {elapsed:?}");
        let ready = answers.as_ref().map(|[a, b]| [a.is_ready(), b.is_ready()]);
        if let Some([ours_ready, _]) = ready {
            assert!(
                ours_ready || !self.owed,
                "{at}: Tokio's was Ready a poll ago"
            );
            self.owed = false;
        }
        match rel {
            Rel::Same | Rel::SameAnswer => {
                if let Some([a, b]) = &answers {
                    assert_eq!(a, b, "{at}");
                }
                assert_eq!(woken[0], woken[1], "{at}");
                if let (Rel::Same, Some([a, b])) = (rel, elapsed) {
                    assert_eq!(a, b, "{at}: is_elapsed");
                }
            }
            Rel::NoWorse => {
                if let Some([ours_ready, theirs_ready]) = ready {
                    assert!(!ours_ready || theirs_ready, "{at}: ours Ready first");
                    self.owed = theirs_ready && !ours_ready;
                }
                if let Some([ours, theirs]) = elapsed {
                    assert!(ours || !theirs, "{at}: Tokio's elapsed first");
                }
            }
            Rel::Documented => {}
        }
        if rel != Rel::Documented {
            self.counted = [self.counted[0] + woken[0], self.counted[1] + woken[1]];
            let c = self.counted;
            assert!(c[0] <= c[1], "{at}: ours woken more, {c:?} so far");
        }
        answers.map(|[ours, _]| ours)
    }
}
