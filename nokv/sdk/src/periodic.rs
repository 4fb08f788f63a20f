//! One background thread that runs a task on a timer until stopped: the single implementation
//! behind [`crate::snapshot::ReaperHandle`] and [`crate::lifetime::MaintenanceHandle`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A named thread running a task every `every` (polling a stop flag at most every 50 ms); stopped
/// and joined by [`Periodic::shutdown`] or on drop, after at most one task run plus one poll.
#[derive(Debug)]
pub(crate) struct Periodic {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Periodic {
    /// Spawns thread `name` running `task` every `every`; the first run is immediate when
    /// `run_first`, else after one interval. A thread that cannot be spawned runs nothing.
    pub(crate) fn spawn(
        name: &str,
        every: Duration,
        run_first: bool,
        mut task: impl FnMut() + Send + 'static,
    ) -> Periodic {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let poll = Duration::from_millis(50).min(every);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut waited = if run_first { every } else { Duration::ZERO };
                while !flag.load(Ordering::SeqCst) {
                    if waited >= every {
                        task();
                        waited = Duration::ZERO;
                    }
                    std::thread::sleep(poll);
                    waited += poll;
                }
            })
            .ok();
        Periodic { stop, thread }
    }

    /// Stops the thread and waits for it.
    pub(crate) fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        self.shutdown();
    }
}
