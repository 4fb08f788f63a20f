//! Fault injection for tests (cargo feature `testing`; always built for this crate's tests).
//!
//! [`FaultyStore`] wraps any [`ObjectStore`] and, on demand, fails puts with
//! [`Error::Unavailable`] (optionally *after* applying them, to model an ambiguous provider
//! result: the object landed but the response was lost), fails reads, or corrupts the bytes
//! reads return. Faults can be changed at any time through `&self`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::Error;
use crate::store::{ObjectMeta, ObjectStore, OpenUpload, PutOutcome, UploadObserver};

const NO_LIMIT: u64 = u64::MAX;

/// A fault-injecting [`ObjectStore`] wrapper.
///
/// Put ordinals are 1-based and count every `put` and `put_if_absent` call made through this
/// wrapper since it was created (including calls that failed).
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    puts: AtomicU64,
    /// Ordinal of the single put that fails; 0 = none.
    fail_nth_put: AtomicU64,
    /// Puts with an ordinal above this fail; `u64::MAX` = none.
    fail_puts_after: AtomicU64,
    ambiguous_put_failures: AtomicBool,
    corrupt_gets: AtomicBool,
    fail_gets: AtomicBool,
}

impl<S: ObjectStore> FaultyStore<S> {
    /// Wraps `inner` with every fault disabled.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            puts: AtomicU64::new(0),
            fail_nth_put: AtomicU64::new(0),
            fail_puts_after: AtomicU64::new(NO_LIMIT),
            ambiguous_put_failures: AtomicBool::new(false),
            corrupt_gets: AtomicBool::new(false),
            fail_gets: AtomicBool::new(false),
        }
    }

    /// The wrapped store (bypasses all faults).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Unwraps the store.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Number of `put`/`put_if_absent` calls made so far.
    pub fn put_count(&self) -> u64 {
        self.puts.load(Ordering::SeqCst)
    }

    /// Makes the put with 1-based ordinal `n` fail (`0` disables).
    pub fn fail_nth_put(&self, n: u64) {
        self.fail_nth_put.store(n, Ordering::SeqCst);
    }

    /// Makes every put with an ordinal greater than `n` fail: the first `n` puts succeed
    /// (`fail_puts_after(0)` fails all puts; use [`FaultyStore::clear_faults`] to stop).
    pub fn fail_puts_after(&self, n: u64) {
        self.fail_puts_after.store(n, Ordering::SeqCst);
    }

    /// When `true`, a failing put is first applied to the inner store and then reported as
    /// [`Error::Unavailable`] (the write landed, the acknowledgement was lost). When `false`
    /// (default) the failing put never reaches the inner store.
    pub fn set_put_failures_ambiguous(&self, ambiguous: bool) {
        self.ambiguous_put_failures
            .store(ambiguous, Ordering::SeqCst);
    }

    /// When `true`, `get` and `get_range` return corrupted bytes: the lowest bit of the first
    /// byte is flipped, and an empty result becomes one `0x00` byte.
    pub fn corrupt_gets(&self, on: bool) {
        self.corrupt_gets.store(on, Ordering::SeqCst);
    }

    /// When `true`, `get`, `get_range` and `head` fail with [`Error::Unavailable`].
    pub fn fail_gets(&self, on: bool) {
        self.fail_gets.store(on, Ordering::SeqCst);
    }

    /// Disables every fault (the put counter keeps counting).
    pub fn clear_faults(&self) {
        self.fail_nth_put.store(0, Ordering::SeqCst);
        self.fail_puts_after.store(NO_LIMIT, Ordering::SeqCst);
        self.ambiguous_put_failures.store(false, Ordering::SeqCst);
        self.corrupt_gets.store(false, Ordering::SeqCst);
        self.fail_gets.store(false, Ordering::SeqCst);
    }

    /// Counts one put and decides whether it fails.
    fn put_fault(&self, key: &str) -> Option<Error> {
        let n = self.puts.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        let fails = n == self.fail_nth_put.load(Ordering::SeqCst)
            || n > self.fail_puts_after.load(Ordering::SeqCst);
        fails.then(|| Error::Unavailable {
            key: key.to_owned(),
            reason: format!("injected fault on put #{n}"),
        })
    }

    /// Runs `op` on the inner store unless the put is faulted; ambiguous faults run it first.
    fn faulted_put<T>(
        &self,
        key: &str,
        op: impl FnOnce(&S) -> Result<T, Error>,
    ) -> Result<T, Error> {
        match self.put_fault(key) {
            None => op(&self.inner),
            Some(err) => {
                if self.ambiguous_put_failures.load(Ordering::SeqCst) {
                    let _ = op(&self.inner);
                }
                Err(err)
            }
        }
    }

    fn read_fault(&self, key: &str) -> Result<(), Error> {
        if self.fail_gets.load(Ordering::SeqCst) {
            return Err(Error::Unavailable {
                key: key.to_owned(),
                reason: "injected read fault".to_owned(),
            });
        }
        Ok(())
    }

    fn maybe_corrupt(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        if self.corrupt_gets.load(Ordering::SeqCst) {
            match bytes.first_mut() {
                Some(b) => *b ^= 1,
                None => bytes.push(0),
            }
        }
        bytes
    }
}

impl<S: ObjectStore> ObjectStore for FaultyStore<S> {
    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), Error> {
        self.faulted_put(key, |s| s.put(key, bytes))
    }

    fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, Error> {
        self.faulted_put(key, |s| s.put_if_absent(key, bytes))
    }

    fn get(&self, key: &str) -> Result<Vec<u8>, Error> {
        self.read_fault(key)?;
        self.inner.get(key).map(|b| self.maybe_corrupt(b))
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>, Error> {
        self.read_fault(key)?;
        self.inner
            .get_range(key, offset, len)
            .map(|b| self.maybe_corrupt(b))
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, Error> {
        self.read_fault(key)?;
        self.inner.head(key)
    }

    fn delete(&self, key: &str) -> Result<(), Error> {
        self.inner.delete(key)
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, Error> {
        self.inner.list(prefix)
    }

    fn provider_name(&self) -> &'static str {
        self.inner.provider_name()
    }

    fn put_if_absent_observed(
        &self,
        key: &str,
        bytes: &[u8],
        observer: &mut dyn UploadObserver,
    ) -> Result<PutOutcome, Error> {
        self.faulted_put(key, |s| s.put_if_absent_observed(key, bytes, observer))
    }

    fn abort_upload(&self, key: &str, upload_id: &str) -> Result<(), Error> {
        self.inner.abort_upload(key, upload_id)
    }

    fn list_uploads(&self, prefix: &str) -> Result<Vec<OpenUpload>, Error> {
        self.inner.list_uploads(prefix)
    }
}
