//! A simulated file system with power loss, for the crash tests of [`super::LocalDir`].
//!
//! Every directory entry and every file's contents has a *volatile* state (what the running
//! system sees) and a *durable* state (what survives a power loss). `write`, `mkdir`, `link`,
//! `rename`, `unlink` and `rmdir` change only volatile state; `fsync` of a file makes its
//! contents durable, `fsync` of a directory its entries, `syncfs` everything. A power loss
//! (at a chosen operation number, or [`SimFs::crash_now`]) freezes the durable state, fails
//! every later call, and [`SimFs::after_crash`] boots a fresh file system from it.
//!
//! With *spontaneous writeback* on, the simulated kernel also makes single volatile items
//! durable on its own at random moments, in no particular order: one directory entry (added,
//! removed or replaced), or a file's contents — possibly only a prefix of them — which is what
//! lets a name reach the disk before its file's data, as on real file systems. A failed
//! `syncfs` marks the contents it could not write as lost, the way Linux drops pages whose
//! writeback failed: no later flush makes them durable.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::fs::{Fs, Kind, NewFileError, ObjectFile, Stat};

#[derive(Clone, Debug)]
enum Node {
    Dir {
        live: BTreeMap<OsString, usize>,
        durable: BTreeMap<OsString, usize>,
    },
    File {
        live: Arc<Vec<u8>>,
        durable: Arc<Vec<u8>>,
        /// A failed flush dropped the unwritten contents: they never become durable.
        lost: bool,
    },
}

/// A tiny deterministic generator (SplitMix64) for the simulation's choices.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`0` when `n == 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

struct State {
    /// Node 0 is `/`.
    nodes: Vec<Node>,
    rng: Rng,
    /// Chance per call, in thousandths, that one volatile item becomes durable on its own.
    writeback_per_mille: u64,
    /// Calls made so far.
    calls: u64,
    /// The power fails when this call number is reached.
    crash_at: Option<u64>,
    /// Set by the power loss: the durable state at that instant.
    crashed: Option<Vec<Node>>,
    /// The next this-many `syncfs` calls fail with `EIO`.
    failing_syncfs: u32,
    syncfs_calls: u64,
    /// How long a `syncfs` takes (the caller sleeps outside the lock).
    syncfs_delay: Duration,
    /// While set, a running `syncfs` does not end.
    syncfs_held: bool,
}

/// A handle on one simulated file system (clones share it).
#[derive(Clone)]
pub(crate) struct SimFs {
    state: Arc<Mutex<State>>,
}

fn os_error(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn power_lost() -> io::Error {
    io::Error::other("simulated power loss")
}

/// The names of a path's components (`/a/b` → `["a", "b"]`); only absolute paths.
fn names(path: &Path) -> io::Result<Vec<&OsStr>> {
    let mut out = Vec::new();
    let mut comps = path.components();
    if comps.next() != Some(Component::RootDir) {
        return Err(os_error(libc::EINVAL));
    }
    for c in comps {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return Err(os_error(libc::EINVAL)),
        }
    }
    Ok(out)
}

impl State {
    fn fresh(seed: u64, writeback_per_mille: u64) -> State {
        State {
            nodes: vec![Node::Dir {
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
            }],
            rng: Rng::new(seed),
            writeback_per_mille,
            calls: 0,
            crash_at: None,
            crashed: None,
            failing_syncfs: 0,
            syncfs_calls: 0,
            syncfs_delay: Duration::ZERO,
            syncfs_held: false,
        }
    }

    /// Counts a call; the power fails at the armed call number. Afterwards every call fails.
    /// Otherwise maybe writes one volatile item back on its own.
    fn begin(&mut self) -> io::Result<()> {
        if self.crashed.is_some() {
            return Err(power_lost());
        }
        self.calls += 1;
        if self.crash_at.is_some_and(|at| self.calls >= at) {
            self.crashed = Some(self.nodes.clone());
            return Err(power_lost());
        }
        if self.writeback_per_mille > 0 && self.rng.below(1000) < self.writeback_per_mille {
            self.spontaneous_writeback();
        }
        Ok(())
    }

    fn spontaneous_writeback(&mut self) {
        let dirty: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| match &self.nodes[i] {
                Node::Dir { live, durable } => live != durable,
                Node::File {
                    live,
                    durable,
                    lost,
                } => !lost && live != durable,
            })
            .collect();
        if dirty.is_empty() {
            return;
        }
        let pick = dirty[self.rng.below(dirty.len() as u64) as usize];
        let r1 = self.rng.next();
        match &mut self.nodes[pick] {
            Node::Dir { live, durable } => {
                // One entry: added, replaced or removed.
                let mut changed: Vec<OsString> = live
                    .iter()
                    .filter(|(n, i)| durable.get(*n) != Some(i))
                    .map(|(n, _)| n.clone())
                    .collect();
                changed.extend(durable.keys().filter(|n| !live.contains_key(*n)).cloned());
                if changed.is_empty() {
                    return;
                }
                let name = &changed[(r1 % changed.len() as u64) as usize];
                match live.get(name) {
                    Some(&ino) => {
                        durable.insert(name.clone(), ino);
                    }
                    None => {
                        durable.remove(name);
                    }
                }
            }
            Node::File { live, durable, .. } => {
                // All of it, or a prefix (a partly written-back file).
                let len = live.len();
                let keep = if r1.is_multiple_of(2) {
                    len
                } else {
                    (r1 >> 1) as usize % (len + 1)
                };
                *durable = Arc::new(live[..keep].to_vec());
            }
        }
    }

    fn lookup(&self, path: &Path) -> io::Result<usize> {
        let mut ino = 0;
        for name in names(path)? {
            match &self.nodes[ino] {
                Node::Dir { live, .. } => match live.get(name) {
                    Some(&next) => ino = next,
                    None => return Err(os_error(libc::ENOENT)),
                },
                Node::File { .. } => return Err(os_error(libc::ENOTDIR)),
            }
        }
        Ok(ino)
    }

    /// The directory holding `path` and the last name of `path`.
    fn parent<'p>(&self, path: &'p Path) -> io::Result<(usize, &'p OsStr)> {
        let name = path.file_name().ok_or_else(|| os_error(libc::EINVAL))?;
        let parent = path.parent().ok_or_else(|| os_error(libc::EINVAL))?;
        let ino = self.lookup(parent)?;
        match &self.nodes[ino] {
            Node::Dir { .. } => Ok((ino, name)),
            Node::File { .. } => Err(os_error(libc::ENOTDIR)),
        }
    }

    fn entries(&mut self, dir: usize) -> io::Result<&mut BTreeMap<OsString, usize>> {
        match &mut self.nodes[dir] {
            Node::Dir { live, .. } => Ok(live),
            Node::File { .. } => Err(os_error(libc::ENOTDIR)),
        }
    }

    fn entry(&self, dir: usize, name: &OsStr) -> Option<usize> {
        match &self.nodes[dir] {
            Node::Dir { live, .. } => live.get(name).copied(),
            Node::File { .. } => None,
        }
    }

    fn stat_of(&self, ino: usize) -> Stat {
        match &self.nodes[ino] {
            Node::Dir { .. } => Stat {
                kind: Kind::Dir,
                len: 0,
            },
            Node::File { live, .. } => Stat {
                kind: Kind::File,
                len: live.len() as u64,
            },
        }
    }

    /// Ends a `syncfs`: fails (the unwritten contents are lost) when armed to, otherwise
    /// makes durable what was volatile when it started (`started`; `None`: now).
    fn finish_syncfs(&mut self, started: Option<Vec<Node>>, fail: bool) -> io::Result<()> {
        if fail {
            for node in &mut self.nodes {
                if let Node::File {
                    live,
                    durable,
                    lost,
                } = node
                {
                    if live != durable {
                        *lost = true;
                    }
                }
            }
            return Err(os_error(libc::EIO));
        }
        let started = started.unwrap_or_else(|| self.nodes.clone());
        for (now, then) in self.nodes.iter_mut().zip(started) {
            match (now, then) {
                (
                    Node::Dir { durable, .. },
                    Node::Dir {
                        live: then_live,
                        durable: then_durable,
                    },
                ) => {
                    // Entry by entry: an entry written back on its own since the flush began
                    // holds a newer state and keeps it.
                    let names: Vec<OsString> = then_live
                        .keys()
                        .chain(then_durable.keys())
                        .cloned()
                        .collect();
                    for name in names {
                        if durable.get(&name) != then_durable.get(&name) {
                            continue;
                        }
                        match then_live.get(&name) {
                            Some(&ino) => durable.insert(name, ino),
                            None => durable.remove(&name),
                        };
                    }
                }
                // Contents never change once written, so the start's are the latest.
                (
                    Node::File { durable, lost, .. },
                    Node::File {
                        live: then_live, ..
                    },
                ) if !*lost => *durable = then_live,
                _ => {}
            }
        }
        Ok(())
    }
}

struct SimFile {
    stat: Stat,
    data: Arc<Vec<u8>>,
}

impl ObjectFile for SimFile {
    fn stat(&self) -> io::Result<Stat> {
        Ok(self.stat)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| os_error(libc::EINVAL))?;
        let end = start.checked_add(buf.len());
        match end.and_then(|end| self.data.get(start..end)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
        }
    }
    fn read_to_end(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        buf.extend_from_slice(&self.data);
        Ok(self.data.len())
    }
}

impl SimFs {
    /// An empty file system (only `/`). `writeback_per_mille`: chance per call, in
    /// thousandths, of one spontaneous writeback (0: never).
    pub(crate) fn new(seed: u64, writeback_per_mille: u64) -> SimFs {
        SimFs {
            state: Arc::new(Mutex::new(State::fresh(seed, writeback_per_mille))),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The power fails `calls` calls from now (`calls >= 1`).
    pub(crate) fn crash_after(&self, calls: u64) {
        let mut st = self.lock();
        st.crash_at = Some(st.calls + calls.max(1));
    }

    /// The power fails now (if it has not already).
    pub(crate) fn crash_now(&self) {
        let mut st = self.lock();
        if st.crashed.is_none() {
            st.crashed = Some(st.nodes.clone());
        }
    }

    /// The next `n` `syncfs` calls fail with `EIO`.
    pub(crate) fn fail_syncfs(&self, n: u32) {
        self.lock().failing_syncfs = n;
    }

    /// Every `syncfs` takes `delay` (slept outside the file system's lock).
    pub(crate) fn set_syncfs_delay(&self, delay: Duration) {
        self.lock().syncfs_delay = delay;
    }

    /// While `held`, a running `syncfs` does not end (a test's way to queue callers behind it).
    pub(crate) fn hold_syncfs(&self, held: bool) {
        self.lock().syncfs_held = held;
    }

    pub(crate) fn syncfs_calls(&self) -> u64 {
        self.lock().syncfs_calls
    }

    /// The file system a reboot after the power loss finds: every volatile state replaced by
    /// the durable one (the power fails now if it has not yet).
    pub(crate) fn after_crash(&self, seed: u64) -> SimFs {
        self.crash_now();
        let st = self.lock();
        let mut nodes = st.crashed.clone().unwrap_or_default();
        for node in &mut nodes {
            match node {
                Node::Dir { live, durable } => *live = durable.clone(),
                Node::File {
                    live,
                    durable,
                    lost,
                } => {
                    *live = durable.clone();
                    *lost = false;
                }
            }
        }
        let mut fresh = State::fresh(seed, st.writeback_per_mille);
        fresh.nodes = nodes;
        SimFs {
            state: Arc::new(Mutex::new(fresh)),
        }
    }
}

impl Fs for SimFs {
    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        let (dir, name) = st.parent(path)?;
        if st.entry(dir, name).is_some() {
            return Err(os_error(libc::EEXIST));
        }
        let ino = st.nodes.len();
        st.nodes.push(Node::Dir {
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
        });
        st.entries(dir)?.insert(name.to_owned(), ino);
        Ok(())
    }

    fn write_new(&self, path: &Path, bytes: &[u8], sync: bool) -> Result<(), NewFileError> {
        let mut st = self.lock();
        st.begin().map_err(NewFileError::Create)?;
        let (dir, name) = st.parent(path).map_err(NewFileError::Create)?;
        if st.entry(dir, name).is_some() {
            return Err(NewFileError::Create(os_error(libc::EEXIST)));
        }
        let data = Arc::new(bytes.to_vec());
        let ino = st.nodes.len();
        st.nodes.push(Node::File {
            durable: if sync {
                data.clone()
            } else {
                Arc::new(Vec::new())
            },
            live: data,
            lost: false,
        });
        st.entries(dir)
            .map_err(NewFileError::Create)?
            .insert(name.to_owned(), ino);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        let (from_dir, from_name) = st.parent(from)?;
        let (to_dir, to_name) = st.parent(to)?;
        let ino = st
            .entry(from_dir, from_name)
            .ok_or_else(|| os_error(libc::ENOENT))?;
        if let Some(old) = st.entry(to_dir, to_name) {
            if st.stat_of(old).kind == Kind::Dir {
                return Err(os_error(libc::EISDIR));
            }
        }
        st.entries(from_dir)?.remove(from_name);
        st.entries(to_dir)?.insert(to_name.to_owned(), ino);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        let ino = st.lookup(from)?;
        if st.stat_of(ino).kind == Kind::Dir {
            return Err(os_error(libc::EPERM));
        }
        let (to_dir, to_name) = st.parent(to)?;
        if st.entry(to_dir, to_name).is_some() {
            return Err(os_error(libc::EEXIST));
        }
        st.entries(to_dir)?.insert(to_name.to_owned(), ino);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        let (dir, name) = st.parent(path)?;
        let ino = st.entry(dir, name).ok_or_else(|| os_error(libc::ENOENT))?;
        if st.stat_of(ino).kind == Kind::Dir {
            return Err(os_error(libc::EISDIR));
        }
        st.entries(dir)?.remove(name);
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        let (dir, name) = st.parent(path)?;
        let ino = st.entry(dir, name).ok_or_else(|| os_error(libc::ENOENT))?;
        match &st.nodes[ino] {
            Node::Dir { live, .. } if !live.is_empty() => return Err(os_error(libc::ENOTEMPTY)),
            Node::Dir { .. } => {}
            Node::File { .. } => return Err(os_error(libc::ENOTDIR)),
        }
        st.entries(dir)?.remove(name);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        let ino = st.lookup(path)?;
        match &mut st.nodes[ino] {
            Node::Dir { live, durable } => {
                *durable = live.clone();
                Ok(())
            }
            Node::File { .. } => Err(os_error(libc::ENOTDIR)),
        }
    }

    fn syncfs(&self) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        st.syncfs_calls += 1;
        // Whether this flush fails is decided when it starts.
        let fail = st.failing_syncfs > 0;
        if fail {
            st.failing_syncfs -= 1;
        }
        if st.syncfs_delay.is_zero() && !st.syncfs_held {
            return st.finish_syncfs(None, fail);
        }
        // A flush writes what was there when it started; writes made while it runs may or may
        // not be included, so the simulation includes none of them.
        let delay = st.syncfs_delay;
        let started = st.nodes.clone();
        drop(st);
        std::thread::sleep(delay);
        let mut st = self.lock();
        while st.syncfs_held {
            drop(st);
            std::thread::sleep(Duration::from_millis(1));
            st = self.lock();
        }
        if st.crashed.is_some() {
            // The power failed while the flush ran: it did not complete.
            return Err(power_lost());
        }
        st.finish_syncfs(Some(started), fail)
    }

    fn open_syncfs(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.lock();
        st.begin()?;
        st.lookup(dir).map(|_| ())
    }

    fn stat(&self, path: &Path, _follow: bool) -> io::Result<Stat> {
        let mut st = self.lock();
        st.begin()?;
        let ino = st.lookup(path)?;
        Ok(st.stat_of(ino))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn ObjectFile>> {
        let mut st = self.lock();
        st.begin()?;
        let ino = st.lookup(path)?;
        let data = match &st.nodes[ino] {
            Node::File { live, .. } => live.clone(),
            Node::Dir { .. } => Arc::new(Vec::new()),
        };
        Ok(Box::new(SimFile {
            stat: st.stat_of(ino),
            data,
        }))
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(OsString, Kind)>> {
        let mut st = self.lock();
        st.begin()?;
        let ino = st.lookup(path)?;
        match &st.nodes[ino] {
            Node::Dir { live, .. } => Ok(live
                .iter()
                .map(|(n, &i)| (n.clone(), st.stat_of(i).kind))
                .collect()),
            Node::File { .. } => Err(os_error(libc::ENOTDIR)),
        }
    }
}
