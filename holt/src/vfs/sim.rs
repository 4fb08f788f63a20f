//! A fault-injecting, crash-simulating [`WalFs`] for tests (compiled only under `cfg(test)`).
//!
//! [`SimFs`] overlays a real directory: reads and writes go to the real files (they play the role
//! of the OS page cache, i.e. **volatile** bytes), while the simulation tracks, per file, what is
//! **durable**: the bytes covered by the last completed `fdatasync`, and whether the file's
//! directory entry was made durable by a directory fsync. It also injects transient faults on
//! the way (short writes, `EINTR` from `pwrite` and `fdatasync`) so the retry loops run.
//!
//! [`SimFs::arm`] sets a **crash point**: after that many more mutating operations the next one
//! "crashes" (a write applies only a random prefix of its buffer, a sync does not complete) and
//! every later operation fails with `EIO`. [`SimFs::crash`] then rewrites the real directory to
//! one possible post-power-loss image:
//! - a file whose bytes since the last sync were only appended keeps its durable prefix plus a
//!   **random-length prefix of the unsynced suffix** (possibly tearing a record mid-way), which
//!   is occasionally zero-filled (size persisted, data not);
//! - a file truncated or overwritten below its durable length since the last sync either
//!   reverts to its durable image or keeps a random prefix of the new bytes;
//! - a file created since its directory's last fsync may vanish; a file removed since then may
//!   reappear with its durable contents.
//!
//! Files that existed before the `SimFs` first touched them count as fully durable.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::vfs::{WalFile, WalFs};

/// splitmix64: a tiny deterministic generator for tests.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 for `n == 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `1/n`.
    pub(crate) fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// What the simulation knows about one file.
#[derive(Debug)]
struct Tracked {
    /// Length of the durable image (the file length at the last completed `fdatasync`).
    durable_len: u64,
    /// `(off, bytes)`: the durable image's bytes `off..durable_len`, saved before the first
    /// truncation or overwrite below `durable_len` since the last sync. `None`: the real file
    /// still starts with the whole durable image.
    saved: Option<(u64, Vec<u8>)>,
    /// The directory entry survives a crash.
    entry_durable: bool,
    /// Set by a `rename` not yet made durable by a directory sync: the file's durable name
    /// before it (`None` when that name was not durable either). A crash either keeps the new
    /// name or moves the file back to this one — never both, never neither.
    renamed_from: Option<PathBuf>,
    /// The durable image of a file this one replaced by a not-yet-durable `rename`; restored
    /// when the crash reverts the rename.
    replaced: Option<Vec<u8>>,
}

/// Counters of what the simulation did (for test assertions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SimCounts {
    pub(crate) writes: u64,
    pub(crate) syncs: u64,
    pub(crate) short_writes: u64,
    pub(crate) eintr: u64,
    pub(crate) crashed: bool,
    /// Files whose unsynced suffix was (partly) dropped by `crash`.
    pub(crate) torn_files: u64,
    /// Mutating operations (writes, syncs, truncations, creations, removals, renames, directory
    /// syncs) that completed before the crash point.
    pub(crate) ops: u64,
}

struct SimState {
    files: HashMap<PathBuf, Tracked>,
    /// Removed files whose directory was not fsynced since: their durable image.
    ghosts: Vec<(PathBuf, Vec<u8>)>,
    /// Mutating operations left before the crash point (`None`: never).
    budget: Option<u64>,
    crashed: bool,
    /// Inject short writes and EINTR.
    faults: bool,
    rng: Rng,
    counts: SimCounts,
}

/// The crash-simulating file layer. Cheap to clone (shared state).
#[derive(Clone)]
pub(crate) struct SimFs {
    st: Arc<Mutex<SimState>>,
}

fn crashed_err() -> io::Error {
    io::Error::from_raw_os_error(libc::EIO)
}

/// Reads `len` bytes at `off` of `path` (short if the file is shorter).
fn read_range(path: &Path, off: u64, len: u64) -> io::Result<Vec<u8>> {
    let f = File::open(path)?;
    let mut buf = vec![0u8; len as usize];
    let mut got = 0usize;
    while got < buf.len() {
        let n = f.read_at(&mut buf[got..], off + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    buf.truncate(got);
    Ok(buf)
}

impl SimState {
    /// Counts one mutating operation. `Ok(true)`: this operation is the crash point.
    fn tick(&mut self) -> io::Result<bool> {
        if self.crashed {
            return Err(crashed_err());
        }
        match &mut self.budget {
            Some(0) => {
                self.crashed = true;
                self.counts.crashed = true;
                Ok(true)
            }
            Some(n) => {
                *n -= 1;
                self.counts.ops += 1;
                Ok(false)
            }
            None => {
                self.counts.ops += 1;
                Ok(false)
            }
        }
    }

    fn track(&mut self, path: &Path) -> io::Result<&mut Tracked> {
        if !self.files.contains_key(path) {
            let len = fs::metadata(path)?.len();
            self.files.insert(
                path.to_path_buf(),
                Tracked {
                    durable_len: len,
                    saved: None,
                    entry_durable: true,
                    renamed_from: None,
                    replaced: None,
                },
            );
        }
        self.files
            .get_mut(path)
            .ok_or_else(|| io::Error::other("untracked file"))
    }

    /// Saves the durable bytes from `off` before the real file is modified there.
    fn before_modify(&mut self, path: &Path, off: u64) -> io::Result<()> {
        let t = self.track(path)?;
        if off >= t.durable_len {
            return Ok(());
        }
        let (from, to) = match &t.saved {
            Some((s, _)) if *s <= off => return Ok(()),
            Some((s, _)) => (off, *s),
            None => (off, t.durable_len),
        };
        // The real file still holds the durable image in `from..to`.
        let mut head = read_range(path, from, to - from)?;
        if let Some((_, rest)) = t.saved.take() {
            head.extend_from_slice(&rest);
        }
        t.saved = Some((from, head));
        Ok(())
    }

    /// The durable image of a tracked file.
    fn durable_image(&self, path: &Path) -> io::Result<Vec<u8>> {
        match self.files.get(path) {
            None => fs::read(path),
            Some(t) => {
                let mut img = match &t.saved {
                    None => read_range(path, 0, t.durable_len)?,
                    Some((off, bytes)) => {
                        let mut v = read_range(path, 0, *off)?;
                        v.extend_from_slice(bytes);
                        v
                    }
                };
                img.truncate(t.durable_len as usize);
                Ok(img)
            }
        }
    }
}

impl SimFs {
    /// A simulation with fault injection (short writes, EINTR) seeded by `seed`, not armed.
    pub(crate) fn new(seed: u64) -> Self {
        SimFs {
            st: Arc::new(Mutex::new(SimState {
                files: HashMap::new(),
                ghosts: Vec::new(),
                budget: None,
                crashed: false,
                faults: true,
                rng: Rng::new(seed),
                counts: SimCounts::default(),
            })),
        }
    }

    /// A simulation without transient fault injection (every write is whole, no `EINTR`), so
    /// the sequence of mutating operations is deterministic; seeded by `seed`, not armed.
    pub(crate) fn quiet(seed: u64) -> Self {
        let s = SimFs::new(seed);
        s.st.lock().faults = false;
        s
    }

    /// The crash happens at the `ops`-th mutating operation from now (0: the next one).
    pub(crate) fn arm(&self, ops: u64) {
        self.st.lock().budget = Some(ops);
    }

    /// What the simulation did so far.
    pub(crate) fn counts(&self) -> SimCounts {
        self.st.lock().counts
    }

    /// Applies a power loss to the real directory (see the module docs). Call after every user
    /// of this `SimFs` has stopped; the `SimFs` refuses all operations afterwards.
    pub(crate) fn crash(&self) -> io::Result<()> {
        let mut st = self.st.lock();
        st.crashed = true;
        let paths: Vec<PathBuf> = st.files.keys().cloned().collect();
        let mut plan = Vec::new();
        for path in paths {
            if !path.exists() {
                continue;
            }
            let image = st.durable_image(&path)?;
            let Some(t) = st.files.get(&path) else {
                continue;
            };
            let (entry_durable, durable_len, saved_off) = (
                t.entry_durable,
                t.durable_len,
                t.saved.as_ref().map(|(o, _)| *o),
            );
            let (renamed_from, replaced) = (t.renamed_from.clone(), t.replaced.clone());
            plan.push((
                path,
                image,
                entry_durable,
                durable_len,
                saved_off,
                renamed_from,
                replaced,
            ));
        }
        for (path, image, entry_durable, durable_len, saved_off, renamed_from, replaced) in plan {
            // The entry's fate first: a non-durable name is lost with probability 1/2; a lost
            // rename moves the file back to its old durable name (and restores a file it
            // replaced); a lost creation removes the file.
            let mut path = path;
            if !entry_durable && st.rng.one_in(2) {
                if let Some(image) = replaced {
                    let back = renamed_from.clone();
                    match back {
                        Some(from) => fs::rename(&path, &from)?,
                        None => fs::remove_file(&path)?,
                    }
                    fs::write(&path, &image)?;
                    match renamed_from {
                        Some(from) => path = from,
                        None => continue,
                    }
                } else if let Some(from) = renamed_from {
                    fs::rename(&path, &from)?;
                    path = from;
                } else {
                    fs::remove_file(&path)?;
                    continue;
                }
            }
            let cur = fs::metadata(&path)?.len();
            let f = OpenOptions::new().write(true).open(&path)?;
            match saved_off {
                None => {
                    let keep = st.rng.between(durable_len, cur.max(durable_len));
                    if keep < cur {
                        st.counts.torn_files += 1;
                    }
                    f.set_len(keep)?;
                    if keep > durable_len && st.rng.one_in(8) {
                        // Size reached the disk, data did not.
                        f.write_all_at(&vec![0u8; (keep - durable_len) as usize], durable_len)?;
                    }
                }
                Some(off) => {
                    if st.rng.one_in(2) {
                        f.set_len(0)?;
                        f.write_all_at(&image, 0)?;
                    } else {
                        f.set_len(st.rng.between(off, cur.max(off)))?;
                    }
                    st.counts.torn_files += 1;
                }
            }
        }
        let ghosts = std::mem::take(&mut st.ghosts);
        for (path, image) in ghosts {
            if !path.exists() && st.rng.one_in(2) {
                fs::write(&path, &image)?;
            }
        }
        st.files.clear();
        Ok(())
    }
}

struct SimFile {
    st: Arc<Mutex<SimState>>,
    path: PathBuf,
    file: File,
}

impl WalFile for SimFile {
    fn write_at(&mut self, buf: &[u8], off: u64) -> io::Result<usize> {
        let mut st = self.st.lock();
        let crash_now = st.tick()?;
        if !crash_now && st.faults && st.rng.one_in(16) {
            st.counts.eintr += 1;
            return Err(io::Error::from_raw_os_error(libc::EINTR));
        }
        let mut n = buf.len();
        if crash_now {
            n = st.rng.between(0, n as u64) as usize;
        } else if st.faults && n > 1 && st.rng.one_in(8) {
            n = st.rng.between(1, n as u64 - 1) as usize;
            st.counts.short_writes += 1;
        }
        st.before_modify(&self.path, off)?;
        self.file.write_all_at(&buf[..n], off)?;
        st.counts.writes += 1;
        if crash_now {
            return Err(crashed_err());
        }
        Ok(n)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        let mut st = self.st.lock();
        if st.tick()? {
            return Err(crashed_err());
        }
        if st.faults && st.rng.one_in(16) {
            st.counts.eintr += 1;
            return Err(io::Error::from_raw_os_error(libc::EINTR));
        }
        let len = self.file.metadata()?.len();
        let t = st.track(&self.path)?;
        t.durable_len = len;
        t.saved = None;
        st.counts.syncs += 1;
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let mut st = self.st.lock();
        if st.tick()? {
            return Err(crashed_err());
        }
        st.before_modify(&self.path, len)?;
        self.file.set_len(len)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        None
    }
}

impl WalFs for SimFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let mut st = self.st.lock();
        if st.tick()? {
            return Err(crashed_err());
        }
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        st.files.insert(
            path.to_path_buf(),
            Tracked {
                durable_len: 0,
                saved: None,
                entry_durable: false,
                renamed_from: None,
                replaced: None,
            },
        );
        Ok(Box::new(SimFile {
            st: self.st.clone(),
            path: path.to_path_buf(),
            file,
        }))
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let mut st = self.st.lock();
        if st.crashed {
            return Err(crashed_err());
        }
        let file = OpenOptions::new().write(true).open(path)?;
        st.track(path)?;
        Ok(Box::new(SimFile {
            st: self.st.clone(),
            path: path.to_path_buf(),
            file,
        }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        if self.st.lock().crashed {
            return Err(crashed_err());
        }
        fs::read(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        if self.st.lock().crashed {
            return Err(crashed_err());
        }
        fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        if st.tick()? {
            return Err(crashed_err());
        }
        let entry_durable = st.files.get(path).is_none_or(|t| t.entry_durable);
        if entry_durable {
            let image = st.durable_image(path)?;
            st.ghosts.push((path.to_path_buf(), image));
        }
        fs::remove_file(path)?;
        st.files.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        if st.tick()? {
            return Err(crashed_err());
        }
        // The file's data state moves with it; its new name is volatile until the directory is
        // synced: a crash before that keeps either the new name or the old one (see `crash`).
        st.track(from)?;
        let replaced = if to.exists() && st.files.get(to).is_none_or(|t| t.entry_durable) {
            Some(st.durable_image(to)?)
        } else {
            None
        };
        fs::rename(from, to)?;
        st.files.remove(to);
        if let Some(mut t) = st.files.remove(from) {
            if t.entry_durable {
                t.renamed_from = Some(from.to_path_buf());
            }
            t.entry_durable = false;
            if t.replaced.is_none() {
                t.replaced = replaced;
            }
            st.files.insert(to.to_path_buf(), t);
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.st.lock();
        if st.tick()? {
            return Err(crashed_err());
        }
        for (p, t) in st.files.iter_mut() {
            if p.parent() == Some(dir) {
                t.entry_durable = true;
                t.renamed_from = None;
                t.replaced = None;
            }
        }
        st.ghosts.retain(|(p, _)| p.parent() != Some(dir));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(seed: u64) -> SimFs {
        SimFs::quiet(seed)
    }

    #[test]
    fn synced_bytes_survive_and_unsynced_suffix_is_cut_at_random() {
        let mut cut_somewhere = false;
        for seed in 0..32 {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("f");
            let sim = quiet(seed);
            let mut f = sim.create_new(&p).unwrap();
            sim.sync_dir(dir.path()).unwrap();
            f.write_at(b"durable|", 0).unwrap();
            f.sync_data().unwrap();
            f.write_at(b"volatile", 8).unwrap();
            drop(f);
            sim.crash().unwrap();
            let got = fs::read(&p).unwrap();
            assert!(got.len() >= 8 && got.len() <= 16, "{got:?}");
            assert_eq!(&got[..8], b"durable|");
            assert!(
                got[8..] == b"volatile"[..got.len() - 8] || got[8..].iter().all(|&b| b == 0),
                "{got:?}"
            );
            cut_somewhere |= got.len() < 16;
        }
        assert!(cut_somewhere);
    }

    #[test]
    fn unsynced_truncation_may_revert_to_the_durable_image() {
        let mut reverted = false;
        let mut kept_cut = false;
        for seed in 0..32 {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("f");
            fs::write(&p, b"0123456789").unwrap();
            let sim = quiet(seed);
            let mut f = sim.open_write(&p).unwrap();
            f.set_len(4).unwrap();
            f.write_at(b"ab", 4).unwrap();
            drop(f);
            sim.crash().unwrap();
            let got = fs::read(&p).unwrap();
            if got == b"0123456789" {
                reverted = true;
            } else {
                assert!(b"0123ab".starts_with(&got) && got.len() >= 4, "{got:?}");
                kept_cut = true;
            }
        }
        assert!(reverted && kept_cut);
    }

    #[test]
    fn operations_fail_after_the_crash_point() {
        let dir = tempfile::tempdir().unwrap();
        let sim = quiet(1);
        let mut f = sim.create_new(&dir.path().join("f")).unwrap();
        sim.arm(1);
        assert_eq!(f.write_at(b"abc", 0).unwrap(), 3);
        assert!(
            f.sync_data().is_err(),
            "the crash point: the sync does not complete"
        );
        assert!(f.write_at(b"d", 3).is_err());
        assert!(sim.counts().crashed);
    }

    #[test]
    fn rename_without_directory_sync_may_revert_and_synced_rename_is_durable() {
        let mut reverted = false;
        let mut kept = false;
        for seed in 0..32 {
            let dir = tempfile::tempdir().unwrap();
            let (tmp, fin) = (dir.path().join("f.tmp"), dir.path().join("f"));
            let sim = quiet(seed);
            let mut f = sim.create_new(&tmp).unwrap();
            f.write_at(b"image", 0).unwrap();
            f.sync_data().unwrap();
            sim.sync_dir(dir.path()).unwrap();
            sim.rename(&tmp, &fin).unwrap();
            drop(f);
            sim.crash().unwrap();
            if fin.exists() {
                assert_eq!(fs::read(&fin).unwrap(), b"image");
                kept = true;
            } else {
                assert_eq!(fs::read(&tmp).unwrap(), b"image", "seed {seed}: file lost");
                reverted = true;
            }
        }
        assert!(reverted && kept);
        let dir = tempfile::tempdir().unwrap();
        let (tmp, fin) = (dir.path().join("f.tmp"), dir.path().join("f"));
        let sim = quiet(7);
        let mut f = sim.create_new(&tmp).unwrap();
        f.write_at(b"image", 0).unwrap();
        f.sync_data().unwrap();
        sim.rename(&tmp, &fin).unwrap();
        sim.sync_dir(dir.path()).unwrap();
        drop(f);
        sim.crash().unwrap();
        assert_eq!(fs::read(&fin).unwrap(), b"image");
        assert!(!tmp.exists());
    }

    #[test]
    fn file_created_without_directory_sync_may_vanish_and_removed_one_may_return() {
        let mut vanished = false;
        let mut returned = false;
        for seed in 0..32 {
            let dir = tempfile::tempdir().unwrap();
            let old = dir.path().join("old");
            fs::write(&old, b"old").unwrap();
            let sim = quiet(seed);
            let _new = sim.create_new(&dir.path().join("new")).unwrap();
            sim.remove(&old).unwrap();
            sim.crash().unwrap();
            vanished |= !dir.path().join("new").exists();
            if old.exists() {
                assert_eq!(fs::read(&old).unwrap(), b"old");
                returned = true;
            }
        }
        assert!(vanished && returned);
    }
}
