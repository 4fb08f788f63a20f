//! Schema gate completeness (docs/metadata-format.md, "Schema Gate"): every missing, malformed, unknown-version,
//! inconsistent or mixed store is refused with a typed error before anything is served, and its
//! files stay byte-identical.

use std::path::Path;

use meta::codec::system::{SchemaMarker, KEY_RECOVERY_TAIL, KEY_ROOT_PLACEMENT, KEY_SCHEMA};
use meta::codec::{RootActivationState, RootFence, RootPlacement};
use meta::schema::{Family, SchemaMismatchKind};
use meta::{Error, MetaShard, OpenOptions};

#[path = "fixtures/files.rs"]
mod files;
use files::files;

/// Opens `dir` twice; both opens must fail with `kind` (reason containing `needle`) and leave
/// every file byte-identical.
fn assert_refused(dir: &Path, kind: SchemaMismatchKind, needle: &str) {
    let before = files(dir);
    for _ in 0..2 {
        match MetaShard::open(dir, OpenOptions::default()) {
            Err(Error::SchemaMismatch { kind: k, reason }) => {
                assert_eq!(k, kind, "reason: {reason}");
                assert!(
                    reason.contains(needle),
                    "reason {reason:?} lacks {needle:?}"
                );
            }
            Err(other) => panic!("expected SchemaMismatch({kind:?}), got {other:?}"),
            Ok(_) => panic!("expected SchemaMismatch({kind:?}), but the store opened"),
        }
        assert_eq!(
            files(dir),
            before,
            "a refused store must stay byte-identical"
        );
    }
}

fn holt_db(dir: &Path) -> holt::Db {
    holt::Db::open(dir, holt::Options::default()).unwrap()
}

/// A correctly initialized store, closed.
fn initialized(dir: &Path) {
    drop(MetaShard::open(dir, OpenOptions::default()).unwrap());
}

/// Rewrites (or deletes, with `None`) one System row through holt.
fn set_system(dir: &Path, key: &[u8], value: Option<Vec<u8>>) {
    let db = holt_db(dir);
    let sys = db.tree("system").unwrap();
    let mut b = holt::Batch::new();
    match value {
        Some(v) => b.put(&sys, key.to_vec(), v),
        None => b.delete(&sys, key.to_vec()),
    }
    db.commit(b).unwrap();
}

/// Creates the registry by hand, letting `tweak` change (name, tag, versioned) or drop a tree,
/// then commits `System("schema")` so the store is at version 1.
fn hand_built(dir: &Path, tweak: impl Fn(Family) -> Option<(String, u8, bool)>) {
    let db = holt_db(dir);
    for f in Family::ALL {
        if let Some((name, tag, versioned)) = tweak(f) {
            db.create_tree(&name, tag, versioned).unwrap();
        }
    }
    let sys = db.tree("system").unwrap();
    let mut b = holt::Batch::new();
    b.put(&sys, KEY_SCHEMA.to_vec(), SchemaMarker::current().encode());
    db.commit(b).unwrap();
}

fn exact(f: Family) -> Option<(String, u8, bool)> {
    Some((f.name().to_owned(), f.tag(), f.versioned()))
}

#[test]
fn empty_store_is_initialized_with_marker_registry_placement_fence_and_outbox() {
    let dir = tempfile::tempdir().unwrap();
    let s = MetaShard::open(dir.path(), OpenOptions::default()).unwrap();
    assert_eq!(
        s.holt_db().unwrap().version(),
        1,
        "initialization is one commit"
    );
    let view = s.holt_db().unwrap().view();
    let sys = s.holt_db().unwrap().tree("system").unwrap();
    let marker = view.get(&sys, KEY_SCHEMA).unwrap().unwrap();
    let mut want = vec![0, 1, 0, 0, 0, 14];
    want.extend_from_slice(b"nokv_workspace");
    want.extend_from_slice(&[0, 0, 0, 8]);
    assert_eq!(marker, want, "exact marker bytes");
    let placement =
        RootPlacement::decode(&view.get(&sys, KEY_ROOT_PLACEMENT).unwrap().unwrap()).unwrap();
    assert_eq!(placement.root_id, s.root_id());
    assert_eq!(placement.logical_shard_id, s.logical_shard_id());
    assert_eq!(placement.placement_generation, 1);
    assert_eq!(
        placement.lifecycle,
        meta::codec::RootPlacementLifecycle::Active
    );
    let fence_tree = s.holt_db().unwrap().tree("root_fence").unwrap();
    let fence = RootFence::decode(
        &view
            .get(&fence_tree, s.root_id().as_bytes())
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(fence.logical_shard_id, placement.logical_shard_id);
    assert_eq!(fence.placement_generation, placement.placement_generation);
    assert_eq!(fence.activation_state, RootActivationState::Active);
    assert_eq!(s.recovery_tail().unwrap().applied_lsn, 1);
    assert_eq!(s.verify_recovery_outbox().unwrap().records, 1);
    let names: Vec<(String, u8, bool)> = s
        .holt_db()
        .unwrap()
        .trees()
        .into_iter()
        .map(|t| (t.name, t.tag, t.versioned))
        .collect();
    assert_eq!(names.len(), Family::ALL.len() + 1);
    assert!(names.iter().any(|n| n.0 == "history" && n.1 == 0));
    for f in Family::ALL {
        assert!(
            names.contains(&(f.name().to_owned(), f.tag(), f.versioned())),
            "{f:?}"
        );
    }
}

#[test]
fn registry_missing_one_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    hand_built(dir.path(), |f| {
        if f == Family::GcBarrier {
            None
        } else {
            exact(f)
        }
    });
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MissingTree,
        "missing tree gc_barrier",
    );
}

#[test]
fn registry_missing_the_recovery_outbox_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    hand_built(dir.path(), |f| {
        if f == Family::RecoveryOutbox {
            None
        } else {
            exact(f)
        }
    });
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MissingTree,
        "missing tree recovery_outbox",
    );
}

#[test]
fn registry_with_one_extra_tree_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    holt_db(dir.path())
        .create_tree("inode_current", 0x30, true)
        .unwrap();
    assert_refused(
        dir.path(),
        SchemaMismatchKind::ExtraTree,
        "extra tree inode_current",
    );
}

#[test]
fn registry_with_a_wrong_tag_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    hand_built(dir.path(), |f| {
        if f == Family::Tag {
            Some((f.name().to_owned(), 0x40, true))
        } else {
            exact(f)
        }
    });
    assert_refused(
        dir.path(),
        SchemaMismatchKind::WrongTreeTag,
        "tree tag has tag 0x40, expected 0x0a",
    );
}

#[test]
fn registry_with_a_wrong_versioned_flag_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    hand_built(dir.path(), |f| {
        if f == Family::RecoveryOutbox {
            Some((f.name().to_owned(), f.tag(), true))
        } else {
            exact(f)
        }
    });
    assert_refused(
        dir.path(),
        SchemaMismatchKind::WrongVersionedFlag,
        "recovery_outbox has versioned=true",
    );
}

#[test]
fn version_zero_store_with_a_foreign_tree_is_refused_not_initialized() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = holt_db(dir.path());
        db.create_tree("root_fence", 0x01, true).unwrap();
        db.create_tree("dentry_current", 0x31, true).unwrap();
        assert_eq!(db.version(), 0);
    }
    assert_refused(
        dir.path(),
        SchemaMismatchKind::ExtraTree,
        "extra tree dentry_current",
    );
}

#[test]
fn format_version_7_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    let mut m = SchemaMarker::current();
    m.format_version = 7;
    set_system(dir.path(), KEY_SCHEMA, Some(m.encode()));
    assert_refused(
        dir.path(),
        SchemaMismatchKind::UnsupportedFormatVersion,
        "format_version 7",
    );
}

#[test]
fn unknown_marker_value_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    let mut m = SchemaMarker::current().encode();
    m[1] = 2;
    set_system(dir.path(), KEY_SCHEMA, Some(m));
    assert_refused(
        dir.path(),
        SchemaMismatchKind::UnknownMarkerVersion,
        "value_format_version 2",
    );
}

#[test]
fn malformed_marker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    let mut m = SchemaMarker::current().encode();
    m.truncate(m.len() - 2);
    set_system(dir.path(), KEY_SCHEMA, Some(m));
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MalformedMarker,
        "malformed schema marker",
    );
}

#[test]
fn marker_for_another_schema_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    let mut m = SchemaMarker::current();
    m.schema_id = "nokv_legacy".into();
    set_system(dir.path(), KEY_SCHEMA, Some(m.encode()));
    assert_refused(
        dir.path(),
        SchemaMismatchKind::ForeignSchemaId,
        "\"nokv_legacy\"",
    );
}

#[test]
fn data_rows_without_a_marker_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = MetaShard::open(dir.path(), OpenOptions::default()).unwrap();
        s.create_workspace("w").unwrap();
    }
    set_system(dir.path(), KEY_SCHEMA, None);
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MissingMarker,
        "missing schema marker",
    );
}

#[test]
fn hand_made_store_with_rows_but_no_marker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = holt_db(dir.path());
        for f in Family::ALL {
            db.create_tree(f.name(), f.tag(), f.versioned()).unwrap();
        }
        let t = db.tree("workspace_current").unwrap();
        let mut b = holt::Batch::new();
        b.put(&t, b"k".to_vec(), b"v".to_vec());
        db.commit(b).unwrap();
    }
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MissingMarker,
        "missing schema marker",
    );
}

#[test]
fn missing_recovery_tail_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    set_system(dir.path(), KEY_RECOVERY_TAIL, None);
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MissingRecord,
        "missing recovery tail record",
    );
}

#[test]
fn malformed_placement_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    initialized(dir.path());
    set_system(dir.path(), KEY_ROOT_PLACEMENT, Some(vec![0, 1, 2]));
    assert_refused(
        dir.path(),
        SchemaMismatchKind::MalformedRecord,
        "malformed root placement",
    );
}

#[test]
fn root_fence_for_another_placement_generation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = {
        let s = MetaShard::open(dir.path(), OpenOptions::default()).unwrap();
        s.root_id()
    };
    {
        let db = holt_db(dir.path());
        let t = db.tree("root_fence").unwrap();
        let mut fence =
            RootFence::decode(&db.view().get(&t, root.as_bytes()).unwrap().unwrap()).unwrap();
        fence.placement_generation = 2;
        let mut b = holt::Batch::new();
        b.put(&t, root.as_bytes().to_vec(), fence.encode());
        db.commit(b).unwrap();
    }
    assert_refused(
        dir.path(),
        SchemaMismatchKind::InconsistentPlacement,
        "does not match the root placement",
    );
}

#[test]
fn a_fenced_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = {
        let s = MetaShard::open(dir.path(), OpenOptions::default()).unwrap();
        s.root_id()
    };
    {
        let db = holt_db(dir.path());
        let t = db.tree("root_fence").unwrap();
        let mut fence =
            RootFence::decode(&db.view().get(&t, root.as_bytes()).unwrap().unwrap()).unwrap();
        fence.activation_state = RootActivationState::Fenced;
        let mut b = holt::Batch::new();
        b.put(&t, root.as_bytes().to_vec(), fence.encode());
        db.commit(b).unwrap();
    }
    assert_refused(
        dir.path(),
        SchemaMismatchKind::InconsistentPlacement,
        "root is not active",
    );
}
