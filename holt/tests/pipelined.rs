//! Pipelined commits (`Db::accepted_view`, `Db::commit_pipelined`, `CommitTicket::wait`):
//! validation against the newest accepted state, visibility only after durability, dense
//! versions, and a sequencer built on them that never conflicts.

use std::sync::Arc;

use holt::{Batch, Db, Durability, Error, Expect, Options};

fn sync_opts() -> Options {
    Options {
        durability: Durability::Sync,
        checkpoint_wal_bytes: 0,
        ..Options::default()
    }
}

#[test]
fn pipelined_batches_validate_against_the_accepted_state_and_become_visible_on_wait() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), sync_opts()).unwrap();
    let t = db.create_tree("t", 0x01, true).unwrap();

    let mut a = Batch::new();
    a.put(&t, "a", "1");
    let ta = db.commit_pipelined(a).unwrap();
    assert_eq!(ta.version(), 1);
    // Accepted, not yet durable: readers do not see it, planners do. (No waiter has written the
    // group yet, so this is deterministic.)
    assert_eq!(db.version(), 0);
    assert_eq!(t.get(b"a").unwrap(), None);
    let planned = db.accepted_view();
    assert_eq!(planned.version(), 1);
    assert_eq!(planned.get(&t, b"a").unwrap(), Some(b"1".to_vec()));

    // A batch planned on the accepted state is accepted on top of it ...
    let mut b = Batch::new();
    b.expect_version(planned.version());
    b.expect(&t, "a", Expect::Equals(b"1".to_vec()));
    b.put(&t, "b", "2");
    let tb = db.commit_pipelined(b).unwrap();
    assert_eq!(tb.version(), 2);
    // ... and every predicate is re-checked against it: a stale plan is refused, nothing applies.
    let mut stale = Batch::new();
    stale.expect(&t, "a", Expect::Absent);
    stale.put(&t, "c", "3");
    assert!(matches!(
        db.commit_pipelined(stale),
        Err(Error::PredicateFailed { .. })
    ));
    let mut stale = Batch::new();
    stale.expect_version(1);
    stale.put(&t, "c", "3");
    assert!(matches!(
        db.commit_pipelined(stale),
        Err(Error::VersionMismatch {
            expected: 1,
            actual: 2
        })
    ));

    // Waiting on the later ticket makes the whole queue durable in one group.
    assert_eq!(tb.wait().unwrap(), 2);
    assert_eq!(db.version(), 2);
    assert_eq!(t.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(ta.wait().unwrap(), 1);
    assert_eq!(db.stats().commits, 2);
    assert_eq!(t.get(b"c").unwrap(), None);
    drop(t);
    drop(db);

    let db = Db::open(dir.path(), sync_opts()).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(db.version(), 2);
    assert_eq!(t.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.view_at(1).unwrap().get(&t, b"b").unwrap(), None);
}

#[test]
fn a_dropped_ticket_still_makes_its_commit_durable() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), sync_opts()).unwrap();
        let t = db.create_tree("t", 0x01, false).unwrap();
        let mut a = Batch::new();
        a.put(&t, "a", "1");
        drop(db.commit_pipelined(a).unwrap());
        assert_eq!(db.version(), 1);
    }
    let db = Db::open(dir.path(), sync_opts()).unwrap();
    assert_eq!(
        db.tree("t").unwrap().get(b"a").unwrap(),
        Some(b"1".to_vec())
    );
}

#[test]
fn in_memory_pipelined_commits_are_visible_at_once() {
    let db = Db::open_memory(Options::default()).unwrap();
    let t = db.create_tree("t", 0x01, false).unwrap();
    let mut a = Batch::new();
    a.put(&t, "a", "1");
    let ta = db.commit_pipelined(a).unwrap();
    assert_eq!(db.version(), 1);
    assert_eq!(ta.wait().unwrap(), 1);
    assert!(matches!(
        db.commit_pipelined(Batch::new()),
        Err(Error::InvalidArgument(_))
    ));
}

/// The pattern a command sequencer uses: plan at the accepted view and submit under one lock,
/// wait for durability outside it. Read-modify-write increments of one counter from many
/// threads never fail a predicate, versions are dense, and group commit shares fdatasyncs.
#[test]
fn a_sequencer_on_pipelined_commits_never_conflicts() {
    const THREADS: u64 = 8;
    const EACH: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), sync_opts()).unwrap();
    let t = db.create_tree("t", 0x01, true).unwrap();
    let sequencer = Arc::new(parking_lot::Mutex::new(()));
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (db, t, sequencer) = (db.clone(), t.clone(), sequencer.clone());
            s.spawn(move || {
                for _ in 0..EACH {
                    let ticket = {
                        let _plan = sequencer.lock();
                        let view = db.accepted_view();
                        let old = view.get(&t, b"counter").unwrap();
                        let n: u64 = old
                            .as_deref()
                            .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap());
                        let mut b = Batch::new();
                        b.expect_version(view.version());
                        match old {
                            Some(v) => b.expect(&t, "counter", Expect::Equals(v)),
                            None => b.expect(&t, "counter", Expect::Absent),
                        }
                        b.put(&t, "counter", (n + 1).to_string());
                        db.commit_pipelined(b).unwrap()
                    };
                    ticket.wait().unwrap();
                }
            });
        }
    });
    assert_eq!(db.version(), THREADS * EACH);
    assert_eq!(
        t.get(b"counter").unwrap(),
        Some((THREADS * EACH).to_string().into_bytes())
    );
}
