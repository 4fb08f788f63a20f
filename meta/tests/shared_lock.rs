//! Owner epochs of a holt writer lock shared between processes (docs/metadata-format.md, "Owner
//! epochs of a shared writer lock"). Two writer handles on one directory hold two open file
//! descriptions of holt's `LOCK`, so they exclude each other as two processes do:
//!
//! - every acquisition that follows the other handle's advances the persisted owner epoch before
//!   its first command, from the epoch the other handle left, and the command carries the new
//!   epoch; an acquisition that follows only the handle's own writes advances nothing;
//! - the advance shares the command's WAL write and fdatasync (one sync for both);
//! - each handle's commands see the other's: creating a name the other created is the
//!   idempotent no-op.

use std::path::Path;
use std::time::Duration;

use meta::{MetaShard, OpenOptions};

fn open_shared(dir: &Path) -> MetaShard {
    let opts = OpenOptions {
        holt: holt::Options {
            writer_lock: holt::WriterLock::Shared {
                idle_release: Duration::from_millis(2),
                wait: Duration::from_secs(30),
            },
            ..holt::Options::default()
        },
        ..OpenOptions::default()
    };
    MetaShard::open(dir, opts).unwrap()
}

fn persisted_epoch(s: &MetaShard) -> u64 {
    let db = s.holt_db().expect("a holt-backed shard");
    db.refresh().unwrap();
    let sys = db.tree("system").unwrap();
    let b = db
        .view()
        .get(&sys, meta::codec::system::KEY_OWNER_EPOCH)
        .unwrap()
        .unwrap();
    meta::codec::system::decode_owner_epoch(&b).unwrap()
}

#[test]
fn an_acquisition_after_another_writer_advances_the_epoch_with_its_first_command_in_one_sync() {
    let dir = tempfile::tempdir().unwrap();
    let a = open_shared(dir.path());
    a.create_workspace("from-a").unwrap();
    let after_a = persisted_epoch(&a);
    assert_eq!(a.owner_epoch(), after_a);

    let b = open_shared(dir.path());
    b.create_workspace("from-b").unwrap();
    let after_b = persisted_epoch(&b);
    assert!(
        after_b > after_a,
        "B's acquisition fenced A: {after_b} > {after_a}"
    );
    assert_eq!(b.owner_epoch(), after_b);

    // A takes the lock again (B released it after its grace): it catches up with B's command —
    // B's name is taken — and advances the epoch again, in the same fdatasync as its command.
    let db = a.holt_db().unwrap();
    while b.holt_db().unwrap().holds_writer_lock() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let syncs = db.stats().wal_syncs;
    a.create_workspace("from-a-again").unwrap();
    assert_eq!(
        db.stats().wal_syncs - syncs,
        1,
        "the epoch advance and the command share one fdatasync"
    );
    let again = persisted_epoch(&a);
    assert!(
        again > after_b,
        "A's new acquisition fenced B: {again} > {after_b}"
    );
    assert_eq!(a.owner_epoch(), again);
    assert!(
        !a.create_workspace("from-b").unwrap().created,
        "A sees the workspace B created while it was away"
    );
    assert!(a.read().visible_workspace("from-b").is_ok());
}

#[test]
fn a_reacquisition_with_no_other_writer_in_between_advances_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let a = open_shared(dir.path());
    a.create_workspace("first").unwrap();
    let epoch = persisted_epoch(&a);
    let db = a.holt_db().unwrap();
    // Released after its 2 ms grace; taken again by the next command (a new acquisition term).
    while db.holds_writer_lock() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let version = db.version();
    a.create_workspace("second").unwrap();
    assert_eq!(
        persisted_epoch(&a),
        epoch,
        "no other writer advanced, so the handle's epoch still fences every earlier holder"
    );
    assert_eq!(a.owner_epoch(), epoch);
    assert_eq!(
        db.version(),
        version + 1,
        "one commit: the command alone, no owner-epoch advance"
    );
}
