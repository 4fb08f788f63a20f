//! Crash tests through the fault-injecting file layer ([`crate::vfs::sim::SimFs`]).
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

use crate::state::State;
use crate::vfs::sim::{Rng, SimCounts, SimFs};
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
        ..Default::default()
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

/// Commits batch `id` (see [`batch_spec`]); `Ok(version)` when acknowledged.
fn commit_batch(db: &Db, id: u64) -> crate::Result<u64> {
    let ts = trees(db);
    let mut b = Batch::new();
    for (tree, key, value) in batch_spec(id) {
        b.put(&ts[tree], key, value);
    }
    db.commit(b)
}

/// One run of [`power_loss_at_every_step_of_a_checkpoint_keeps_every_acknowledged_commit`]:
/// builds a store with an older checkpoint and several WAL segments, crashes at the `k`-th
/// mutating file operation from the start of `Db::checkpoint` (checkpoint file creation,
/// writes, fdatasync, rename, directory fsyncs, unlinks of the old checkpoint and of covered
/// WAL segments, then the commits that follow), reopens and verifies. Returns whether the crash
/// point was reached (false: `k` lies beyond the whole sequence).
fn crash_checkpoint_at(k: u64, seed: u64) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Sync,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: 0,
        ..Default::default()
    };
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    let sim = SimFs::quiet(seed);
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(sim.clone())).unwrap();
    for (name, tag, versioned) in TREES {
        db.create_tree(name, tag, versioned).unwrap();
    }
    for id in 0..40 {
        statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
        if id == 12 {
            // An older checkpoint for the new one to replace, and a second WAL segment.
            db.checkpoint().unwrap();
        }
    }
    let before = sim.counts().ops;
    sim.arm(k);
    let ckpt = db.checkpoint();
    let reached_in_checkpoint = sim.counts().crashed;
    assert_eq!(
        ckpt.is_err(),
        reached_in_checkpoint,
        "k {k}: checkpoint result {ckpt:?} without a crash"
    );
    for id in 40..44 {
        let res = commit_batch(&db, id);
        statuses.insert(id, res.map_or(Status::Unknown, Status::Acked));
    }
    let crashed = sim.counts().crashed;
    assert!(crashed || sim.counts().ops > before);
    drop(db);
    sim.crash().unwrap();
    let context = format!("checkpoint crash at op {k} (seed {seed})");
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(SimFs::quiet(seed + 1)))
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    verify(&db, &mut statuses, &context);
    // The reopened store keeps working: a further checkpoint and reopen lose nothing.
    db.checkpoint().unwrap();
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    verify(
        &db,
        &mut statuses,
        &format!("{context}, after a clean checkpoint"),
    );
    crashed
}

#[test]
fn power_loss_at_every_step_of_a_checkpoint_keeps_every_acknowledged_commit() {
    let mut steps = 0;
    for k in 0..200 {
        let mut reached = false;
        for seed in 0..4 {
            reached |= crash_checkpoint_at(k, seed * 1000 + k);
        }
        if !reached {
            break;
        }
        steps += 1;
    }
    eprintln!("checkpoint crash points covered: {steps}");
    // create, header write, entry writes, fdatasync, rename, fsync, unlinks, fsyncs, commits.
    assert!(
        (10..200).contains(&steps),
        "unexpected number of crash points: {steps}"
    );
}

#[test]
fn commits_are_acknowledged_while_a_background_checkpoint_is_being_written() {
    use crossbeam_channel::bounded;
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Sync,
        wal_io: WalIo::Auto,
        checkpoint_wal_bytes: 8 << 10,
        ..Default::default()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    for (name, tag, versioned) in TREES {
        db.create_tree(name, tag, versioned).unwrap();
    }
    let (entered_tx, entered_rx) = bounded::<()>(1);
    let (release_tx, release_rx) = bounded::<()>(1);
    let (done_tx, done_rx) = bounded::<()>(4);
    let held = Arc::new(AtomicU64::new(0));
    let held2 = held.clone();
    db.set_checkpoint_hook(Some(Arc::new(move |step| match step {
        crate::db::CkptStep::Writing => {
            // Hold the first checkpoint writer until the test releases it.
            if held2.fetch_add(1, Ordering::SeqCst) == 0 {
                entered_tx.send(()).unwrap();
                release_rx.recv().unwrap();
            }
        }
        crate::db::CkptStep::Done => {
            let _ = done_tx.try_send(());
        }
    })));
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    let mut id = 0;
    // Commit until the WAL crosses the threshold; the committer only wakes the checkpointer.
    while db.stats().wal_bytes < opts.checkpoint_wal_bytes {
        statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
        id += 1;
    }
    // The background checkpointer is now inside the checkpoint file, held by the hook.
    entered_rx.recv().unwrap();
    let before = db.stats();
    assert_eq!(before.checkpoints, 0);
    for _ in 0..100 {
        let v = commit_batch(&db, id).unwrap();
        statuses.insert(id, Status::Acked(v));
        // Acknowledged and visible while the checkpoint is still being written.
        assert_eq!(db.version(), v);
        id += 1;
    }
    assert_eq!(
        db.stats().checkpoints,
        0,
        "the checkpoint was held throughout"
    );
    assert_eq!(db.stats().commits, before.commits + 100);
    release_tx.send(()).unwrap();
    done_rx.recv().unwrap();
    // The commits made meanwhile may have requested another checkpoint; let it finish too.
    db.wait_checkpointer_idle();
    let st = db.stats();
    assert!(st.checkpoints >= 1);
    assert_eq!(st.checkpoint_failures, 0);
    // The checkpoint covers only what was durable at its LSN: the commits made while it was
    // held are in the WAL segment opened at the rotation; the covered segments are gone.
    let ckpt_lsn: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix("image-")?
                .strip_suffix(".holt")?
                .split_once('-')?
                .1
                .parse()
                .ok()
        })
        .max()
        .expect("an installed image");
    for e in std::fs::read_dir(dir.path().join("wal")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let start: u64 = name.trim_end_matches(".wal").parse().unwrap();
        assert!(
            start > ckpt_lsn,
            "segment {name} is covered by the checkpoint at {ckpt_lsn}"
        );
    }
    db.set_checkpoint_hook(None);
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    verify(&db, &mut statuses, "reopen after a background checkpoint");
    assert_eq!(db.version(), id);
}

#[test]
fn dropping_the_database_stops_the_background_checkpointer() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Buffered,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: 4 << 10,
        ..Default::default()
    };
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    let mut next = 0;
    for round in 0..5 {
        // Each drop joins the checkpointer (possibly aborting a checkpoint in flight), which
        // releases the directory lock: the immediate reopen must not see `Locked`.
        let db = Db::open(dir.path(), opts).unwrap();
        if round == 0 {
            for (name, tag, versioned) in TREES {
                db.create_tree(name, tag, versioned).unwrap();
            }
        }
        verify(&db, &mut statuses, &format!("round {round}"));
        for _ in 0..60 {
            statuses.insert(next, Status::Acked(commit_batch(&db, next).unwrap()));
            next += 1;
        }
        assert_eq!(db.stats().checkpoint_failures, 0);
    }
    let db = Db::open(dir.path(), opts).unwrap();
    verify(&db, &mut statuses, "final");
}

#[test]
fn a_due_checkpoint_completes_at_close_so_short_lived_processes_keep_the_wal_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let threshold = 64 << 10;
    let opts = Options {
        durability: Durability::Buffered,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: threshold,
        ..Default::default()
    };
    let wal_bytes = |dir: &std::path::Path| -> u64 {
        std::fs::read_dir(dir.join("wal"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    };
    let bulk_key = |chunk: u32, i: u32| format!("bulk/{chunk}/{i:06}");
    let mut acked: Vec<(String, Vec<u8>)> = Vec::new();
    // Like one CLI call per round: open, make a checkpoint due, close at once.
    for round in 0..4u32 {
        let db = Db::open(dir.path(), opts).unwrap();
        let t = if round == 0 {
            let t = db.create_tree("t", 0x09, false).unwrap();
            // ~12 MB of state, so writing a checkpoint takes far longer than closing does.
            for chunk in 0..6u32 {
                let mut b = Batch::new();
                for i in 0..20_000u32 {
                    b.put(&t, bulk_key(chunk, i), vec![b'b'; 96]);
                }
                db.commit(b).unwrap();
            }
            t
        } else {
            db.tree("t").unwrap()
        };
        // Wait out any checkpoint the open itself started, then make exactly one due: a single
        // commit larger than the threshold, and close right after it.
        db.wait_checkpointer_idle();
        let key = format!("round/{round}");
        let value = vec![round as u8; threshold as usize + 1024];
        let mut b = Batch::new();
        b.put(&t, key.clone(), value.clone());
        db.commit(b).unwrap();
        acked.push((key, value));
        drop(db);
        let left = wal_bytes(dir.path());
        assert!(
            left < threshold,
            "round {round}: {left} B of WAL left after close (threshold {threshold} B)"
        );
    }
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.tree("t").unwrap();
    for (key, value) in &acked {
        assert_eq!(
            t.get(key.as_bytes()).unwrap().as_ref(),
            Some(value),
            "{key}"
        );
    }
    for chunk in 0..6u32 {
        for i in (0..20_000u32).step_by(997) {
            assert!(t.get(bulk_key(chunk, i).as_bytes()).unwrap().is_some());
        }
    }
    assert_eq!(db.stats().checkpoint_failures, 0);
}

/// One run of [`power_loss_at_every_step_of_flushes_and_merges_keeps_every_acknowledged_commit`]:
/// builds a base image and two small images above it (explicit flushes), then crashes at the
/// `k`-th mutating file operation counted from the next commits: the commits, a flush (WAL
/// rotation, image file creation, block writes, fdatasync, rename, directory fsync, unlinks of
/// covered WAL segments and leftovers) that makes three small images, hence a merge of them
/// (merged image written, installed, its inputs unlinked), then more commits. Reopens and
/// verifies. Returns `(crash point reached, acknowledged batches)`.
fn crash_flush_at(k: u64, seed: u64) -> (bool, usize) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Sync,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: 0,
        ..Default::default()
    };
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    let sim = SimFs::quiet(seed);
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(sim.clone())).unwrap();
    for (name, tag, versioned) in TREES {
        db.create_tree(name, tag, versioned).unwrap();
    }
    let mut id = 0;
    let mut commit_n = |db: &Db, n: u64, statuses: &mut BTreeMap<u64, Status>| {
        for _ in 0..n {
            let res = commit_batch(db, id);
            statuses.insert(id, res.map_or(Status::Unknown, Status::Acked));
            id += 1;
        }
    };
    // A large base, then two small images: the next flush makes the third small one, which
    // the merge policy merges with the other two.
    commit_n(&db, 400, &mut statuses);
    db.flush().unwrap();
    for _ in 0..2 {
        commit_n(&db, 3, &mut statuses);
        db.flush().unwrap();
    }
    assert_eq!(db.stats().images, 3, "base + two small images");
    let merges_before = db.stats().merges;
    sim.arm(k);
    commit_n(&db, 3, &mut statuses);
    let flushed = db.flush();
    let crashed_before_flush_end = sim.counts().crashed;
    assert_eq!(
        flushed.is_err(),
        crashed_before_flush_end,
        "k {k}: {flushed:?}"
    );
    if flushed.is_ok() {
        assert_eq!(
            db.stats().merges,
            merges_before + 1,
            "the flush triggered a merge"
        );
        assert_eq!(db.stats().images, 2);
    }
    commit_n(&db, 3, &mut statuses);
    let crashed = sim.counts().crashed;
    drop(db);
    sim.crash().unwrap();
    let context = format!("flush/merge crash at op {k} (seed {seed})");
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(SimFs::quiet(seed + 1)))
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    verify(&db, &mut statuses, &context);
    db.flush().unwrap();
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    verify(
        &db,
        &mut statuses,
        &format!("{context}, after a clean flush"),
    );
    let acked = statuses
        .values()
        .filter(|s| matches!(s, Status::Acked(_) | Status::Present))
        .count();
    (crashed, acked)
}

#[test]
fn power_loss_at_every_step_of_flushes_and_merges_keeps_every_acknowledged_commit() {
    let mut steps = 0;
    let mut crashes = 0;
    let mut acked = 0;
    for k in 0..400 {
        let mut reached = false;
        for seed in 0..2 {
            let (hit, a) = crash_flush_at(k, seed * 7919 + k);
            reached |= hit;
            crashes += u64::from(hit);
            acked += a;
        }
        if !reached {
            break;
        }
        steps += 1;
    }
    eprintln!(
        "flush + merge crash points covered: {steps} ({crashes} crashes, {acked} acknowledged \
         batches checked after them)"
    );
    // commits, rotation, image create/writes/fdatasync/rename/fsync, unlinks, merge image,
    // unlinks of its inputs, then commits.
    assert!(
        (20..400).contains(&steps),
        "unexpected number of crash points: {steps}"
    );
}

/// A store written before images and the store format marker existed (a `checkpoint-<lsn>.ckpt`
/// of format 1 plus headerless WAL segments) opens read-only with every commit, and a writer's
/// open upgrades it: one base image, headed segments only, the marker, no old file.
#[test]
fn a_format_1_store_with_a_legacy_checkpoint_opens_and_a_writer_upgrades_it() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Sync,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: 0,
        ..Default::default()
    };
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    {
        let db = Db::open(dir.path(), opts).unwrap();
        for (name, tag, versioned) in TREES {
            db.create_tree(name, tag, versioned).unwrap();
        }
        for id in 0..30 {
            statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
        }
    }
    let (lsn, state) = {
        let db = Db::open(dir.path(), opts).unwrap();
        let st = db.current_state();
        (st.lsn, State::clone(&st))
    };
    {
        let db = Db::open(dir.path(), opts).unwrap();
        for id in 30..40 {
            statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
        }
        assert_eq!(db.stats().images, 0);
    }
    // Rewrite the store in the old layout: a legacy checkpoint of the first 30 batches, the one
    // WAL segment (all 40) without its header, no marker.
    let fs = crate::vfs::os();
    let tmp = crate::legacy_checkpoint::write(&*fs, dir.path(), &state, &mut |_| Ok(())).unwrap();
    crate::legacy_checkpoint::install(&*fs, dir.path(), lsn, &tmp).unwrap();
    let segments = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir.path().join("wal"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    };
    let wal = segments();
    assert_eq!(wal.len(), 1, "{wal:?}");
    let headed = std::fs::read(&wal[0]).unwrap();
    assert_eq!(&headed[..8], crate::wal::record::SEGMENT_MAGIC);
    std::fs::write(&wal[0], &headed[crate::wal::record::SEGMENT_HEADER_LEN..]).unwrap();
    std::fs::remove_file(dir.path().join(crate::store_format::FILE)).unwrap();

    // Read-only: format 1 rules, nothing written.
    {
        let db = Db::open_read_only(dir.path(), opts).unwrap();
        verify(&db, &mut statuses, "format 1, read-only");
        assert!(!dir.path().join(crate::store_format::FILE).exists());
    }
    // A writer upgrades at open.
    {
        let db = Db::open(dir.path(), opts).unwrap();
        verify(&db, &mut statuses, "format 1 upgraded at open");
        assert_eq!(db.stats().images, 1);
        for id in 40..45 {
            statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
        }
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".ckpt")), "{names:?}");
    assert!(
        names.iter().any(|n| n == crate::store_format::FILE),
        "{names:?}"
    );
    for seg in segments() {
        let data = std::fs::read(&seg).unwrap();
        assert_eq!(&data[..8], crate::wal::record::SEGMENT_MAGIC, "{seg:?}");
    }
    let db = Db::open(dir.path(), opts).unwrap();
    verify(&db, &mut statuses, "after the upgrade");
}

/// Rewrites the store in `dir` in format 1: every segment without its header, no marker.
fn make_format_1(dir: &std::path::Path) {
    for e in std::fs::read_dir(dir.join("wal")).unwrap() {
        let path = e.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(&data[..8], crate::wal::record::SEGMENT_MAGIC, "{path:?}");
        std::fs::write(&path, &data[crate::wal::record::SEGMENT_HEADER_LEN..]).unwrap();
    }
    std::fs::remove_file(dir.join(crate::store_format::FILE)).unwrap();
}

/// One run of [`power_loss_at_every_step_of_creating_or_upgrading_a_store_keeps_every_acknowledged_commit`]:
/// crashes at the `k`-th mutating file operation from the start of `Db::open` — of a new store
/// (`upgrade` false: first segment, marker, then commits) or of a format-1 store holding
/// acknowledged commits (`upgrade` true: the upgrade's rotation, image, unlinks, marker, then
/// commits) — applies the power loss, reopens and verifies; a later clean open leaves a format-2
/// store. Returns whether the crash point was reached.
fn crash_open_at(k: u64, seed: u64, upgrade: bool) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        durability: Durability::Sync,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: 0,
        ..Default::default()
    };
    let mut statuses: BTreeMap<u64, Status> = BTreeMap::new();
    let mut id = 0;
    if upgrade {
        let db = Db::open(dir.path(), opts).unwrap();
        for (name, tag, versioned) in TREES {
            db.create_tree(name, tag, versioned).unwrap();
        }
        for _ in 0..20 {
            statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
            id += 1;
        }
        drop(db);
        make_format_1(dir.path());
    }
    let sim = SimFs::quiet(seed);
    sim.arm(k);
    if let Ok(db) = Db::open_with_fs(dir.path(), opts, Arc::new(sim.clone())) {
        if !upgrade {
            for (name, tag, versioned) in TREES {
                if db.create_tree(name, tag, versioned).is_err() {
                    break;
                }
            }
        }
        if db.tree("ta").is_some() && db.tree("tc").is_some() {
            for _ in 0..4 {
                let res = commit_batch(&db, id);
                statuses.insert(id, res.map_or(Status::Unknown, Status::Acked));
                id += 1;
            }
        }
    }
    let crashed = sim.counts().crashed;
    sim.crash().unwrap();
    let context = format!(
        "{} crash at op {k} (seed {seed})",
        if upgrade { "upgrade" } else { "creation" }
    );
    let db = Db::open_with_fs(dir.path(), opts, Arc::new(SimFs::quiet(seed + 1)))
        .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
    if db.tree("ta").is_some() && db.tree("tb").is_some() && db.tree("tc").is_some() {
        verify(&db, &mut statuses, &context);
    } else {
        assert!(
            statuses.values().all(|s| *s == Status::Unknown),
            "{context}: trees lost with acknowledged batches"
        );
        for (name, tag, versioned) in TREES {
            if db.tree(name).is_none() {
                db.create_tree(name, tag, versioned).unwrap();
            }
        }
        statuses.clear();
    }
    statuses.insert(id, Status::Acked(commit_batch(&db, id).unwrap()));
    drop(db);
    let db = Db::open(dir.path(), opts).unwrap();
    verify(&db, &mut statuses, &format!("{context}, clean reopen"));
    assert_eq!(
        crate::store_format::read(&*crate::vfs::os(), dir.path()).unwrap(),
        crate::store_format::StoreFormat::V2,
        "{context}"
    );
    crashed
}

#[test]
fn power_loss_at_every_step_of_creating_or_upgrading_a_store_keeps_every_acknowledged_commit() {
    for upgrade in [false, true] {
        let mut steps = 0;
        for k in 0..200 {
            let mut reached = false;
            for seed in 0..3 {
                reached |= crash_open_at(k, seed * 1000 + k, upgrade);
            }
            if !reached {
                break;
            }
            steps += 1;
        }
        eprintln!("crash points covered (upgrade: {upgrade}): {steps}");
        // creation: segment tmp create, header write, fdatasync, rename, fsync, marker (same
        // five), tree creations and commits; upgrade: rotation, image, unlinks, marker, commits.
        assert!(
            (8..200).contains(&steps),
            "unexpected number of crash points: {steps}"
        );
    }
}
