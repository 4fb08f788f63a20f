//! io_uring submission of WAL group writes (the `io-uring` crate).
//!
//! One [`Ring`] is owned by the WAL segment writer, so only the active group-commit writer uses
//! it. A group is submitted as a `WRITE` SQE **linked** (`IOSQE_IO_LINK`) to an `FSYNC` SQE with
//! `IORING_FSYNC_DATASYNC`, then one `io_uring_enter` submits both and waits for both
//! completions: one system call per group instead of `pwrite` + `fdatasync`.
//!
//! Error handling:
//! - a short write breaks the link, so the kernel cancels the `fdatasync` (`-ECANCELED`); the
//!   rest of the buffer is resubmitted, again linked to a fresh `fdatasync`;
//! - `-EINTR`/`-EAGAIN` completions are retried (bounded), as are `EINTR`/`EAGAIN`/`EBUSY` from
//!   `io_uring_enter` itself (only the wait is repeated: submitted entries are not resubmitted);
//! - any other error is returned (the WAL then poisons itself).
//!
//! [`Ring::probe`] is run at open: it creates a ring, checks that the kernel supports the
//! `WRITE` and `FSYNC` opcodes and round-trips a `NOP`. Any failure there means "io_uring is not
//! available" (old kernel, `io_uring_disabled` sysctl, seccomp filter …).

// The io-uring crate's `SubmissionQueue::push` is unsafe: the kernel reads the buffer an SQE
// points at asynchronously. Each `unsafe` block below states why its buffer stays valid.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types, IoUring, Probe};

const NOP_TAG: u64 = 1;
const WRITE_TAG: u64 = 2;
const SYNC_TAG: u64 = 3;

/// Submission-queue entries of the ring (a group needs two).
const RING_ENTRIES: u32 = 8;
/// Largest single `WRITE` SQE (its length field is 32 bits; stay well below).
const MAX_WRITE_CHUNK: usize = 1 << 30;
/// Bound on consecutive rounds that make no progress because of `EINTR`/`EAGAIN`.
const MAX_RETRIES: u32 = 10_000;

/// An io_uring instance dedicated to the WAL writer.
pub(crate) struct Ring {
    ring: IoUring,
    /// The bytes of the group being written. Owned by the ring so that, if submitted entries
    /// could not be reaped after an `io_uring_enter` failure, the memory they point at is leaked
    /// instead of being reused while the kernel may still read it.
    staging: Vec<u8>,
    /// Set after an unrecoverable ring failure; every later call fails.
    broken: bool,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("broken", &self.broken)
            .finish()
    }
}

fn transient_code(code: i32) -> bool {
    code == libc::EINTR || code == libc::EAGAIN || code == libc::EBUSY
}

fn push_failed() -> io::Error {
    io::Error::other("io_uring submission queue is full")
}

impl Ring {
    /// Creates a ring and proves it usable: the kernel must support `WRITE` and `FSYNC`, and a
    /// `NOP` must complete. Errors: whatever the kernel said (`ENOSYS`, `EPERM`, …) or
    /// `Unsupported` for a missing opcode.
    pub(crate) fn probe() -> io::Result<Ring> {
        let ring = IoUring::new(RING_ENTRIES)?;
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        if !probe.is_supported(opcode::Write::CODE) || !probe.is_supported(opcode::Fsync::CODE) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the kernel's io_uring lacks the WRITE or FSYNC opcode",
            ));
        }
        let mut r = Ring {
            ring,
            staging: Vec::new(),
            broken: false,
        };
        let nop = opcode::Nop::new().build().user_data(NOP_TAG);
        // SAFETY: a NOP references no memory.
        unsafe { r.ring.submission().push(&nop) }.map_err(|_| push_failed())?;
        let mut out = [(0u64, 0i32); 1];
        r.complete(&mut out)?;
        if out[0].1 < 0 {
            return Err(io::Error::from_raw_os_error(-out[0].1));
        }
        Ok(r)
    }

    /// Marks the ring unusable after a failure that may leave entries queued or in flight, and
    /// leaks the staging buffer so the memory they point at is never reused. Returns `e`.
    fn abandon(&mut self, e: io::Error) -> io::Error {
        self.broken = true;
        std::mem::forget(std::mem::take(&mut self.staging));
        e
    }

    /// Submits what is queued and collects exactly `out.len()` completions into `out`
    /// (`(user_data, result)`), repeating the wait after `EINTR`/`EAGAIN`/`EBUSY`.
    fn complete(&mut self, out: &mut [(u64, i32)]) -> io::Result<()> {
        let mut got = 0;
        let mut retries = 0;
        loop {
            for cqe in self.ring.completion() {
                if let Some(slot) = out.get_mut(got) {
                    *slot = (cqe.user_data(), cqe.result());
                    got += 1;
                }
            }
            if got >= out.len() {
                return Ok(());
            }
            match self.ring.submit_and_wait(out.len() - got) {
                Ok(_) => {}
                Err(e) if e.raw_os_error().is_some_and(transient_code) && retries < MAX_RETRIES => {
                    retries += 1;
                }
                Err(e) => return Err(self.abandon(e)),
            }
        }
    }

    /// Writes all of `data` at byte offset `off` of `fd` and, if `sync`, makes it durable with
    /// `fdatasync` linked behind the write. Returns once both completed. Errors: the first
    /// non-transient error reported by the kernel; `WriteZero` if a write makes no progress.
    pub(crate) fn write_at(
        &mut self,
        fd: RawFd,
        data: &[u8],
        off: u64,
        sync: bool,
    ) -> io::Result<()> {
        if self.broken {
            return Err(io::Error::other(
                "the WAL's io_uring ring is unusable after an earlier failure",
            ));
        }
        self.staging.clear();
        self.staging.extend_from_slice(data);
        let len = self.staging.len();
        let mut done = 0usize;
        let mut synced = !sync;
        let mut retries = 0u32;
        while done < len || !synced {
            let write_now = done < len;
            let mut n = 0;
            {
                let mut sq = self.ring.submission();
                if write_now {
                    let chunk = (len - done).min(MAX_WRITE_CHUNK);
                    let ptr = self.staging[done..].as_ptr();
                    let mut w = opcode::Write::new(types::Fd(fd), ptr, chunk as u32)
                        .offset(off + done as u64)
                        .build()
                        .user_data(WRITE_TAG);
                    if sync {
                        w = w.flags(squeue::Flags::IO_LINK);
                    }
                    // SAFETY: `ptr..ptr+chunk` lies inside `self.staging`, which is not touched
                    // again until `complete` below has reaped this entry's completion (or
                    // leaked the buffer if it could not). The caller keeps `fd` open for the
                    // duration of the call.
                    if unsafe { sq.push(&w) }.is_err() {
                        drop(sq);
                        return Err(self.abandon(push_failed()));
                    }
                    n += 1;
                }
                if sync {
                    let s = opcode::Fsync::new(types::Fd(fd))
                        .flags(types::FsyncFlags::DATASYNC)
                        .build()
                        .user_data(SYNC_TAG);
                    // SAFETY: an FSYNC references no memory.
                    if unsafe { sq.push(&s) }.is_err() {
                        drop(sq);
                        return Err(self.abandon(push_failed()));
                    }
                    n += 1;
                }
            }
            let mut out = [(0u64, 0i32); 2];
            self.complete(&mut out[..n])?;
            // The write's completion decides whether the linked sync counted.
            out[..n].sort_by_key(|&(tag, _)| tag);
            let mut progressed = false;
            let mut last_err = None;
            for &(tag, res) in &out[..n] {
                match (tag, res) {
                    (WRITE_TAG, r) if r > 0 => {
                        done += r as usize;
                        progressed = true;
                    }
                    (WRITE_TAG, 0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::WriteZero,
                            "io_uring write wrote 0 bytes",
                        ))
                    }
                    (SYNC_TAG, r) if r >= 0 => {
                        if done >= len {
                            synced = true;
                            progressed = true;
                        }
                    }
                    // The write before it was short or failed: the link cancelled the sync.
                    (SYNC_TAG, r) if -r == libc::ECANCELED && write_now => {}
                    (_, r) if transient_code(-r) => {
                        last_err = Some(io::Error::from_raw_os_error(-r));
                    }
                    (_, r) => return Err(io::Error::from_raw_os_error(-r)),
                }
            }
            if progressed {
                retries = 0;
            } else {
                retries += 1;
                if retries > MAX_RETRIES {
                    return Err(last_err
                        .unwrap_or_else(|| io::Error::other("io_uring write made no progress")));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn linked_write_and_datasync_land_in_the_file() {
        let Ok(mut ring) = Ring::probe() else {
            eprintln!("io_uring unavailable here; nothing to check");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::File::create(&path).unwrap();
        ring.write_at(file.as_raw_fd(), b"hello ", 0, true).unwrap();
        ring.write_at(file.as_raw_fd(), b"world", 6, false).unwrap();
        ring.write_at(file.as_raw_fd(), b"", 11, true).unwrap();
        let big: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        ring.write_at(file.as_raw_fd(), &big, 11, true).unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[..11], b"hello world");
        assert_eq!(&got[11..], &big[..]);
    }

    #[test]
    fn write_to_a_read_only_descriptor_reports_ebadf() {
        let Ok(mut ring) = Ring::probe() else {
            eprintln!("io_uring unavailable here; nothing to check");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let ro = std::fs::File::open(&path).unwrap();
        let err = ring.write_at(ro.as_raw_fd(), b"abc", 0, true).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        // The ring stays usable after a failed operation.
        let rw = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        ring.write_at(rw.as_raw_fd(), b"y", 0, true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"y");
    }
}
