//! Crash tests through the fault-injecting file layer ([`super::sim::SimFs`]).
//!
//! Each case runs several rounds on one directory. A round opens the database with a fresh
//! `SimFs` (injecting short writes and `EINTR`), arms a crash at a random operation, lets 1–3
//! threads commit random batches until the crash (or a batch limit), drops the database, applies
//! the power loss (every byte not covered by a completed `fdatasync` is cut at a random point,
//! unsynced directory entries may vanish or reappear) and reopens. After every reopen:
//! - every batch acknowledged (`commit` returned `Ok(v)`) is present, at exactly version `v`;
//! - every batch is all-or-nothing (each writes a recognisable group of keys in 2–3 trees);
//! - batches seen present stay present, batches seen absent stay absent;
//! - the versions of the present batches are exactly `1..=db.version()` (dense).
//!
//! `HOLT_SIM_CASES` (default 24) sets the number of cases.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::wal::sim::{Rng, SimCounts, SimFs};
use crate::{Batch, Db, Durability, Options, Tree, WalIo};

const TREES: [(&str, u8, bool); 3] = [("ta", 0x01, true), ("tb", 0x02, false), ("tc", 0x03, false)];

/// The keys and values batch `id` writes: always tree `ta` (versioned, used to find the batch's
/// version), plus one or both of `tb`/`tc`.
fn batch_spec(id: u64) -> Vec<(usize, Vec<u8>, Vec<u8>)> {
    let mut r = Rng::new(id.wrapping_mul(7919));
    let value = |r: &mut Rng, tree: usize| {
        let len = r.between(1, 40) as usize;
        format!("{id}:{tree}:").repeat(len).into_bytes()
    };
    let mut out = vec![(0, format!("b{id:06}/a").into_bytes(), value(&mut r, 0))];
    let which = r.between(1, 3);
    if which & 1 != 0 {
        out.push((1, format!("b{id:06}/b").into_bytes(), value(&mut r, 1)));
    }
    if which & 2 != 0 {
        out.push((2, format!("b{id:06}/c").into_bytes(), value(&mut r, 2)));
    }
    if r.one_in(3) {
        out.push((0, format!("b{id:06}/z").into_bytes(), value(&mut r, 3)));
    }
    out
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// `commit` returned `Ok(version)`.
    Acked(u64),
    /// `commit` failed (crash in flight): may or may not have survived.
    Unknown,
    /// Seen present after a reopen (so it must stay).
    Present,
    /// Seen absent after a reopen (so it must stay absent).
    Absent,
}

fn trees(db: &Db) -> Vec<Tree> {
    TREES
        .iter()
        .map(|(name, _, _)| db.tree(name).expect("trees are created before any crash"))
        .collect()
}

/// Checks the invariants listed in the module docs and updates `statuses`.
fn verify(db: &Db, statuses: &mut BTreeMap<u64, Status>, context: &str) {
    let ts = trees(db);
    let version = db.version();
    let mut versions = Vec::new();
    for (&id, status) in statuses.iter_mut() {
        let spec = batch_spec(id);
        let mut found = 0;
        for (tree, key, value) in &spec {
            match ts[*tree].get(key).unwrap() {
                Some(v) if &v == value => found += 1,
                Some(v) => panic!("{context}: batch {id} key {key:?} has a foreign value {v:?}"),
                None => {}
            }
        }
        assert!(
            found == 0 || found == spec.len(),
            "{context}: batch {id} is half-applied ({found} of {} keys)",
            spec.len()
        );
        let present = found > 0;
        match *status {
            Status::Acked(_) | Status::Present => {
                assert!(present, "{context}: batch {id} ({status:?}) is missing")
            }
            Status::Absent => assert!(!present, "{context}: lost batch {id} reappeared"),
            Status::Unknown => {}
        }
        if !present {
            *status = Status::Absent;
            continue;
        }
        // The smallest version whose view holds the batch's `ta` key is its commit version.
        let (key, value) = (&spec[0].1, &spec[0].2);
        let holds =
            |v: u64| db.view_at(v).unwrap().get(&ts[0], key).unwrap().as_ref() == Some(value);
        let (mut lo, mut hi) = (1, version);
        assert!(
            holds(hi),
            "{context}: batch {id} not visible at the current version"
        );
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if holds(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if let Status::Acked(v) = *status {
            assert_eq!(
                lo, v,
                "{context}: batch {id} acknowledged at version {v}, found at {lo}"
            );
        } else {
            *status = Status::Present;
        }
        versions.push(lo);
    }
    versions.sort_unstable();
    let dense: Vec<u64> = (1..=version).collect();
    assert_eq!(
        versions, dense,
        "{context}: versions of present batches are not 1..={version}"
    );
}

struct CaseReport {
    counts: Vec<SimCounts>,
    acked: usize,
}

fn run_case(seed: u64) -> CaseReport {
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Sync,
        wal_io: WalIo::Auto,
        checkpoint_wal_bytes: if rng.one_in(2) {
            0
        } else {
            rng.between(1500, 6000)
        },
    };
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    let mut next_id = 0u64;
    let mut counts = Vec::new();
    {
        let sim = SimFs::new(rng.next());
        let db = Db::open_with_fs(dir.path(), opts, Arc::new(sim)).unwrap();
        for (name, tag, versioned) in TREES {
            db.create_tree(name, tag, versioned).unwrap();
        }
    }
    for round in 0..4 {
        let sim = SimFs::new(rng.next());
        let context = format!("seed {seed} round {round} ({opts:?})");
        let db = Db::open_with_fs(dir.path(), opts, Arc::new(sim.clone()))
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        verify(&db, &mut statuses, &context);
        if rng.one_in(4) {
            // A checkpoint right after recovery also cuts the torn tail away.
            db.checkpoint().unwrap();
        }
        sim.arm(rng.below(120));
        let threads = rng.between(1, 3);
        let limit = next_id + rng.between(5, 40);
        let claimed = Arc::new(AtomicU64::new(next_id));
        let results = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for _ in 0..threads {
                let (db, claimed, results) = (db.clone(), claimed.clone(), results.clone());
                s.spawn(move || {
                    let ts = trees(&db);
                    loop {
                        let id = claimed.fetch_add(1, Ordering::Relaxed);
                        if id >= limit {
                            break;
                        }
                        let mut b = Batch::new();
                        for (tree, key, value) in batch_spec(id) {
                            b.put(&ts[tree], key, value);
                        }
                        let res = db.commit(b);
                        let failed = res.is_err();
                        results.lock().push((id, res.ok()));
                        if failed {
                            break;
                        }
                    }
                });
            }
        });
        for (id, res) in results.lock().drain(..) {
            statuses.insert(id, res.map_or(Status::Unknown, Status::Acked));
            next_id = next_id.max(id + 1);
        }
        drop(db);
        sim.crash().unwrap();
        counts.push(sim.counts());
    }
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(SimFs::new(0))).unwrap();
    verify(&db, &mut statuses, &format!("seed {seed} final"));
    CaseReport {
        counts,
        acked: statuses
            .values()
            .filter(|s| matches!(s, Status::Acked(_)))
            .count(),
    }
}

#[test]
fn acknowledged_commits_survive_simulated_power_loss_and_batches_stay_atomic() {
    let cases: u64 = std::env::var("HOLT_SIM_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut total = SimCounts::default();
    let mut crashes = 0;
    let mut acked = 0;
    for seed in 0..cases {
        let rep = run_case(seed);
        acked += rep.acked;
        for c in rep.counts {
            crashes += u64::from(c.crashed);
            total.writes += c.writes;
            total.syncs += c.syncs;
            total.short_writes += c.short_writes;
            total.eintr += c.eintr;
            total.torn_files += c.torn_files;
        }
    }
    eprintln!(
        "sim crash test: {cases} cases, {crashes} crashes, {acked} acknowledged batches, {total:?}"
    );
    // The run exercised what it claims to: crashes mid-log, torn suffixes, and the retry paths.
    assert!(crashes > cases, "too few crashes: {crashes}");
    assert!(total.torn_files > 0);
    assert!(total.short_writes > 0 && total.eintr > 0);
    assert!(acked > 0);
}
