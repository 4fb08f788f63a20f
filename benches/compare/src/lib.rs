//! # nokv-compare — holt vs upstream holt 0.9.2, redb, fjall and SQLite
//!
//! A separate Cargo workspace (so its dependencies never enter the main workspace's build) that
//! drives five file-backed engines through one [`Engine`] adapter trait with the same data and the
//! same workloads (issue 3, "Benchmarks"):
//!
//! * [`Kind::Ours`] — this repository's `holt` (path dependency), public API only.
//! * [`Kind::Upstream`] — `holt` 0.9.2 from crates.io (renamed `holt_upstream`), public API only.
//! * [`Kind::Redb`] — redb 4 (copy-on-write B-tree).
//! * [`Kind::Fjall`] — fjall 3 (LSM tree), single-writer transactional database.
//! * [`Kind::Sqlite`] — SQLite (bundled, via rusqlite) in WAL journal mode, `WITHOUT ROWID` tables.
//!
//! Data sets ([`Dataset`]): path-shaped keys
//! `tenant-NN/dataset-NNN/run-NNNN/outputs/file-NNNNN.json` and random 24-byte keys from a seeded
//! splitmix64 generator, both with 64-byte values. Key count: `NOKV_CMP_KEYS` (default 1,000,000).
//!
//! Each engine opens in one of two modes ([`Mode`]): `Fast` (commit acknowledged without
//! fdatasync — our holt `Durability::Buffered`, upstream `Wal { sync: false }`, redb
//! `Durability::None`, fjall without persist, SQLite `synchronous=OFF`) for loading, blind puts and
//! batches, and `Durable` (each commit made durable before it returns — our holt
//! `Durability::Sync`, upstream `Wal { sync: true }`, redb `Durability::Immediate`, fjall
//! `PersistMode::SyncData`, SQLite `synchronous=FULL`) for the durable-commit workload.
//!
//! Engines without delimiter roll-up (redb, fjall, SQLite — and upstream holt when its roll-up is
//! found broken, see [`Engine::set_seek_loop`]) list with the natural seek-past-prefix loop: find
//! the next key at or after the cursor, and if it contains the delimiter after the prefix emit the
//! common prefix and seek to its successor.

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Result type of every adapter call: errors are flattened to their display text so a failing
/// engine is reported, not propagated as a panic.
pub type Res<T> = Result<T, String>;

fn es<E: Display>(e: E) -> String {
    e.to_string()
}

/// Number of keys per data set: `NOKV_CMP_KEYS`, default 1,000,000 (minimum 16,000 so both
/// delimiter listings have their full shape).
pub fn key_count() -> usize {
    std::env::var("NOKV_CMP_KEYS")
        .ok()
        .and_then(|s| s.replace('_', "").parse::<usize>().ok())
        .unwrap_or(1_000_000)
        .max(16_000)
}

/// Seeded splitmix64 pseudo-random generator (deterministic data sets and probe orders).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform index in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Number of tenants in the path data set (a root listing returns this many common prefixes).
pub const TENANTS: usize = 8;
/// Datasets per tenant (listing one tenant returns this many common prefixes).
pub const DATASETS: usize = 1000;
/// Value size in bytes.
pub const VALUE_LEN: usize = 64;

/// Path-shaped key number `i`: consecutive `i` spread over tenants and datasets first, so any
/// prefix of the key space has the full fan-out.
pub fn path_key(i: usize) -> Vec<u8> {
    let t = i % TENANTS;
    let d = (i / TENANTS) % DATASETS;
    let rest = i / (TENANTS * DATASETS);
    let (r, f) = (rest % 5, rest / 5);
    format!("tenant-{t:02}/dataset-{d:03}/run-{r:04}/outputs/file-{f:05}.json").into_bytes()
}

/// A path key that shares its whole directory with existing keys but is absent.
pub fn path_miss_key(i: usize) -> Vec<u8> {
    let mut k = path_key(i);
    let n = k.len();
    k[n - 1] = b'x'; // ".jsox"
    k
}

/// A fresh path key for blind puts and batches (never collides with loaded or miss keys).
pub fn path_new_key(seq: u64) -> Vec<u8> {
    let mut r = Rng::new(seq ^ 0x5EED);
    let (t, d) = (r.below(TENANTS), r.below(DATASETS));
    format!("tenant-{t:02}/dataset-{d:03}/run-9999/outputs/new-{seq:012}.json").into_bytes()
}

/// The 64-byte value stored under key number `i`.
pub fn value_for(i: usize) -> Vec<u8> {
    Rng::new(i as u64 ^ 0xA11C_E5ED).bytes(VALUE_LEN)
}

/// Which key shape a [`Dataset`] has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `tenant-NN/dataset-NNN/run-NNNN/outputs/file-NNNNN.json`
    Path,
    /// 24 random bytes (seeded).
    Random,
}

/// A generated data set: `keys[i]` holds `value_for(i)`; `misses` are absent keys of the same
/// shape.
pub struct Dataset {
    /// Key shape.
    pub shape: Shape,
    /// Loaded keys, in generation order.
    pub keys: Vec<Vec<u8>>,
    /// Absent keys of the same shape (for get-miss).
    pub misses: Vec<Vec<u8>>,
}

impl Dataset {
    /// Generates `n` keys of `shape` (and `min(n, 100_000)` miss keys).
    pub fn generate(shape: Shape, n: usize) -> Dataset {
        let nm = n.min(100_000);
        match shape {
            Shape::Path => Dataset {
                shape,
                keys: (0..n).map(path_key).collect(),
                misses: {
                    let mut r = Rng::new(77);
                    (0..nm).map(|_| path_miss_key(r.below(n))).collect()
                },
            },
            Shape::Random => {
                let mut r = Rng::new(0x24_24_24);
                let mut m = Rng::new(0xBAD_5EED);
                Dataset {
                    shape,
                    keys: (0..n).map(|_| r.bytes(24)).collect(),
                    misses: (0..nm).map(|_| m.bytes(24)).collect(),
                }
            }
        }
    }

    /// A fresh key for blind puts (number `seq`).
    pub fn new_key(&self, seq: u64) -> Vec<u8> {
        match self.shape {
            Shape::Path => path_new_key(seq),
            Shape::Random => Rng::new(seq ^ 0xF00D_F00D_F00D).bytes(24),
        }
    }

    /// Loads every key into `engine`'s main table in a seeded shuffled order, `batch` keys per
    /// transaction.
    pub fn load_into(&self, engine: &dyn Engine, batch: usize) -> Res<()> {
        let mut order: Vec<usize> = (0..self.keys.len()).collect();
        let mut r = Rng::new(4242);
        for i in (1..order.len()).rev() {
            order.swap(i, r.below(i + 1));
        }
        for chunk in order.chunks(batch.max(1)) {
            let items: Vec<(&[u8], Vec<u8>)> = chunk
                .iter()
                .map(|&i| (self.keys[i].as_slice(), value_for(i)))
                .collect();
            let refs: Vec<(&[u8], &[u8])> = items.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            engine.load(Table::Main, &refs)?;
        }
        Ok(())
    }
}

/// Number of keys in each auxiliary table (used by the 3-tree batch).
pub const AUX_KEYS: usize = 1000;

/// Key `i` of an auxiliary table.
pub fn aux_key(i: usize) -> Vec<u8> {
    format!("aux/{i:08}").into_bytes()
}

/// Loads [`AUX_KEYS`] keys into both auxiliary tables.
pub fn load_aux(engine: &dyn Engine) -> Res<()> {
    let items: Vec<(Vec<u8>, Vec<u8>)> =
        (0..AUX_KEYS).map(|i| (aux_key(i), value_for(i))).collect();
    let refs: Vec<(&[u8], &[u8])> = items
        .iter()
        .map(|(k, v)| (k.as_slice(), v.as_slice()))
        .collect();
    engine.load(Table::Aux1, &refs)?;
    engine.load(Table::Aux2, &refs)
}

/// Expected number of common prefixes when listing tenant `t` of a path data set of `n` keys.
pub fn expected_datasets(n: usize, t: usize) -> usize {
    // keys i = t + 8*j (j >= 0, i < n) have dataset j % 1000
    let count = if n > t { (n - t).div_ceil(TENANTS) } else { 0 };
    count.min(DATASETS)
}

/// One table of an engine: the data set lives in `Main`; the 3-tree batch also touches the two
/// auxiliary tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// The data set's table.
    Main,
    /// First auxiliary table.
    Aux1,
    /// Second auxiliary table.
    Aux2,
}

impl Table {
    /// Table / tree / keyspace name used by every engine.
    pub fn name(self) -> &'static str {
        match self {
            Table::Main => "main",
            Table::Aux1 => "aux1",
            Table::Aux2 => "aux2",
        }
    }
}

/// The 3-tree batch with 4 predicates: `main` has `present`, `main` has `equals.0` with value
/// `equals.1`, `aux1` has `aux_present`, `aux2` lacks `aux_absent`; then put `writes[0]` into main,
/// `writes[1]` into aux1 and `writes[2]` into aux2, all with `value`.
#[derive(Clone, Debug)]
pub struct Batch3 {
    /// Must be present in main.
    pub present: Vec<u8>,
    /// Must be present in main with exactly this value.
    pub equals: (Vec<u8>, Vec<u8>),
    /// Must be present in aux1.
    pub aux_present: Vec<u8>,
    /// Must be absent in aux2.
    pub aux_absent: Vec<u8>,
    /// Keys written to main, aux1, aux2.
    pub writes: [Vec<u8>; 3],
    /// Value written under each of `writes`.
    pub value: Vec<u8>,
}

impl Batch3 {
    /// The `seq`-th batch over a path data set of `n` keys (all predicates hold).
    pub fn make(n: usize, seq: u64) -> Batch3 {
        let mut r = Rng::new(seq ^ 0xBA7C);
        let a = r.below(n);
        let b = r.below(n);
        Batch3 {
            present: path_key(a),
            equals: (path_key(b), value_for(b)),
            aux_present: aux_key(r.below(AUX_KEYS)),
            aux_absent: format!("aux/missing-{seq}").into_bytes(),
            writes: [
                path_new_key(seq | (1 << 62)),
                format!("aux/new-{seq:012}").into_bytes(),
                format!("aux/new-{seq:012}").into_bytes(),
            ],
            value: value_for(seq as usize),
        }
    }
}

/// One result of a delimiter listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listed {
    /// A key without the delimiter after the prefix.
    Key(Vec<u8>),
    /// A rolled-up common prefix (ends with the delimiter).
    Prefix(Vec<u8>),
}

/// A handle that performs single-put commits from one thread (durable-commit workload).
pub trait Committer: Send {
    /// Commits one put of `key` → `value` in its own transaction, in the engine's open mode.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Res<()>;
}

/// The adapter every engine implements. All methods are safe to call from several threads.
pub trait Engine: Send + Sync {
    /// Label used in tables (includes the listing method where it matters).
    fn name(&self) -> String;
    /// Writes `items` into `table` in one transaction / batch.
    fn load(&self, table: Table, items: &[(&[u8], &[u8])]) -> Res<()>;
    /// Point get from the main table.
    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>>;
    /// Blind put into the main table, one transaction.
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()>;
    /// Delimiter listing of the main table under `prefix`, at most `limit` entries.
    fn list(&self, prefix: &[u8], delim: u8, limit: usize) -> Res<Vec<Listed>>;
    /// Up to `limit` key/value pairs of the main table with `prefix`, strictly after
    /// `start_after` (a page of a paged prefix scan).
    fn scan(&self, prefix: &[u8], start_after: &[u8], limit: usize)
        -> Res<Vec<(Vec<u8>, Vec<u8>)>>;
    /// The 3-tree batch with 4 predicates; `Ok(false)` if a predicate failed (nothing applied).
    fn batch3(&self, b: &Batch3) -> Res<bool>;
    /// Makes everything so far durable and compact in the engine's own way (holt: checkpoint;
    /// redb: an `Immediate` commit; fjall: persist `SyncAll`; SQLite: WAL checkpoint).
    fn checkpoint(&self) -> Res<()>;
    /// A per-thread committer for the durable-commit workload.
    fn committer(&self) -> Res<Box<dyn Committer>>;
    /// Switches between the native delimiter roll-up (`false`) and the seek-past-prefix loop
    /// (`true`); only meaningful for engines with [`Engine::native_rollup`].
    fn set_seek_loop(&self, _on: bool) {}
    /// True if the engine has its own delimiter roll-up (both holts); for upstream holt
    /// [`Engine::set_seek_loop`] can replace it by the seek loop.
    fn native_rollup(&self) -> bool {
        false
    }
    /// Engine-specific counters worth printing next to the durable-commit numbers (our holt: WAL
    /// I/O path, commits, fdatasyncs).
    fn stats_note(&self) -> Option<String> {
        None
    }
}

/// The five engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// This repository's holt.
    Ours,
    /// holt 0.9.2 from crates.io.
    Upstream,
    /// redb 4.
    Redb,
    /// fjall 3.
    Fjall,
    /// SQLite (bundled).
    Sqlite,
}

impl Kind {
    /// All engines, in table order.
    pub const ALL: [Kind; 5] = [
        Kind::Ours,
        Kind::Upstream,
        Kind::Redb,
        Kind::Fjall,
        Kind::Sqlite,
    ];

    /// Short command-line / table name.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ours => "holt (ours)",
            Kind::Upstream => "holt 0.9.2",
            Kind::Redb => "redb",
            Kind::Fjall => "fjall",
            Kind::Sqlite => "sqlite",
        }
    }

    /// Command-line token.
    pub fn token(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            Kind::Upstream => "upstream",
            Kind::Redb => "redb",
            Kind::Fjall => "fjall",
            Kind::Sqlite => "sqlite",
        }
    }

    /// Parses [`Kind::token`].
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.token() == s)
    }
}

/// Commit acknowledgement mode an engine is opened with (see the crate docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Acknowledge without fdatasync.
    Fast,
    /// Each commit durable (fdatasync or the engine's equivalent) before it returns.
    Durable,
}

/// Opens (creating if needed) engine `kind` in directory `dir`.
pub fn open_engine(kind: Kind, dir: &Path, mode: Mode) -> Res<Box<dyn Engine>> {
    std::fs::create_dir_all(dir).map_err(es)?;
    Ok(match kind {
        Kind::Ours => Box::new(ours::Ours::open(dir, mode)?),
        Kind::Upstream => Box::new(upstream::Upstream::open(dir, mode)?),
        Kind::Redb => Box::new(redb_impl::Redb::open(dir, mode)?),
        Kind::Fjall => Box::new(fjall_impl::Fjall::open(dir, mode)?),
        Kind::Sqlite => Box::new(sqlite::Sqlite::open(dir, mode)?),
    })
}

/// The smallest byte string greater than every string starting with `p` (`None` if `p` is all
/// 0xff).
pub fn successor(p: &[u8]) -> Option<Vec<u8>> {
    let mut s = p.to_vec();
    while let Some(last) = s.pop() {
        if last < 0xff {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// The seek-past-prefix listing loop shared by the engines without roll-up. `seek(from)` returns
/// the first key `>= from` (or `None`).
pub fn seek_loop_list(
    prefix: &[u8],
    delim: u8,
    limit: usize,
    mut seek: impl FnMut(&[u8]) -> Res<Option<Vec<u8>>>,
) -> Res<Vec<Listed>> {
    let mut out = Vec::new();
    let mut cursor = prefix.to_vec();
    while out.len() < limit {
        let Some(k) = seek(&cursor)? else { break };
        if !k.starts_with(prefix) {
            break;
        }
        match k[prefix.len()..].iter().position(|&b| b == delim) {
            Some(pos) => {
                let cp = k[..prefix.len() + pos + 1].to_vec();
                match successor(&cp) {
                    Some(s) => cursor = s,
                    None => {
                        out.push(Listed::Prefix(cp));
                        break;
                    }
                }
                out.push(Listed::Prefix(cp));
            }
            None => {
                cursor = k.clone();
                cursor.push(0);
                out.push(Listed::Key(k));
            }
        }
    }
    Ok(out)
}

/// Resident set size of this process in bytes, from `/proc/self/statm` (second field × page
/// size).
pub fn rss_bytes() -> Res<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").map_err(es)?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .ok_or("statm: no resident field")?
        .parse()
        .map_err(es)?;
    Ok(pages * 4096)
}

/// Total size of the regular files under `dir`, in bytes.
pub fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

// ------------------------------------------------------------------------------------------------
// Our holt
// ------------------------------------------------------------------------------------------------
mod ours {
    use super::*;
    use holt::{Batch, Db, Durability, EntryRef, Expect, Options, RangeSpec, Tree};
    use std::ops::ControlFlow;
    use std::time::Duration;

    pub struct Ours {
        db: Db,
        trees: [Tree; 3],
    }

    fn tree(db: &Db, name: &str, tag: u8) -> Res<Tree> {
        match db.tree(name) {
            Some(t) => Ok(t),
            None => db.create_tree(name, tag, false).map_err(es),
        }
    }

    impl Ours {
        pub fn open(dir: &Path, mode: Mode) -> Res<Ours> {
            let opts = Options {
                durability: match mode {
                    Mode::Fast => Durability::Buffered,
                    Mode::Durable => Durability::Sync,
                },
                // `NOKV_CMP_COMMIT_DELAY_US` overrides holt's group-commit delay (A/B runs).
                commit_delay: std::env::var("NOKV_CMP_COMMIT_DELAY_US")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .map_or(holt::DEFAULT_COMMIT_DELAY, Duration::from_micros),
                ..Options::default()
            };
            let db = Db::open(dir, opts).map_err(es)?;
            let trees = [
                tree(&db, "main", 1)?,
                tree(&db, "aux1", 2)?,
                tree(&db, "aux2", 3)?,
            ];
            Ok(Ours { db, trees })
        }
        fn t(&self, t: Table) -> &Tree {
            match t {
                Table::Main => &self.trees[0],
                Table::Aux1 => &self.trees[1],
                Table::Aux2 => &self.trees[2],
            }
        }
    }

    struct OursCommitter(Db, Tree);
    impl Committer for OursCommitter {
        fn put(&mut self, key: &[u8], value: &[u8]) -> Res<()> {
            let mut b = Batch::new();
            b.put(&self.1, key, value);
            self.0.commit(b).map(|_| ()).map_err(es)
        }
    }

    impl Engine for Ours {
        fn name(&self) -> String {
            Kind::Ours.label().into()
        }
        fn load(&self, table: Table, items: &[(&[u8], &[u8])]) -> Res<()> {
            let mut b = Batch::new();
            for (k, v) in items {
                b.put(self.t(table), *k, *v);
            }
            self.db.commit(b).map(|_| ()).map_err(es)
        }
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            self.trees[0].get(key).map_err(es)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
            let mut b = Batch::new();
            b.put(&self.trees[0], key, value);
            self.db.commit(b).map(|_| ()).map_err(es)
        }
        // Listings and scans use `Tree::for_each_in_range`, the allocation-free callback form of
        // `Tree::range` (same entries; the copies into `Listed` / `Vec` are the adapter's, as
        // for every engine).
        fn list(&self, prefix: &[u8], delim: u8, limit: usize) -> Res<Vec<Listed>> {
            let spec = RangeSpec::with_prefix(prefix).delimiter(delim).limit(limit);
            let mut out = Vec::new();
            self.trees[0]
                .for_each_in_range(&spec, |e| {
                    out.push(match e {
                        EntryRef::Key { key, .. } => Listed::Key(key.to_vec()),
                        EntryRef::CommonPrefix(p) => Listed::Prefix(p.to_vec()),
                    });
                    ControlFlow::Continue(())
                })
                .map_err(es)?;
            Ok(out)
        }
        fn scan(
            &self,
            prefix: &[u8],
            start_after: &[u8],
            limit: usize,
        ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
            let spec = RangeSpec::with_prefix(prefix)
                .start_after(start_after)
                .limit(limit);
            let mut out = Vec::with_capacity(limit);
            self.trees[0]
                .for_each_in_range(&spec, |e| {
                    if let EntryRef::Key { key, value } = e {
                        out.push((key.to_vec(), value.to_vec()));
                    }
                    ControlFlow::Continue(())
                })
                .map_err(es)?;
            Ok(out)
        }
        fn batch3(&self, x: &Batch3) -> Res<bool> {
            let [m, a1, a2] = &self.trees;
            let mut b = Batch::new();
            b.expect(m, x.present.as_slice(), Expect::Present);
            b.expect(m, x.equals.0.as_slice(), Expect::Equals(x.equals.1.clone()));
            b.expect(a1, x.aux_present.as_slice(), Expect::Present);
            b.expect(a2, x.aux_absent.as_slice(), Expect::Absent);
            b.put(m, x.writes[0].as_slice(), x.value.as_slice());
            b.put(a1, x.writes[1].as_slice(), x.value.as_slice());
            b.put(a2, x.writes[2].as_slice(), x.value.as_slice());
            match self.db.commit(b) {
                Ok(_) => Ok(true),
                Err(holt::Error::PredicateFailed { .. }) => Ok(false),
                Err(e) => Err(es(e)),
            }
        }
        fn checkpoint(&self) -> Res<()> {
            self.db.checkpoint().map_err(es)
        }
        fn committer(&self) -> Res<Box<dyn Committer>> {
            Ok(Box::new(OursCommitter(
                self.db.clone(),
                self.trees[0].clone(),
            )))
        }
        fn native_rollup(&self) -> bool {
            true
        }
        fn stats_note(&self) -> Option<String> {
            let s = self.db.stats();
            Some(format!(
                "WAL I/O path {:?}; {} commits over {} fdatasyncs since open ({:.2} commits per sync)",
                s.wal_io,
                s.commits,
                s.wal_syncs,
                s.commits as f64 / s.wal_syncs.max(1) as f64
            ))
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Upstream holt 0.9.2 (crates.io), called through its public API only
// ------------------------------------------------------------------------------------------------
mod upstream {
    use super::*;
    use holt_upstream::{Durability, RangeEntry, Tree, TreeConfig, DB};

    pub struct Upstream {
        db: DB,
        trees: [Tree; 3],
        seek_loop: AtomicBool,
    }

    impl Upstream {
        pub fn open(dir: &Path, mode: Mode) -> Res<Upstream> {
            let mut cfg = TreeConfig::new(dir);
            cfg.durability = Durability::Wal {
                sync: mode == Mode::Durable,
            };
            let db = DB::open(cfg).map_err(es)?;
            let trees = [
                db.open_or_create_tree("main").map_err(es)?,
                db.open_or_create_tree("aux1").map_err(es)?,
                db.open_or_create_tree("aux2").map_err(es)?,
            ];
            Ok(Upstream {
                db,
                trees,
                seek_loop: AtomicBool::new(false),
            })
        }
    }

    struct UpCommitter(Tree);
    impl Committer for UpCommitter {
        fn put(&mut self, key: &[u8], value: &[u8]) -> Res<()> {
            self.0.put(key, value).map_err(es)
        }
    }

    impl Engine for Upstream {
        fn name(&self) -> String {
            if self.seek_loop.load(Ordering::Relaxed) {
                format!("{} (seek loop)", Kind::Upstream.label())
            } else {
                Kind::Upstream.label().into()
            }
        }
        fn load(&self, table: Table, items: &[(&[u8], &[u8])]) -> Res<()> {
            let ok = self
                .db
                .atomic(|b| {
                    for (k, v) in items {
                        b.put(table.name(), k, v);
                    }
                })
                .map_err(es)?;
            if ok {
                Ok(())
            } else {
                Err("atomic load batch reported a failed guard".into())
            }
        }
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            self.trees[0].get(key).map_err(es)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
            self.trees[0].put(key, value).map_err(es)
        }
        fn list(&self, prefix: &[u8], delim: u8, limit: usize) -> Res<Vec<Listed>> {
            let t = &self.trees[0];
            if self.seek_loop.load(Ordering::Relaxed) {
                return seek_loop_list(prefix, delim, limit, |from| {
                    // The builder's bound is exclusive: turn "first key >= from" into
                    // "first key > after". `from` is either the prefix itself (start there), a
                    // key followed by 0x00 (start after that key) or a common prefix's successor
                    // (start after the common prefix followed by 0xff, which no ASCII key of the
                    // data sets reaches).
                    let mut b = t.range().prefix(prefix);
                    if from != prefix {
                        let mut after = from.to_vec();
                        match after.pop() {
                            Some(0) => {}
                            Some(last) => {
                                after.push(last - 1);
                                after.push(0xff);
                            }
                            None => {}
                        }
                        b = b.start_after(&after);
                    }
                    match b.into_iter().next() {
                        None => Ok(None),
                        Some(Err(e)) => Err(es(e)),
                        Some(Ok(RangeEntry::Key { key, .. })) => Ok(Some(key)),
                        Some(Ok(RangeEntry::CommonPrefix(p))) => Ok(Some(p)),
                        Some(Ok(_)) => Err("unknown range entry".into()),
                    }
                });
            }
            let mut out = Vec::new();
            for e in t
                .range()
                .prefix(prefix)
                .delimiter(delim)
                .into_iter()
                .take(limit)
            {
                out.push(match e.map_err(es)? {
                    RangeEntry::Key { key, .. } => Listed::Key(key),
                    RangeEntry::CommonPrefix(p) => Listed::Prefix(p),
                    _ => return Err("unknown range entry".into()),
                });
            }
            Ok(out)
        }
        fn scan(
            &self,
            prefix: &[u8],
            start_after: &[u8],
            limit: usize,
        ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
            let mut out = Vec::with_capacity(limit);
            for e in self.trees[0]
                .range()
                .prefix(prefix)
                .start_after(start_after)
                .into_iter()
                .take(limit)
            {
                if let RangeEntry::Key { key, value, .. } = e.map_err(es)? {
                    out.push((key, value));
                }
            }
            Ok(out)
        }
        fn batch3(&self, x: &Batch3) -> Res<bool> {
            // Upstream guards are record versions: read the records (optimistic), check the
            // values, then guard on the versions in one atomic multi-tree batch.
            let [m, a1, _] = &self.trees;
            let Some(p) = m.get_record(&x.present).map_err(es)? else {
                return Ok(false);
            };
            let Some(e) = m.get_record(&x.equals.0).map_err(es)? else {
                return Ok(false);
            };
            if e.value != x.equals.1 {
                return Ok(false);
            }
            let Some(a) = a1.get_record(&x.aux_present).map_err(es)? else {
                return Ok(false);
            };
            self.db
                .atomic(|b| {
                    b.assert_version("main", &x.present, p.version);
                    b.assert_version("main", &x.equals.0, e.version);
                    b.assert_version("aux1", &x.aux_present, a.version);
                    b.assert_absent("aux2", &x.aux_absent);
                    b.put("main", &x.writes[0], &x.value);
                    b.put("aux1", &x.writes[1], &x.value);
                    b.put("aux2", &x.writes[2], &x.value);
                })
                .map_err(es)
        }
        fn checkpoint(&self) -> Res<()> {
            self.db.checkpoint().map_err(es)
        }
        fn committer(&self) -> Res<Box<dyn Committer>> {
            Ok(Box::new(UpCommitter(self.trees[0].clone())))
        }
        fn set_seek_loop(&self, on: bool) {
            self.seek_loop.store(on, Ordering::Relaxed);
        }
        fn native_rollup(&self) -> bool {
            true
        }
    }
}

// ------------------------------------------------------------------------------------------------
// redb
// ------------------------------------------------------------------------------------------------
mod redb_impl {
    use super::*;
    use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

    type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;
    const MAIN: Def = TableDefinition::new("main");
    const AUX1: Def = TableDefinition::new("aux1");
    const AUX2: Def = TableDefinition::new("aux2");

    fn def(t: Table) -> Def {
        match t {
            Table::Main => MAIN,
            Table::Aux1 => AUX1,
            Table::Aux2 => AUX2,
        }
    }

    pub struct Redb {
        db: std::sync::Arc<Database>,
        durability: Durability,
    }

    impl Redb {
        pub fn open(dir: &Path, mode: Mode) -> Res<Redb> {
            let db = Database::create(dir.join("redb.db")).map_err(es)?;
            let w = db.begin_write().map_err(es)?;
            for t in [MAIN, AUX1, AUX2] {
                w.open_table(t).map_err(es)?;
            }
            w.commit().map_err(es)?;
            Ok(Redb {
                db: std::sync::Arc::new(db),
                durability: match mode {
                    Mode::Fast => Durability::None,
                    Mode::Durable => Durability::Immediate,
                },
            })
        }

        fn write(&self, f: impl FnOnce(&redb::WriteTransaction) -> Res<bool>) -> Res<bool> {
            write_with(&self.db, self.durability, f)
        }
    }

    fn write_with(
        db: &Database,
        d: Durability,
        f: impl FnOnce(&redb::WriteTransaction) -> Res<bool>,
    ) -> Res<bool> {
        let mut w = db.begin_write().map_err(es)?;
        w.set_durability(d).map_err(es)?;
        if f(&w)? {
            w.commit().map_err(es)?;
            Ok(true)
        } else {
            w.abort().map_err(es)?;
            Ok(false)
        }
    }

    struct RedbCommitter(std::sync::Arc<Database>, Durability);
    impl Committer for RedbCommitter {
        fn put(&mut self, key: &[u8], value: &[u8]) -> Res<()> {
            write_with(&self.0, self.1, |w| {
                w.open_table(MAIN)
                    .map_err(es)?
                    .insert(key, value)
                    .map_err(es)?;
                Ok(true)
            })
            .map(|_| ())
        }
    }

    impl Engine for Redb {
        fn name(&self) -> String {
            Kind::Redb.label().into()
        }
        fn load(&self, table: Table, items: &[(&[u8], &[u8])]) -> Res<()> {
            self.write(|w| {
                let mut t = w.open_table(def(table)).map_err(es)?;
                for (k, v) in items {
                    t.insert(*k, *v).map_err(es)?;
                }
                Ok(true)
            })
            .map(|_| ())
        }
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            let r = self.db.begin_read().map_err(es)?;
            let t = r.open_table(MAIN).map_err(es)?;
            Ok(t.get(key).map_err(es)?.map(|g| g.value().to_vec()))
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
            self.write(|w| {
                w.open_table(MAIN)
                    .map_err(es)?
                    .insert(key, value)
                    .map_err(es)?;
                Ok(true)
            })
            .map(|_| ())
        }
        fn list(&self, prefix: &[u8], delim: u8, limit: usize) -> Res<Vec<Listed>> {
            let r = self.db.begin_read().map_err(es)?;
            let t = r.open_table(MAIN).map_err(es)?;
            seek_loop_list(prefix, delim, limit, |from| {
                match t.range::<&[u8]>(from..).map_err(es)?.next() {
                    None => Ok(None),
                    Some(Err(e)) => Err(es(e)),
                    Some(Ok((k, _))) => Ok(Some(k.value().to_vec())),
                }
            })
        }
        fn scan(
            &self,
            prefix: &[u8],
            start_after: &[u8],
            limit: usize,
        ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
            let r = self.db.begin_read().map_err(es)?;
            let t = r.open_table(MAIN).map_err(es)?;
            let mut out = Vec::with_capacity(limit);
            let lo = std::ops::Bound::Excluded(start_after);
            for e in t
                .range::<&[u8]>((lo, std::ops::Bound::Unbounded))
                .map_err(es)?
            {
                let (k, v) = e.map_err(es)?;
                let k = k.value();
                if !k.starts_with(prefix) || out.len() >= limit {
                    break;
                }
                out.push((k.to_vec(), v.value().to_vec()));
            }
            Ok(out)
        }
        fn batch3(&self, x: &Batch3) -> Res<bool> {
            self.write(|w| {
                let mut m = w.open_table(MAIN).map_err(es)?;
                let mut a1 = w.open_table(AUX1).map_err(es)?;
                let mut a2 = w.open_table(AUX2).map_err(es)?;
                if m.get(x.present.as_slice()).map_err(es)?.is_none() {
                    return Ok(false);
                }
                match m.get(x.equals.0.as_slice()).map_err(es)? {
                    Some(v) if v.value() == x.equals.1.as_slice() => {}
                    _ => return Ok(false),
                }
                if a1.get(x.aux_present.as_slice()).map_err(es)?.is_none() {
                    return Ok(false);
                }
                if a2.get(x.aux_absent.as_slice()).map_err(es)?.is_some() {
                    return Ok(false);
                }
                m.insert(x.writes[0].as_slice(), x.value.as_slice())
                    .map_err(es)?;
                a1.insert(x.writes[1].as_slice(), x.value.as_slice())
                    .map_err(es)?;
                a2.insert(x.writes[2].as_slice(), x.value.as_slice())
                    .map_err(es)?;
                Ok(true)
            })
        }
        fn checkpoint(&self) -> Res<()> {
            write_with(&self.db, Durability::Immediate, |_| Ok(true)).map(|_| ())
        }
        fn committer(&self) -> Res<Box<dyn Committer>> {
            Ok(Box::new(RedbCommitter(self.db.clone(), self.durability)))
        }
    }
}

// ------------------------------------------------------------------------------------------------
// fjall
// ------------------------------------------------------------------------------------------------
mod fjall_impl {
    use super::*;
    use fjall::{
        KeyspaceCreateOptions, PersistMode, Readable, SingleWriterTxDatabase,
        SingleWriterTxKeyspace,
    };

    pub struct Fjall {
        db: SingleWriterTxDatabase,
        ks: [SingleWriterTxKeyspace; 3],
        persist: Option<PersistMode>,
    }

    impl Fjall {
        pub fn open(dir: &Path, mode: Mode) -> Res<Fjall> {
            let db = SingleWriterTxDatabase::builder(dir.join("fjall"))
                .open()
                .map_err(es)?;
            let ks = [
                db.keyspace("main", KeyspaceCreateOptions::default)
                    .map_err(es)?,
                db.keyspace("aux1", KeyspaceCreateOptions::default)
                    .map_err(es)?,
                db.keyspace("aux2", KeyspaceCreateOptions::default)
                    .map_err(es)?,
            ];
            Ok(Fjall {
                db,
                ks,
                persist: match mode {
                    Mode::Fast => None,
                    Mode::Durable => Some(PersistMode::SyncData),
                },
            })
        }
        fn k(&self, t: Table) -> &SingleWriterTxKeyspace {
            match t {
                Table::Main => &self.ks[0],
                Table::Aux1 => &self.ks[1],
                Table::Aux2 => &self.ks[2],
            }
        }
    }

    struct FjallCommitter(
        SingleWriterTxDatabase,
        SingleWriterTxKeyspace,
        Option<PersistMode>,
    );
    impl Committer for FjallCommitter {
        fn put(&mut self, key: &[u8], value: &[u8]) -> Res<()> {
            let mut tx = self.0.write_tx().durability(self.2);
            tx.insert(&self.1, key, value);
            tx.commit().map_err(es)
        }
    }

    impl Engine for Fjall {
        fn name(&self) -> String {
            Kind::Fjall.label().into()
        }
        fn load(&self, table: Table, items: &[(&[u8], &[u8])]) -> Res<()> {
            let mut tx = self.db.write_tx().durability(self.persist);
            for (k, v) in items {
                tx.insert(self.k(table), *k, *v);
            }
            tx.commit().map_err(es)
        }
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            Ok(self.ks[0].inner().get(key).map_err(es)?.map(|v| v.to_vec()))
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
            let mut tx = self.db.write_tx().durability(self.persist);
            tx.insert(&self.ks[0], key, value);
            tx.commit().map_err(es)
        }
        fn list(&self, prefix: &[u8], delim: u8, limit: usize) -> Res<Vec<Listed>> {
            let ks = self.ks[0].inner();
            seek_loop_list(prefix, delim, limit, |from| match ks.range(from..).next() {
                None => Ok(None),
                Some(g) => Ok(Some(g.key().map_err(es)?.to_vec())),
            })
        }
        fn scan(
            &self,
            prefix: &[u8],
            start_after: &[u8],
            limit: usize,
        ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
            let ks = self.ks[0].inner();
            let lo = std::ops::Bound::Excluded(start_after.to_vec());
            let hi = match successor(prefix) {
                Some(s) => std::ops::Bound::Excluded(s),
                None => std::ops::Bound::Unbounded,
            };
            let mut out = Vec::with_capacity(limit);
            for g in ks.range::<Vec<u8>, _>((lo, hi)).take(limit) {
                let (k, v) = g.into_inner().map_err(es)?;
                out.push((k.to_vec(), v.to_vec()));
            }
            Ok(out)
        }
        fn batch3(&self, x: &Batch3) -> Res<bool> {
            let [m, a1, a2] = &self.ks;
            let mut tx = self.db.write_tx().durability(self.persist);
            let ok = tx.get(m, &x.present).map_err(es)?.is_some()
                && tx
                    .get(m, &x.equals.0)
                    .map_err(es)?
                    .is_some_and(|v| v.as_ref() == x.equals.1.as_slice())
                && tx.get(a1, &x.aux_present).map_err(es)?.is_some()
                && tx.get(a2, &x.aux_absent).map_err(es)?.is_none();
            if !ok {
                tx.rollback();
                return Ok(false);
            }
            tx.insert(m, x.writes[0].as_slice(), x.value.as_slice());
            tx.insert(a1, x.writes[1].as_slice(), x.value.as_slice());
            tx.insert(a2, x.writes[2].as_slice(), x.value.as_slice());
            tx.commit().map_err(es)?;
            Ok(true)
        }
        fn checkpoint(&self) -> Res<()> {
            self.db.persist(PersistMode::SyncAll).map_err(es)
        }
        fn committer(&self) -> Res<Box<dyn Committer>> {
            Ok(Box::new(FjallCommitter(
                self.db.clone(),
                self.ks[0].clone(),
                self.persist,
            )))
        }
    }
}

// ------------------------------------------------------------------------------------------------
// SQLite (bundled)
// ------------------------------------------------------------------------------------------------
mod sqlite {
    use super::*;
    use rusqlite::{params, Connection, OptionalExtension};

    pub struct Sqlite {
        path: PathBuf,
        mode: Mode,
        conn: Mutex<Connection>,
    }

    fn connect(path: &Path, mode: Mode) -> Res<Connection> {
        let c = Connection::open(path).map_err(es)?;
        c.busy_timeout(std::time::Duration::from_secs(60))
            .map_err(es)?;
        c.pragma_update(None, "journal_mode", "WAL").map_err(es)?;
        let sync = match mode {
            Mode::Fast => "OFF",
            Mode::Durable => "FULL",
        };
        c.pragma_update(None, "synchronous", sync).map_err(es)?;
        Ok(c)
    }

    fn lock(m: &Mutex<Connection>) -> Res<std::sync::MutexGuard<'_, Connection>> {
        m.lock()
            .map_err(|_| "sqlite connection mutex poisoned".to_string())
    }

    impl Sqlite {
        pub fn open(dir: &Path, mode: Mode) -> Res<Sqlite> {
            let path = dir.join("sqlite.db");
            let c = connect(&path, mode)?;
            for t in ["main_t", "aux1", "aux2"] {
                c.execute_batch(&format!(
                    "CREATE TABLE IF NOT EXISTS {t} (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID;"
                ))
                .map_err(es)?;
            }
            Ok(Sqlite {
                path,
                mode,
                conn: Mutex::new(c),
            })
        }
    }

    fn tname(t: Table) -> &'static str {
        match t {
            Table::Main => "main_t",
            Table::Aux1 => "aux1",
            Table::Aux2 => "aux2",
        }
    }

    fn put_one(c: &Connection, key: &[u8], value: &[u8]) -> Res<()> {
        c.prepare_cached("INSERT OR REPLACE INTO main_t (k, v) VALUES (?1, ?2)")
            .map_err(es)?
            .execute(params![key, value])
            .map_err(es)
            .map(|_| ())
    }

    struct SqliteCommitter(Connection);
    impl Committer for SqliteCommitter {
        fn put(&mut self, key: &[u8], value: &[u8]) -> Res<()> {
            put_one(&self.0, key, value)
        }
    }

    fn get_in(c: &Connection, table: &str, key: &[u8]) -> Res<Option<Vec<u8>>> {
        c.prepare_cached(&format!("SELECT v FROM {table} WHERE k = ?1"))
            .map_err(es)?
            .query_row(params![key], |r| r.get::<_, Vec<u8>>(0))
            .optional()
            .map_err(es)
    }

    impl Engine for Sqlite {
        fn name(&self) -> String {
            Kind::Sqlite.label().into()
        }
        fn load(&self, table: Table, items: &[(&[u8], &[u8])]) -> Res<()> {
            let mut c = lock(&self.conn)?;
            let tx = c.transaction().map_err(es)?;
            {
                let mut st = tx
                    .prepare_cached(&format!(
                        "INSERT OR REPLACE INTO {} (k, v) VALUES (?1, ?2)",
                        tname(table)
                    ))
                    .map_err(es)?;
                for (k, v) in items {
                    st.execute(params![k, v]).map_err(es)?;
                }
            }
            tx.commit().map_err(es)
        }
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            get_in(&*lock(&self.conn)?, "main_t", key)
        }
        fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
            put_one(&*lock(&self.conn)?, key, value)
        }
        fn list(&self, prefix: &[u8], delim: u8, limit: usize) -> Res<Vec<Listed>> {
            let c = lock(&self.conn)?;
            let mut st = c
                .prepare_cached("SELECT k FROM main_t WHERE k >= ?1 ORDER BY k LIMIT 1")
                .map_err(es)?;
            // One read transaction around the loop, like the other engines' snapshots.
            c.execute_batch("BEGIN").map_err(es)?;
            let r = seek_loop_list(prefix, delim, limit, |from| {
                st.query_row(params![from], |r| r.get::<_, Vec<u8>>(0))
                    .optional()
                    .map_err(es)
            });
            c.execute_batch("COMMIT").map_err(es)?;
            r
        }
        fn scan(
            &self,
            prefix: &[u8],
            start_after: &[u8],
            limit: usize,
        ) -> Res<Vec<(Vec<u8>, Vec<u8>)>> {
            let c = lock(&self.conn)?;
            let hi = successor(prefix).unwrap_or_else(|| vec![0xff; 70000]);
            let mut st = c
                .prepare_cached(
                    "SELECT k, v FROM main_t WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT ?3",
                )
                .map_err(es)?;
            let rows = st
                .query_map(params![start_after, hi, limit as i64], |r| {
                    Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .map_err(es)?;
            rows.map(|r| r.map_err(es)).collect()
        }
        fn batch3(&self, x: &Batch3) -> Res<bool> {
            let mut c = lock(&self.conn)?;
            let tx = c
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(es)?;
            let ok = get_in(&tx, "main_t", &x.present)?.is_some()
                && get_in(&tx, "main_t", &x.equals.0)?.as_deref() == Some(x.equals.1.as_slice())
                && get_in(&tx, "aux1", &x.aux_present)?.is_some()
                && get_in(&tx, "aux2", &x.aux_absent)?.is_none();
            if !ok {
                tx.rollback().map_err(es)?;
                return Ok(false);
            }
            for (t, k) in ["main_t", "aux1", "aux2"].iter().zip(&x.writes) {
                tx.prepare_cached(&format!(
                    "INSERT OR REPLACE INTO {t} (k, v) VALUES (?1, ?2)"
                ))
                .map_err(es)?
                .execute(params![k, x.value])
                .map_err(es)?;
            }
            tx.commit().map_err(es)?;
            Ok(true)
        }
        fn checkpoint(&self) -> Res<()> {
            lock(&self.conn)?
                .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
                .map_err(es)
        }
        fn committer(&self) -> Res<Box<dyn Committer>> {
            Ok(Box::new(SqliteCommitter(connect(&self.path, self.mode)?)))
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Workloads shared by the criterion bench and the runner
// ------------------------------------------------------------------------------------------------

/// The measured single-operation workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Point get of a loaded key.
    GetHit,
    /// Point get of an absent key of the same shape.
    GetMiss,
    /// Blind put of a fresh key (fast mode: no fdatasync).
    Put,
    /// Delimiter listing of the root: 8 common prefixes (path data only).
    List8,
    /// Delimiter listing of one tenant: 1,000 common prefixes (path data only).
    List1000,
    /// One 100-key page of a prefix scan (path data only).
    Scan100,
    /// 3-tree batch with 4 predicates (path data only; fast mode).
    Batch3,
}

impl Workload {
    /// Workloads run on both data sets.
    pub const BOTH: [Workload; 3] = [Workload::GetHit, Workload::GetMiss, Workload::Put];
    /// Workloads run on the path data set only.
    pub const PATH_ONLY: [Workload; 4] = [
        Workload::List8,
        Workload::List1000,
        Workload::Scan100,
        Workload::Batch3,
    ];

    /// Table / criterion id.
    pub fn label(self) -> &'static str {
        match self {
            Workload::GetHit => "get_hit",
            Workload::GetMiss => "get_miss",
            Workload::Put => "put",
            Workload::List8 => "list_8_prefixes",
            Workload::List1000 => "list_1000_prefixes",
            Workload::Scan100 => "scan_100",
            Workload::Batch3 => "batch_3tree_4pred",
        }
    }
}

/// Tenant listed by [`Workload::List1000`].
pub const LIST_TENANT: usize = 3;
/// Tenant scanned by [`Workload::Scan100`].
pub const SCAN_TENANT: usize = 5;

/// Pre-generated operands so key formatting stays out of the timed loops.
pub struct Operands {
    /// Shuffled indices into `Dataset::keys`.
    pub hits: Vec<usize>,
    /// Fresh keys for blind puts.
    pub put_keys: Vec<Vec<u8>>,
    /// Scan start keys (path data).
    pub scan_starts: Vec<Vec<u8>>,
    /// 3-tree batches (path data).
    pub batches: Vec<Batch3>,
    /// The value written by puts.
    pub value: Vec<u8>,
}

impl Operands {
    /// Operands for `ds`; `salt` makes the fresh keys of different runs distinct.
    pub fn new(ds: &Dataset, salt: u64) -> Operands {
        let n = ds.keys.len();
        let mut r = Rng::new(99 ^ salt);
        let per_tenant = n / TENANTS;
        Operands {
            hits: (0..100_000).map(|_| r.below(n)).collect(),
            put_keys: (0..100_000u64)
                .map(|i| ds.new_key((salt << 32) | i))
                .collect(),
            scan_starts: (0..10_000)
                .map(|_| path_key(SCAN_TENANT + TENANTS * r.below(per_tenant)))
                .collect(),
            batches: (0..20_000u64)
                .map(|i| Batch3::make(n, (salt << 32) | i))
                .collect(),
            value: value_for(12345),
        }
    }
}

/// Runs operation number `seq` of `w` against `e`; returns the number of results (for
/// `black_box`).
pub fn run_op(e: &dyn Engine, ds: &Dataset, ops: &Operands, w: Workload, seq: usize) -> Res<usize> {
    match w {
        Workload::GetHit => {
            let k = &ds.keys[ops.hits[seq % ops.hits.len()]];
            Ok(e.get(k)?.map_or(0, |v| v.len()))
        }
        Workload::GetMiss => {
            let k = &ds.misses[seq % ds.misses.len()];
            Ok(e.get(k)?.map_or(0, |v| v.len()))
        }
        Workload::Put => {
            e.put(&ops.put_keys[seq % ops.put_keys.len()], &ops.value)?;
            Ok(1)
        }
        Workload::List8 => Ok(e.list(b"", b'/', 10_000)?.len()),
        Workload::List1000 => {
            let p = format!("tenant-{LIST_TENANT:02}/");
            Ok(e.list(p.as_bytes(), b'/', 10_000)?.len())
        }
        Workload::Scan100 => {
            let p = format!("tenant-{SCAN_TENANT:02}/");
            Ok(e.scan(
                p.as_bytes(),
                &ops.scan_starts[seq % ops.scan_starts.len()],
                100,
            )?
            .len())
        }
        Workload::Batch3 => Ok(e.batch3(&ops.batches[seq % ops.batches.len()])? as usize),
    }
}

/// Checks that `e` answers `w` correctly on `ds` (before it is timed). Returns a description of
/// the first wrong answer.
pub fn validate(e: &dyn Engine, ds: &Dataset, w: Workload) -> Res<()> {
    let n = ds.keys.len();
    match w {
        Workload::GetHit => {
            for i in [0, n / 3, n - 1] {
                let got = e.get(&ds.keys[i])?;
                if got.as_deref() != Some(value_for(i).as_slice()) {
                    return Err(format!(
                        "get of loaded key #{i} returned {:?}",
                        got.map(|v| v.len())
                    ));
                }
            }
            Ok(())
        }
        Workload::GetMiss => match e.get(&ds.misses[0])? {
            None => Ok(()),
            Some(_) => Err("get of an absent key returned a value".into()),
        },
        Workload::Put => Ok(()),
        Workload::List8 | Workload::List1000 => {
            let (prefix, want): (Vec<u8>, Vec<Listed>) = if w == Workload::List8 {
                (
                    Vec::new(),
                    (0..TENANTS.min(n))
                        .map(|t| Listed::Prefix(format!("tenant-{t:02}/").into_bytes()))
                        .collect(),
                )
            } else {
                let p = format!("tenant-{LIST_TENANT:02}/");
                (
                    p.clone().into_bytes(),
                    (0..expected_datasets(n, LIST_TENANT))
                        .map(|d| Listed::Prefix(format!("{p}dataset-{d:03}/").into_bytes()))
                        .collect(),
                )
            };
            let got = e.list(&prefix, b'/', 10_000)?;
            if got == want {
                Ok(())
            } else {
                Err(format!(
                    "delimiter listing of {:?} returned {} entries, expected {} (first: {:?})",
                    String::from_utf8_lossy(&prefix),
                    got.len(),
                    want.len(),
                    got.first().map(|l| match l {
                        Listed::Key(k) | Listed::Prefix(k) =>
                            String::from_utf8_lossy(k).into_owned(),
                    })
                ))
            }
        }
        Workload::Scan100 => {
            let j = (n / TENANTS) / 2;
            let start = path_key(SCAN_TENANT + TENANTS * j);
            let p = format!("tenant-{SCAN_TENANT:02}/").into_bytes();
            let got = e.scan(&p, &start, 100)?;
            let mut want: Vec<&Vec<u8>> = ds
                .keys
                .iter()
                .filter(|k| k.starts_with(&p) && k.as_slice() > start.as_slice())
                .collect();
            want.sort();
            want.truncate(100);
            // Keys written by earlier put/batch workloads may interleave with the loaded ones,
            // so check the page's shape and that no loaded key inside it was skipped.
            let sorted = got.windows(2).all(|p| p[0].0 < p[1].0);
            let in_range = got
                .iter()
                .all(|(k, _)| k.starts_with(&p) && k.as_slice() > start.as_slice());
            let full = got.len() == want.len();
            let last = got.last().map(|(k, _)| k.clone()).unwrap_or_default();
            let returned: std::collections::HashSet<&[u8]> =
                got.iter().map(|(k, _)| k.as_slice()).collect();
            let none_skipped = want
                .iter()
                .filter(|k| k.as_slice() <= last.as_slice())
                .all(|k| returned.contains(k.as_slice()));
            if sorted && in_range && full && none_skipped {
                Ok(())
            } else {
                Err(format!(
                    "prefix scan page wrong: {} keys (expected {}), sorted {sorted}, in range {in_range}, no loaded key skipped {none_skipped}",
                    got.len(),
                    want.len()
                ))
            }
        }
        Workload::Batch3 => {
            let b = Batch3::make(n, u64::MAX >> 2);
            if !e.batch3(&b)? {
                return Err("batch with satisfied predicates was rejected".into());
            }
            let mut bad = b.clone();
            bad.equals.1 = b"wrong".to_vec();
            bad.writes[0] = b"tenant-00/never-written".to_vec();
            if e.batch3(&bad)? {
                return Err("batch with a failing Equals predicate committed".into());
            }
            if e.get(&bad.writes[0])?.is_some() {
                return Err("rejected batch left a write behind".into());
            }
            Ok(())
        }
    }
}

fn summary(v: &[String]) -> String {
    match v {
        [] => "none".into(),
        [one] => one.clone(),
        [first, .., last] => format!("{first} … {last}"),
    }
}

/// Correctness probe for upstream holt's delimiter roll-up: loads `n` path keys (sorted or
/// shuffled order, 10,000-key atomic batches or single puts) into a fresh file-backed upstream
/// DB in `dir`, then lists the root, `tenant-03/` and `tenant-03/dataset-005/` with delimiter `/` through both the record iterator
/// (`Tree::range`) and the key-only iterator (`Tree::scan_keys`), twice each (the key-only path
/// has a prefix-list cache). Returns `(variant, common prefixes returned)`.
pub fn upstream_list_variants(
    dir: &Path,
    n: usize,
    sorted: bool,
    single_puts: bool,
) -> Res<Vec<(String, usize, String)>> {
    use holt_upstream::{KeyRangeEntry, RangeEntry, TreeConfig, DB};
    let db = DB::open(TreeConfig::new(dir)).map_err(es)?;
    let t = db.open_or_create_tree("main").map_err(es)?;
    let mut order: Vec<usize> = (0..n).collect();
    if sorted {
        order.sort_by_key(|&i| path_key(i));
    } else {
        let mut r = Rng::new(4242);
        for i in (1..order.len()).rev() {
            order.swap(i, r.below(i + 1));
        }
    }
    if single_puts {
        for &i in &order {
            t.put(&path_key(i), &value_for(i)).map_err(es)?;
        }
    } else {
        for chunk in order.chunks(10_000) {
            db.atomic(|b| {
                for &i in chunk {
                    b.put("main", &path_key(i), &value_for(i));
                }
            })
            .map_err(es)?;
        }
    }
    let mut out = Vec::new();
    let prefixes = [
        String::new(),
        format!("tenant-{LIST_TENANT:02}/"),
        format!("tenant-{LIST_TENANT:02}/dataset-005/"),
    ];
    for p in &prefixes {
        for pass in 1..=2 {
            let mut got = Vec::new();
            for e in t.range().prefix(p.as_bytes()).delimiter(b'/') {
                if let RangeEntry::CommonPrefix(cp) = e.map_err(es)? {
                    got.push(String::from_utf8_lossy(&cp).into_owned());
                }
            }
            out.push((
                format!("{p:?}: range() pass {pass}"),
                got.len(),
                summary(&got),
            ));
            let mut got = Vec::new();
            for e in t.scan_keys(p.as_bytes()).delimiter(b'/') {
                if let KeyRangeEntry::CommonPrefix(cp) = e.map_err(es)? {
                    got.push(String::from_utf8_lossy(&cp).into_owned());
                }
            }
            out.push((
                format!("{p:?}: scan_keys() pass {pass}"),
                got.len(),
                summary(&got),
            ));
        }
    }
    Ok(out)
}

/// Validates `e` for `w` right before `w` is timed (after earlier workloads' writes). For an
/// engine with a native roll-up, listings try the native roll-up first and fall back to the
/// seek-past-prefix loop if it answers wrongly. `Ok(Some(reason))` = fell back (reason = the
/// native roll-up's wrong answer); `Err` = still wrong, do not time.
pub fn prepare(e: &dyn Engine, ds: &Dataset, w: Workload) -> Res<Option<String>> {
    let listing = matches!(w, Workload::List8 | Workload::List1000);
    if listing && e.native_rollup() {
        e.set_seek_loop(false);
        match validate(e, ds, w) {
            Ok(()) => return Ok(None),
            Err(native) => {
                e.set_seek_loop(true);
                validate(e, ds, w)?;
                return Ok(Some(native));
            }
        }
    }
    validate(e, ds, w).map(|()| None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    #[test]
    fn successor_bumps_last_non_ff_byte() {
        assert_eq!(successor(b"a/"), Some(b"a0".to_vec()));
        assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff\xff"), None);
    }

    #[test]
    fn seek_loop_matches_a_model_listing() {
        let keys: BTreeSet<Vec<u8>> = ["a", "a/b", "a/c/d", "a/c/e", "a/d", "b/x", "b/y/z", "c"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let seek = |from: &[u8]| -> Res<Option<Vec<u8>>> {
            Ok(keys.range(from.to_vec()..).next().cloned())
        };
        let got = seek_loop_list(b"", b'/', 100, seek).unwrap();
        let want = vec![
            Listed::Key(b"a".to_vec()),
            Listed::Prefix(b"a/".to_vec()),
            Listed::Prefix(b"b/".to_vec()),
            Listed::Key(b"c".to_vec()),
        ];
        assert_eq!(got, want);
        let got = seek_loop_list(b"a/", b'/', 100, seek).unwrap();
        let want = vec![
            Listed::Key(b"a/b".to_vec()),
            Listed::Prefix(b"a/c/".to_vec()),
            Listed::Key(b"a/d".to_vec()),
        ];
        assert_eq!(got, want);
        assert_eq!(seek_loop_list(b"a/", b'/', 2, seek).unwrap().len(), 2);
    }

    #[test]
    fn path_data_set_has_unique_keys_and_the_promised_fan_out() {
        let n = 16_000;
        let ds = Dataset::generate(Shape::Path, n);
        let unique: BTreeSet<&Vec<u8>> = ds.keys.iter().collect();
        assert_eq!(unique.len(), n);
        assert!(ds.misses.iter().all(|m| !unique.contains(m)));
        let tenants: BTreeSet<&[u8]> = ds.keys.iter().map(|k| &k[..10]).collect();
        assert_eq!(tenants.len(), TENANTS);
        let p = format!("tenant-{LIST_TENANT:02}/");
        let datasets: BTreeSet<&[u8]> = ds
            .keys
            .iter()
            .filter(|k| k.starts_with(p.as_bytes()))
            .map(|k| &k[..22])
            .collect();
        assert_eq!(datasets.len(), expected_datasets(n, LIST_TENANT));
        assert_eq!(datasets.len(), DATASETS);
        assert!(ds.keys.iter().all(|k| !k.contains(&0xff)));
    }

    #[test]
    fn random_data_set_is_seeded_and_24_bytes() {
        let a = Dataset::generate(Shape::Random, 16_000);
        let b = Dataset::generate(Shape::Random, 16_000);
        assert_eq!(a.keys, b.keys);
        assert!(a.keys.iter().all(|k| k.len() == 24));
        let unique: BTreeMap<&Vec<u8>, ()> = a.keys.iter().map(|k| (k, ())).collect();
        assert_eq!(unique.len(), a.keys.len());
    }

    /// Every adapter answers every workload correctly on a small file-backed data set, including
    /// after the write workloads ran (the check the runner and the bench do before timing).
    #[test]
    fn every_engine_answers_every_workload_correctly() {
        let n = 16_000;
        let path = Dataset::generate(Shape::Path, n);
        let ops = Operands::new(&path, 9);
        for kind in Kind::ALL {
            let dir = tempfile::tempdir().unwrap();
            let e = open_engine(kind, dir.path(), Mode::Fast).unwrap();
            path.load_into(e.as_ref(), 5_000).unwrap();
            load_aux(e.as_ref()).unwrap();
            for w in Workload::BOTH.iter().chain(&Workload::PATH_ONLY) {
                for seq in 0..20 {
                    run_op(e.as_ref(), &path, &ops, *w, seq).unwrap();
                }
                assert_eq!(prepare(e.as_ref(), &path, *w), Ok(None), "{kind:?} {w:?}");
            }
            // The durable committer of each engine works and its writes are visible.
            let mut c = e.committer().unwrap();
            c.put(b"tenant-00/committer", b"v").unwrap();
            assert_eq!(
                e.get(b"tenant-00/committer").unwrap(),
                Some(b"v".to_vec()),
                "{kind:?}"
            );
            e.checkpoint().unwrap();
        }
    }

    #[test]
    fn engines_reopen_with_their_data() {
        let ds = Dataset::generate(Shape::Random, 16_000);
        for kind in Kind::ALL {
            let dir = tempfile::tempdir().unwrap();
            {
                let e = open_engine(kind, dir.path(), Mode::Durable).unwrap();
                ds.load_into(e.as_ref(), 8_000).unwrap();
                e.checkpoint().unwrap();
            }
            let e = open_engine(kind, dir.path(), Mode::Fast).unwrap();
            assert_eq!(
                validate(e.as_ref(), &ds, Workload::GetHit),
                Ok(()),
                "{kind:?}"
            );
            assert_eq!(
                validate(e.as_ref(), &ds, Workload::GetMiss),
                Ok(()),
                "{kind:?}"
            );
        }
    }
}
