//! Failure ordering of pipelined commits, through the fault-injecting WAL file layer
//! ([`crate::vfs::sim::SimFs`]): a failed group fails every commit accepted on top of it.

use std::sync::Arc;

use crate::vfs::sim::SimFs;
use crate::{Batch, Db, Durability, Error, Expect, Options, WalIo};

fn opts() -> Options {
    Options {
        durability: Durability::Sync,
        wal_io: WalIo::Blocking,
        checkpoint_wal_bytes: 0,
        ..Default::default()
    }
}

#[test]
fn a_failed_group_fails_every_commit_accepted_on_top_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let sim = SimFs::quiet(7);
    let db = Db::open_with_fs(dir.path(), opts(), Arc::new(sim.clone())).unwrap();
    let t = db.create_tree("t", 0x01, true).unwrap();
    let mut b = Batch::new();
    b.put(&t, "base", "0");
    assert_eq!(db.commit(b).unwrap(), 1);

    // The next mutating file operation (the group's WAL write) fails.
    sim.arm(0);
    let mut a = Batch::new();
    a.put(&t, "a", "1");
    let ta = db.commit_pipelined(a).unwrap();
    // B predicates A's accepted (not yet durable) write and A's version.
    let mut b = Batch::new();
    b.expect(&t, "a", Expect::Equals(b"1".to_vec()));
    b.expect_version(ta.version());
    b.put(&t, "b", "2");
    let tb = db.commit_pipelined(b).unwrap();
    assert_eq!((ta.version(), tb.version()), (2, 3));
    assert_eq!(db.accepted_view().version(), 3);

    let ea = ta.wait().unwrap_err();
    let eb = tb.wait().unwrap_err();
    assert!(matches!(ea, Error::Io { .. }), "{ea:?}");
    assert!(
        matches!(eb, Error::Io { .. } | Error::Poisoned { .. }),
        "{eb:?}"
    );
    // Nothing of the failed group became visible, and nothing can be accepted on top of it.
    assert_eq!(db.version(), 1);
    assert_eq!(t.get(b"a").unwrap(), None);
    let mut c = Batch::new();
    c.put(&t, "c", "3");
    assert!(matches!(
        db.commit_pipelined(c),
        Err(Error::Poisoned { .. })
    ));
    assert!(matches!(
        db.wait_visible(2, std::time::Duration::from_millis(10)),
        Err(Error::Poisoned { .. })
    ));
    drop(t);
    drop(db);

    // After the power loss the recovered state is a durable prefix of the accepted commits:
    // B (which relied on A) is never present without A.
    sim.crash().unwrap();
    let db = Db::open_with_fs(dir.path(), opts(), Arc::new(SimFs::quiet(8))).unwrap();
    let t = db.tree("t").unwrap();
    assert_eq!(t.get(b"base").unwrap(), Some(b"0".to_vec()));
    let a = t.get(b"a").unwrap();
    let b = t.get(b"b").unwrap();
    assert!(b.is_none() || a.is_some(), "B survived without A");
    assert_eq!(
        db.version(),
        1 + u64::from(a.is_some()) + u64::from(b.is_some())
    );
    assert!(db.version() < 4);
}
