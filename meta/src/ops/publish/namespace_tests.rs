//! The namespace rule of publication (docs/workbench.md, "Files and directories": a path is a file or
//! an implicit directory, never both), checked inside the publishing command.

use crate::codec::{path_current, ManifestRow};
use crate::command::{execute, Predicate};
use crate::error::Error;
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, RequestId};
use crate::ops::publish::{
    command_digest, is_reserved, plan, publish, PathCondition, Planned, PublishRequest,
};
use crate::path::normalize;
use crate::shard::{MetaShard, OpenOptions};
use crate::store::{Snapshot, TxnStore};

fn digest(tag: &str) -> String {
    use sha2::Digest;
    format!(
        "sha256:{}",
        crate::ids::to_hex(&sha2::Sha256::digest(tag.as_bytes()))
    )
}

fn shard(dir: &std::path::Path) -> MetaShard {
    let s = MetaShard::open(dir, OpenOptions::default()).unwrap();
    s.create_workspace("w").unwrap();
    s
}

fn request(shard: &MetaShard, path: &str, condition: PathCondition) -> PublishRequest {
    let rev = ArtifactRevisionId::random().unwrap();
    PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: "w".into(),
        path: normalize(path).unwrap(),
        condition,
        revision_id: rev,
        logical_size: 4,
        body_digest_uri: digest(path),
        content_type: "text/plain".into(),
        producer: "namespace-test".into(),
        manifest_id: None,
        manifest: vec![ManifestRow {
            object_index: 0,
            physical_owner_revision: rev,
            physical_object_index: 0,
            object_key: format!(
                "nokv/artifacts/{}/{}/{}/blocks/{:016x}",
                shard.logical_shard_id(),
                shard.root_id(),
                rev,
                0
            ),
            logical_offset: 0,
            object_offset: 0,
            length: 4,
            digest_uri: digest(path),
            append_segment: None,
        }],
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

fn create(shard: &MetaShard, path: &str) -> crate::error::Result<u64> {
    publish(shard, request(shard, path, PathCondition::Create)).map(|r| r.generation)
}

#[test]
fn creating_below_a_file_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    create(&s, "outputs/a").unwrap();
    let before = s.version().unwrap();
    for path in ["outputs/a/b", "outputs/a/b/c/d"] {
        match create(&s, path) {
            Err(Error::AncestorIsFile { file }) => assert_eq!(file, "outputs/a"),
            other => panic!("{path}: expected AncestorIsFile, got {other:?}"),
        }
    }
    assert_eq!(
        s.version().unwrap(),
        before,
        "a refused publication writes nothing"
    );
}

#[test]
fn creating_over_a_directory_is_refused_for_every_condition() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    create(&s, "outputs/d/child").unwrap();
    let before = s.version().unwrap();
    for condition in [
        PathCondition::Create,
        PathCondition::Replace {
            expected_generation: 1,
        },
        PathCondition::Append {
            expected_generation: None,
        },
    ] {
        match publish(&s, request(&s, "outputs/d", condition)) {
            Err(Error::PathIsDirectory) => {}
            other => panic!("{condition:?}: expected PathIsDirectory, got {other:?}"),
        }
    }
    assert_eq!(s.version().unwrap(), before);
    // Deeper: the directory of a directory.
    assert!(matches!(create(&s, "outputs"), Err(Error::PathIsDirectory)));
}

#[test]
fn the_probe_ignores_siblings_that_share_a_name_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    // The ordered path key's order (docs/metadata-format.md, "Ids, Names, And Keys"): `a/…` subtree < exact `a` < `a\u{1}` < `ab`.
    create(&s, "outputs/ab").unwrap();
    create(&s, "outputs/a\u{1}").unwrap();
    create(&s, "outputs/a.txt").unwrap();
    create(&s, "outputs/a").unwrap();
    create(&s, "outputs/b/x").unwrap();
    create(&s, "outputs/bc").unwrap();
    assert!(matches!(
        create(&s, "outputs/b"),
        Err(Error::PathIsDirectory)
    ));
    assert!(matches!(
        create(&s, "outputs/a/x"),
        Err(Error::AncestorIsFile { .. })
    ));
}

#[test]
fn a_created_path_re_asserts_each_ancestor_as_absent() {
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    let req = request(&s, "outputs/x/y/z.txt", PathCondition::Create);
    let snap = s.inner.store.snapshot();
    let Planned::Command(cmd) = plan(&s, &snap, &req, command_digest(&req)).unwrap() else {
        panic!("fresh request");
    };
    let ws = s.read().visible_workspace("w").unwrap();
    for ancestor in ["outputs", "outputs/x", "outputs/x/y"] {
        let key = path_current::key(&s.root_id(), &ws.incarnation, &normalize(ancestor).unwrap());
        assert!(
            cmd.predicates
                .contains(&Predicate::absent(Family::PathCurrent, key)),
            "{ancestor} is not predicated absent"
        );
    }
    assert_eq!(cmd.read_version, snap.version());
}

/// Two writers of `d` and `d/x` planned at one read version: the first commits, the second's
/// command fails the read-version fence (nothing can enter the probed subtree between its probe
/// and its commit), and re-planning refuses it by the namespace rule. Both orders.
#[test]
fn racing_creates_of_d_and_d_slash_x_cannot_both_commit() {
    for (first, second) in [("outputs/d", "outputs/d/x"), ("outputs/e/x", "outputs/e")] {
        let dir = tempfile::tempdir().unwrap();
        let s = shard(dir.path());
        let a = request(&s, first, PathCondition::Create);
        let b = request(&s, second, PathCondition::Create);
        let snap = s.inner.store.snapshot();
        let (Planned::Command(ca), Planned::Command(cb)) = (
            plan(&s, &snap, &a, command_digest(&a)).unwrap(),
            plan(&s, &snap, &b, command_digest(&b)).unwrap(),
        ) else {
            panic!("fresh requests");
        };
        drop(snap);
        execute(&s.inner.store, &s.inner.fence(), *ca).unwrap();
        let before = s.version().unwrap();
        assert!(matches!(
            execute(&s.inner.store, &s.inner.fence(), *cb),
            Err(Error::ReadVersionConflict { .. })
        ));
        assert_eq!(s.version().unwrap(), before);
        match publish(&s, b) {
            Err(Error::AncestorIsFile { .. }) if first == "outputs/d" => {}
            Err(Error::PathIsDirectory) if first == "outputs/e/x" => {}
            other => panic!("{second} after {first}: {other:?}"),
        }
    }
}

#[test]
fn reserved_paths_and_their_subtrees_are_reserved() {
    for (path, reserved) in [
        ("metadata/run_manifest.json", true),
        ("metadata/run_manifest.json/x", true),
        ("metadata/restore_manifest.json/a/b", true),
        ("metadata/run_manifest.jsonx", false),
        ("metadata/run_manifest", false),
        ("outputs/metadata/run_manifest.json", false),
    ] {
        assert_eq!(is_reserved(&normalize(path).unwrap()), reserved, "{path}");
    }
    let dir = tempfile::tempdir().unwrap();
    let s = shard(dir.path());
    assert!(matches!(
        create(&s, "metadata/run_manifest.json/x"),
        Err(Error::InvalidArgument(_))
    ));
}
