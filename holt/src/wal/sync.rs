//! The synchronization primitives of the group-commit hand-off, behind a tiny shim.
//!
//! Normally these are `parking_lot`'s `Mutex` and `Condvar`; when the crate is built with
//! `RUSTFLAGS="--cfg loom"` they are `loom`'s model-checked versions, so the loom test
//! (`tests/loom_group_commit.rs`) explores every interleaving of the real hand-off code
//! ([`super::group_commit`]) rather than a copy of it. Only the operations the hand-off uses are
//! exposed: `lock`, `wait` (by value, so the std/loom and parking_lot shapes agree),
//! `notify_all`, and `pause` (the group-commit leader's commit delay: a sleep, under loom a
//! yield so the model explores committers queueing during it). Neither version has lock poisoning visible to callers: a panic while holding a
//! lock is not something the hand-off code can cause (it never panics), and loom's poison flag is
//! stripped.

#[cfg(not(loom))]
mod imp {
    /// A mutual-exclusion lock (`parking_lot::Mutex`).
    pub(crate) struct Mutex<T>(parking_lot::Mutex<T>);

    /// The guard returned by [`Mutex::lock`].
    pub(crate) type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(parking_lot::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
    }

    /// A condition variable (`parking_lot::Condvar`).
    pub(crate) struct Condvar(parking_lot::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(parking_lot::Condvar::new())
        }

        /// Atomically releases `guard`, blocks until notified (or spuriously woken) and
        /// re-acquires the lock.
        pub(crate) fn wait<'a, T>(&self, mut guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(&mut guard);
            guard
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// Sleeps for `d` (the commit delay).
    pub(crate) fn pause(d: std::time::Duration) {
        std::thread::sleep(d);
    }
}

#[cfg(loom)]
mod imp {
    use std::sync::PoisonError;

    /// A mutual-exclusion lock (`loom::sync::Mutex`, model-checked).
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    /// The guard returned by [`Mutex::lock`].
    pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    /// A condition variable (`loom::sync::Condvar`, model-checked).
    pub(crate) struct Condvar(loom::sync::Condvar);

    impl Condvar {
        pub(crate) fn new() -> Self {
            Condvar(loom::sync::Condvar::new())
        }

        /// Atomically releases `guard`, blocks until notified and re-acquires the lock.
        pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
            self.0.wait(guard).unwrap_or_else(PoisonError::into_inner)
        }

        pub(crate) fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    /// Yields to the other model threads (loom has no clock).
    pub(crate) fn pause(_d: std::time::Duration) {
        loom::thread::yield_now();
    }
}

pub(crate) use imp::{pause, Condvar, Mutex, MutexGuard};
