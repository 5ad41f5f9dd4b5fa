//! A long-lived helper thread for the second half of a split read (the tail of a rollout log,
//! the second half of a `messages.jsonl`).
//!
//! A thread spawned per read started each time on a fresh allocator heap, so everything it
//! allocated (half of a loaded session, half of a trace's spans) was faulted in from fresh
//! memory: on this project's 2-core VM at about 0.6 ms per MB, which made two-thread reads in a
//! long-lived process (RPC, MCP, the web viewer, the benchmarks) vary between faster and slower
//! than one thread. The helper keeps its heap between reads. One read at a time uses it; a read
//! that finds it busy runs its half on a thread of its own, as before, so nothing waits on
//! another caller's read. A job that panics is caught and reported to its caller; the helper
//! goes on.

use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

struct Helper {
    jobs: mpsc::Sender<Job>,
    busy: AtomicBool,
}

fn helper() -> Option<&'static Helper> {
    static HELPER: OnceLock<Option<Helper>> = OnceLock::new();
    HELPER
        .get_or_init(|| {
            let (jobs, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("freecode-read-helper".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .ok()
                .map(|_| Helper {
                    jobs,
                    busy: AtomicBool::new(false),
                })
        })
        .as_ref()
}

/// A job started by [`run`]: its result on [`Pending::join`].
pub(crate) struct Pending<R> {
    result: mpsc::Receiver<std::thread::Result<R>>,
}

impl<R> Pending<R> {
    /// Waits for the job; `Err` with its panic when it panicked.
    pub(crate) fn join(self) -> std::thread::Result<R> {
        self.result
            .recv()
            .unwrap_or_else(|_| Err(Box::new("the read helper stopped")))
    }
}

/// Runs `job` on the helper thread, or on a thread of its own when the helper is busy.
pub(crate) fn run<R: Send + 'static>(job: impl FnOnce() -> R + Send + 'static) -> Pending<R> {
    let (tx, result) = mpsc::channel();
    let work = move || {
        let r = std::panic::catch_unwind(AssertUnwindSafe(job));
        // The caller may have gone (its own panic): nobody to tell.
        let _ = tx.send(r);
    };
    if let Some(h) = helper()
        && h.busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        let job: Job = Box::new(move || {
            work();
            h.busy.store(false, Ordering::Release);
        });
        match h.jobs.send(job) {
            Ok(()) => return Pending { result },
            // The helper thread is gone: run the job here instead (it frees the flag).
            Err(mpsc::SendError(job)) => {
                std::thread::spawn(job);
                return Pending { result };
            }
        }
    }
    std::thread::spawn(work);
    Pending { result }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_return_their_results_and_a_panic_is_reported_without_stopping_the_helper() {
        assert_eq!(run(|| 2 + 2).join().ok(), Some(4));
        assert!(run(|| -> u8 { panic!("boom") }).join().is_err());
        // Several at once: one on the helper, the others on their own threads.
        let pending: Vec<_> = (0..8u64)
            .map(|i| {
                run(move || {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    i * 10
                })
            })
            .collect();
        let got: Vec<u64> = pending.into_iter().map(|p| p.join().unwrap()).collect();
        assert_eq!(got, (0..8).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(run(|| "still here").join().ok(), Some("still here"));
    }
}
