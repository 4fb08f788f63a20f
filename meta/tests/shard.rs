//! Behaviour of `MetaShard` over a real holt store: schema gate, owner epoch, workspace creation,
//! publication conditions, replay, listings and reopen.

use std::collections::BTreeMap;
use std::path::Path;

#[path = "fixtures/engine.rs"]
mod engine;

use meta::codec::system::{SchemaMarker, KEY_SCHEMA};
use meta::schema::Family;
use meta::{
    normalize, ArtifactRevisionId, ChangeKind, Error, ManifestRow, MetaShard, NormPath,
    OpenOptions, PathCondition, PublishRequest, RequestId, RevisionState, WorkspaceState,
};

fn open(dir: &Path) -> MetaShard {
    engine::open(dir)
}

fn digest(tag: &str) -> String {
    use sha2::Digest;
    format!(
        "sha256:{}",
        sha2::Sha256::digest(tag.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

fn own_row(
    shard: &MetaShard,
    rev: ArtifactRevisionId,
    index: u64,
    offset: u64,
    len: u64,
) -> ManifestRow {
    ManifestRow {
        object_index: index,
        physical_owner_revision: rev,
        physical_object_index: index,
        object_key: format!(
            "nokv/artifacts/{}/{}/{}/blocks/{index:016x}",
            shard.logical_shard_id(),
            shard.root_id(),
            rev
        ),
        logical_offset: offset,
        object_offset: 0,
        length: len,
        digest_uri: digest(&format!("{rev}-{index}")),
        append_segment: None,
    }
}

fn request(
    shard: &MetaShard,
    wb: &str,
    path: &str,
    size: u64,
    condition: PathCondition,
) -> PublishRequest {
    let rev = ArtifactRevisionId::random().unwrap();
    PublishRequest {
        request_id: RequestId::random().unwrap(),
        workbench_id: wb.to_owned(),
        path: normalize(path).unwrap(),
        condition,
        revision_id: rev,
        logical_size: size,
        body_digest_uri: digest(&format!("body-{path}-{size}")),
        content_type: "text/plain; charset=utf-8".into(),
        producer: "test".into(),
        manifest_id: None,
        manifest: if size == 0 {
            vec![]
        } else {
            vec![own_row(shard, rev, 0, 0, size)]
        },
        dependency_depth: 0,
        index_fields: Default::default(),
    }
}

fn put(shard: &MetaShard, wb: &str, path: &str) -> u64 {
    match shard.publish(request(shard, wb, path, 5, PathCondition::Create)) {
        Ok(r) => r.generation,
        // Since the file-or-directory rule a clash exists only in stores written before it; the
        // listing tests still read such stores, so write the row the way an older version did.
        Err(meta::Error::PathIsDirectory | meta::Error::AncestorIsFile { .. }) => {
            legacy_put(shard, wb, path)
        }
        Err(e) => panic!("publish {path}: {e}"),
    }
}

/// Publishes `path` without the namespace rule (a raw command: new revision, its path reference
/// and the PathCurrent row), as a store written before the rule could hold it.
fn legacy_put(shard: &MetaShard, wb: &str, path: &str) -> u64 {
    use meta::codec::{
        artifact_revision, path_current, revision_ref, ArtifactRevision, CommandResult, PathEntry,
        RefOwner, RevisionRef, RevisionState,
    };
    use meta::command::{Mutation, Predicate};
    let read = shard.read();
    let inc = read.visible_workspace(wb).unwrap().incarnation;
    let root = shard.root_id();
    let rev = ArtifactRevisionId::random().unwrap();
    let cv = read.version() + 1;
    let path = normalize(path).unwrap();
    let digest = format!("sha256:{}", "ab".repeat(32));
    let revision = ArtifactRevision {
        logical_size: 0,
        body_digest_uri: digest.clone(),
        manifest_digest_uri: meta::codec::manifest_digest_uri(&[]),
        block_count: 0,
        dependency_count: 0,
        dependency_depth: 0,
        dependency_digest: [0; 32],
        content_type: "text/plain".into(),
        state: RevisionState::Available,
        reference_epoch: 1,
        strong_reference_count: 1,
        last_zero_ref_version: None,
        created_version: cv,
    };
    let entry = PathEntry {
        generation: cv,
        artifact_revision_id: rev,
        logical_size: 0,
        body_digest_uri: digest,
        manifest_digest_uri: revision.manifest_digest_uri.clone(),
        dependency_count: 0,
        dependency_depth: 0,
        content_type: "text/plain".into(),
        producer: "legacy".into(),
        manifest_id: None,
        created_version: cv,
        modified_version: cv,
        index_projection: Vec::new(),
    };
    let pkey = path_current::key(&root, &inc, &path);
    let mut cmd = shard.command_header(
        RequestId::random().unwrap(),
        [7; 32],
        read.version(),
        CommandResult::Applied { value: cv },
    );
    cmd.predicates = vec![Predicate::absent(Family::PathCurrent, pkey.clone())];
    cmd.mutations = vec![
        Mutation::put(
            Family::ArtifactRevision,
            artifact_revision::key(&root, &rev),
            revision.encode(),
        ),
        Mutation::put(
            Family::RevisionRef,
            revision_ref::key(
                &root,
                &RefOwner::Path {
                    incarnation: inc,
                    path: path.clone(),
                },
                &rev,
            ),
            RevisionRef {
                reference_epoch_at_add: 1,
                created_version: cv,
            }
            .encode(),
        ),
        Mutation::put(Family::PathCurrent, pkey, entry.encode()),
    ];
    drop(read);
    shard.execute(cmd).unwrap();
    cv
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

fn p(s: &str) -> NormPath {
    normalize(s).unwrap()
}

// ---------------------------------------------------------------- schema gate

#[test]
fn fresh_store_gets_the_exact_registry_marker_and_placement() {
    let dir = tempfile::tempdir().unwrap();
    let shard = open(dir.path());
    let infos = engine::registry(&shard);
    let mut got: Vec<(String, u8, bool)> =
        infos.iter().filter(|i| i.0 != "history").cloned().collect();
    got.sort_by_key(|g| g.1);
    let want: Vec<(String, u8, bool)> = Family::ALL
        .iter()
        .map(|f| (f.name().to_owned(), f.tag(), f.versioned()))
        .collect();
    assert_eq!(got, want);
    assert!(infos.iter().any(|i| i.0 == "history" && i.1 == 0));
    assert_eq!(infos.len(), 26);
    assert_eq!(shard.owner_epoch(), 1);
    assert_eq!(shard.presentation_root(), "/agents/local/wb");
    assert_eq!(engine::version(&shard), 1, "initialization is one commit");
    let marker = engine::raw_get(&shard, Family::System, KEY_SCHEMA).unwrap();
    assert_eq!(
        SchemaMarker::decode(&marker).unwrap(),
        SchemaMarker::current()
    );
    let fence = engine::raw_get(&shard, Family::RootFence, shard.root_id().as_bytes()).unwrap();
    let fence = meta::codec::RootFence::decode(&fence).unwrap();
    assert_eq!(fence.logical_shard_id, shard.logical_shard_id());
    assert_eq!(fence.placement_generation, 1);
    assert_eq!(
        fence.activation_state,
        meta::codec::RootActivationState::Active
    );
}

#[test]
fn reopen_keeps_identity_and_advances_owner_epoch_by_one_commit_before_the_first_write() {
    let dir = tempfile::tempdir().unwrap();
    let (root, shard_id, v) = {
        let s = open(dir.path());
        (s.root_id(), s.logical_shard_id(), engine::version(&s))
    };
    for expected_epoch in 2..=4 {
        let s = open(dir.path());
        assert_eq!(s.root_id(), root);
        assert_eq!(s.logical_shard_id(), shard_id);
        assert_eq!(s.owner_epoch(), expected_epoch);
        // Opening writes nothing; the first write persists the epoch in one commit.
        assert_eq!(engine::version(&s), v + expected_epoch - 2);
        s.prepare_write().unwrap();
        assert_eq!(engine::version(&s), v + expected_epoch - 1);
    }
    // A handle that only reads leaves the epoch where it was.
    let s = open(dir.path());
    assert_eq!(s.owner_epoch(), 5);
    drop(s);
    assert_eq!(open(dir.path()).owner_epoch(), 5);
}

// The refusal cases of the schema gate live in tests/gate.rs (one test per case).

#[test]
fn presentation_root_is_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let opts = |r: Option<&str>| OpenOptions {
        presentation_root: r.map(str::to_owned),
        ..OpenOptions::default()
    };
    let s = engine::open_with(dir.path(), opts(Some("/team/wb"))).unwrap();
    assert_eq!(s.presentation_root(), "/team/wb");
    drop(s);
    let before = files(dir.path());
    match engine::open_with(dir.path(), opts(Some("/other"))) {
        Err(Error::PresentationRootMismatch { stored, requested }) => {
            assert_eq!(stored, "/team/wb");
            assert_eq!(requested, "/other");
        }
        other => panic!("expected PresentationRootMismatch, got {other:?}"),
    }
    assert_eq!(files(dir.path()), before);
    assert!(matches!(
        engine::open_with(dir.path(), opts(Some("/"))),
        Err(Error::InvalidArgument(_))
    ));
    let s = engine::open_with(dir.path(), opts(None)).unwrap();
    assert_eq!(s.presentation_root(), "/team/wb");
    drop(s);
    let s = engine::open_with(dir.path(), opts(Some("/team/wb"))).unwrap();
    assert_eq!(s.presentation_root(), "/team/wb");
}

// ---------------------------------------------------------------- workspaces

#[test]
fn create_workspace_is_idempotent_for_a_visible_name() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let first = s.create_workspace("run-1").unwrap();
    assert!(first.created);
    assert_eq!(first.workspace.state, WorkspaceState::Visible);
    assert_eq!(first.workspace.workspace_revision, 1);
    assert_eq!(first.workspace.created_version, engine::version(&s));
    let v = engine::version(&s);
    let again = s.create_workspace("run-1").unwrap();
    assert!(!again.created);
    assert_eq!(again.workspace, first.workspace);
    assert_eq!(
        engine::version(&s),
        v,
        "an idempotent create writes nothing"
    );
    let other = s.create_workspace("run-2").unwrap();
    assert_ne!(other.workspace.incarnation, first.workspace.incarnation);
    assert_eq!(
        s.read().visible_workspace("run-1").unwrap(),
        first.workspace
    );
    assert!(matches!(
        s.read().visible_workspace("nope"),
        Err(Error::WorkspaceNotFound { .. })
    ));
    assert!(matches!(
        s.create_workspace("bad id"),
        Err(Error::InvalidArgument(_))
    ));
    let events = s.read().changes(None, 10).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].2.kind, ChangeKind::WorkspaceCreated);
    assert_eq!(events[0].2.workbench_id, "run-1");
    assert_eq!(events[0].0, first.workspace.created_version);
    assert_eq!(events[0].1, 0);
}

// ---------------------------------------------------------------- publication

#[test]
fn create_publication_writes_entry_revision_manifest_and_refs() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let ws = s.create_workspace("w").unwrap().workspace;
    let req = request(&s, "w", "outputs/a.txt", 12, PathCondition::Create);
    let rev = req.revision_id;
    let manifest = req.manifest.clone();
    let read_version = engine::version(&s);
    let r = s.publish(req).unwrap();
    assert!(r.created && !r.idempotent_replay);
    assert_eq!(r.commit_version, read_version + 1);
    assert_eq!(r.generation, r.commit_version);
    assert_eq!(r.replaced_generation, None);
    assert_eq!(
        r.entry.manifest_digest_uri,
        meta::manifest_digest_uri(&manifest)
    );
    let rd = s.read();
    let entry = rd
        .path_entry(&ws.incarnation, &p("outputs/a.txt"))
        .unwrap()
        .unwrap();
    assert_eq!(entry, r.entry);
    assert_eq!(entry.created_version, r.commit_version);
    let revision = rd.revision(&rev).unwrap().unwrap();
    assert_eq!(revision.state, RevisionState::Available);
    assert_eq!(revision.strong_reference_count, 1);
    assert_eq!(revision.reference_epoch, 1);
    assert_eq!(revision.block_count, 1);
    assert_eq!(rd.manifest(&rev).unwrap(), manifest);
    let w = rd.visible_workspace("w").unwrap();
    assert_eq!(w.workspace_revision, 2);
    assert_eq!(w.modified_version, r.commit_version);
}

#[test]
fn create_on_an_existing_path_fails_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    put(&s, "w", "a");
    let v = engine::version(&s);
    let err = s
        .publish(request(&s, "w", "a", 3, PathCondition::Create))
        .unwrap_err();
    assert!(matches!(err, Error::PathAlreadyExists), "{err:?}");
    assert_eq!(engine::version(&s), v);
}

#[test]
fn replace_with_current_generation_advances_generation_and_releases_old_revision() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let ws = s.create_workspace("w").unwrap().workspace;
    let first = s
        .publish(request(&s, "w", "a", 5, PathCondition::Create))
        .unwrap();
    let old_rev = first.entry.artifact_revision_id;
    let r = s
        .publish(request(
            &s,
            "w",
            "a",
            7,
            PathCondition::Replace {
                expected_generation: first.generation,
            },
        ))
        .unwrap();
    assert!(!r.created);
    assert_eq!(r.replaced_generation, Some(first.generation));
    assert!(r.generation > first.generation);
    assert_eq!(r.entry.created_version, first.entry.created_version);
    assert_eq!(r.entry.logical_size, 7);
    let rd = s.read();
    let old = rd.revision(&old_rev).unwrap().unwrap();
    assert_eq!(old.strong_reference_count, 0);
    assert_eq!(old.reference_epoch, 2);
    assert_eq!(old.last_zero_ref_version, Some(r.commit_version));
    assert_eq!(
        rd.path_entry(&ws.incarnation, &p("a"))
            .unwrap()
            .unwrap()
            .generation,
        r.generation
    );
    let events = rd.changes(None, 10).unwrap();
    let last = &events.last().unwrap().2;
    assert_eq!(last.kind, ChangeKind::ArtifactPublished);
    assert_eq!(last.before_generation, Some(first.generation));
    assert_eq!(last.after_generation, Some(r.generation));
}

#[test]
fn replace_with_stale_generation_conflicts_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let g1 = put(&s, "w", "a");
    let g2 = s
        .publish(request(
            &s,
            "w",
            "a",
            9,
            PathCondition::Replace {
                expected_generation: g1,
            },
        ))
        .unwrap()
        .generation;
    let v = engine::version(&s);
    let err = s
        .publish(request(
            &s,
            "w",
            "a",
            4,
            PathCondition::Replace {
                expected_generation: g1,
            },
        ))
        .unwrap_err();
    match err {
        Error::GenerationConflict { expected, actual } => {
            assert_eq!(expected, g1);
            assert_eq!(actual, g2);
        }
        other => panic!("expected GenerationConflict, got {other:?}"),
    }
    assert_eq!(
        engine::version(&s),
        v,
        "a failed publication commits nothing"
    );
}

#[test]
fn replace_of_a_missing_path_is_path_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let err = s
        .publish(request(
            &s,
            "w",
            "missing",
            1,
            PathCondition::Replace {
                expected_generation: 2,
            },
        ))
        .unwrap_err();
    assert!(matches!(err, Error::PathNotFound), "{err:?}");
}

#[test]
fn append_creates_then_extends_with_a_dependency_on_the_base_revision() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let base = s
        .publish(request(
            &s,
            "w",
            "logs/run.log",
            4,
            PathCondition::Append {
                expected_generation: None,
            },
        ))
        .unwrap();
    assert!(base.created);
    let base_rev = base.entry.artifact_revision_id;

    // A second append without the base generation conflicts.
    let err = s
        .publish(request(
            &s,
            "w",
            "logs/run.log",
            4,
            PathCondition::Append {
                expected_generation: None,
            },
        ))
        .unwrap_err();
    assert!(
        matches!(err, Error::GenerationConflict { expected: 0, actual } if actual == base.generation),
        "{err:?}"
    );

    let mut req = request(
        &s,
        "w",
        "logs/run.log",
        10,
        PathCondition::Append {
            expected_generation: Some(base.generation),
        },
    );
    let child = req.revision_id;
    let mut reused = s.read().manifest(&base_rev).unwrap();
    let mut tail = own_row(&s, child, 1, 4, 6);
    tail.append_segment = Some(1);
    reused.push(tail);
    req.manifest = reused;
    req.dependency_depth = 1;
    let r = s.publish(req).unwrap();
    assert!(!r.created);
    assert_eq!(r.entry.dependency_count, 1);
    assert_eq!(r.entry.dependency_depth, 1);
    let rd = s.read();
    let base_row = rd.revision(&base_rev).unwrap().unwrap();
    // -1 path reference, +1 dependency reference; two reference changes.
    assert_eq!(base_row.strong_reference_count, 1);
    assert_eq!(base_row.reference_epoch, 3);
    assert_eq!(base_row.last_zero_ref_version, None);
    let child_row = rd.revision(&child).unwrap().unwrap();
    assert_eq!(child_row.dependency_count, 1);
    assert_eq!(child_row.block_count, 2);
    let events = rd.changes(None, 10).unwrap();
    assert_eq!(events.last().unwrap().2.kind, ChangeKind::ArtifactAppended);
}

#[test]
fn wrong_dependency_depth_is_rejected_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let base = s
        .publish(request(&s, "w", "a", 4, PathCondition::Create))
        .unwrap();
    let mut req = request(&s, "w", "b", 4, PathCondition::Create);
    req.manifest = s.read().manifest(&base.entry.artifact_revision_id).unwrap();
    req.dependency_depth = 0;
    let v = engine::version(&s);
    assert!(matches!(s.publish(req), Err(Error::InvalidArgument(_))));
    assert_eq!(engine::version(&s), v);
}

#[test]
fn invalid_requests_are_rejected_before_any_write() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let v = engine::version(&s);
    let mut bad_digest = request(&s, "w", "a", 3, PathCondition::Create);
    bad_digest.body_digest_uri = "sha256:ABC".into();
    let mut reserved = request(
        &s,
        "w",
        "metadata/run_manifest.json",
        3,
        PathCondition::Create,
    );
    reserved.path = p("metadata/run_manifest.json");
    let mut gap = request(&s, "w", "a", 3, PathCondition::Create);
    gap.logical_size = 4;
    let mut no_type = request(&s, "w", "a", 3, PathCondition::Create);
    no_type.content_type.clear();
    for req in [bad_digest, reserved, gap, no_type] {
        assert!(matches!(s.publish(req), Err(Error::InvalidArgument(_))));
    }
    assert!(matches!(
        s.publish(request(&s, "ghost", "a", 3, PathCondition::Create)),
        Err(Error::WorkspaceNotFound { .. })
    ));
    assert_eq!(engine::version(&s), v);
}

#[test]
fn request_replay_returns_the_stored_result_even_after_the_version_moved() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    let req = request(&s, "w", "a", 5, PathCondition::Create);
    let first = s.publish(req.clone()).unwrap();
    put(&s, "w", "b");
    put(&s, "w", "c");
    let v = engine::version(&s);
    let again = s.publish(req.clone()).unwrap();
    assert!(again.idempotent_replay);
    assert_eq!(again.generation, first.generation);
    assert_eq!(again.commit_version, first.commit_version);
    assert_eq!(again.entry, first.entry);
    assert_eq!(engine::version(&s), v, "a replay writes nothing");

    let mut changed = req;
    changed.content_type = "application/json".into();
    assert!(matches!(
        s.publish(changed),
        Err(Error::RequestReplayMismatch)
    ));
}

// ---------------------------------------------------------------- reads

#[test]
fn list_children_merges_files_and_directories_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let inc = s.create_workspace("w").unwrap().workspace.incarnation;
    for path in ["b.txt", "d", "d/x", "d/y/z", "e/f/g", "a\u{1}", "ab", "a/k"] {
        put(&s, "w", path);
    }
    let rd = s.read();
    let page = rd.list_children(&inc, None, None, 100).unwrap();
    let names: Vec<(&str, bool, bool)> = page
        .items
        .iter()
        .map(|c| (c.name.as_str(), c.file.is_some(), c.is_dir))
        .collect();
    assert_eq!(
        names,
        vec![
            ("a", false, true),
            ("a\u{1}", true, false),
            ("ab", true, false),
            ("b.txt", true, false),
            ("d", true, true),
            ("e", false, true),
        ]
    );
    assert!(!page.more);
    let sub = rd.list_children(&inc, Some(&p("d")), None, 100).unwrap();
    let names: Vec<&str> = sub.items.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["x", "y"]);
    assert!(sub.items[1].is_dir && sub.items[1].file.is_none());
    // Prefix of `a` never matches `ab` / `a\u{1}`.
    let a = rd.list_children(&inc, Some(&p("a")), None, 100).unwrap();
    assert_eq!(a.items.len(), 1);
    assert_eq!(a.items[0].name, "k");
}

#[test]
fn list_children_paginates_with_start_after() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let inc = s.create_workspace("w").unwrap().workspace.incarnation;
    for path in ["d", "d/x", "a", "c/1", "b"] {
        put(&s, "w", path);
    }
    let rd = s.read();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = rd.list_children(&inc, None, after.as_deref(), 1).unwrap();
        assert!(page.items.len() <= 1);
        for c in &page.items {
            seen.push((c.name.clone(), c.file.is_some(), c.is_dir));
        }
        after = page.items.last().map(|c| c.name.clone());
        if !page.more {
            break;
        }
    }
    assert_eq!(
        seen,
        vec![
            ("a".into(), true, false),
            ("b".into(), true, false),
            ("c".into(), false, true),
            ("d".into(), true, true),
        ]
    );
    let two = rd.list_children(&inc, None, Some("a"), 2).unwrap();
    assert!(two.more);
    assert_eq!(two.items.len(), 2);
    assert_eq!(two.items[0].name, "b");
}

#[test]
fn list_children_handles_more_than_one_engine_call() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let inc = s.create_workspace("w").unwrap().workspace.incarnation;
    for i in 0..300 {
        put(&s, "w", &format!("f{i:03}"));
        if i % 2 == 0 {
            put(&s, "w", &format!("f{i:03}/child"));
        }
    }
    let rd = s.read();
    let page = rd.list_children(&inc, None, None, 1000).unwrap();
    assert_eq!(page.items.len(), 300);
    assert!(!page.more);
    for (i, c) in page.items.iter().enumerate() {
        assert_eq!(c.name, format!("f{i:03}"));
        assert!(c.file.is_some());
        assert_eq!(c.is_dir, i % 2 == 0);
    }
    let page = rd.list_children(&inc, None, Some("f100"), 150).unwrap();
    assert_eq!(page.items.len(), 150);
    assert_eq!(page.items[0].name, "f101");
    assert!(page.more);
}

#[test]
fn scan_files_returns_canonical_key_order_with_continuation() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let inc = s.create_workspace("w").unwrap().workspace.incarnation;
    for path in ["ab", "a", "a/b", "a/b/c", "z"] {
        put(&s, "w", path);
    }
    let rd = s.read();
    let (all, more) = rd.scan_files(&inc, None, None, 10).unwrap();
    assert!(!more);
    let order: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(order, vec!["a/b/c", "a/b", "a", "ab", "z"]);
    let (first, more) = rd.scan_files(&inc, None, None, 2).unwrap();
    assert!(more);
    let (rest, more) = rd.scan_files(&inc, None, Some(&first[1].0), 10).unwrap();
    assert!(!more);
    assert_eq!(rest.len(), 3);
    assert_eq!(rest[0].0, p("a"));
    let (under, _) = rd.scan_files(&inc, Some(&p("a")), None, 10).unwrap();
    let order: Vec<&str> = under.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(order, vec!["a/b/c", "a/b"]);
    assert!(rd.has_descendants(&inc, &p("a")).unwrap());
    assert!(!rd.has_descendants(&inc, &p("ab")).unwrap());
    assert!(!rd.has_descendants(&inc, &p("a/b/c")).unwrap());
}

#[test]
fn read_at_an_older_version_sees_the_older_state() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let inc = s.create_workspace("w").unwrap().workspace.incarnation;
    let g1 = put(&s, "w", "a");
    s.publish(request(
        &s,
        "w",
        "a",
        8,
        PathCondition::Replace {
            expected_generation: g1,
        },
    ))
    .unwrap();
    let old = s.read_at(g1).unwrap();
    assert_eq!(old.version(), g1);
    assert_eq!(
        old.path_entry(&inc, &p("a")).unwrap().unwrap().generation,
        g1
    );
    assert_ne!(
        s.read()
            .path_entry(&inc, &p("a"))
            .unwrap()
            .unwrap()
            .generation,
        g1
    );
}

#[test]
fn reopen_keeps_workspaces_paths_revisions_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let (inc, entry, events) = {
        let s = open(dir.path());
        let inc = s.create_workspace("w").unwrap().workspace.incarnation;
        let r = s
            .publish(request(&s, "w", "outputs/x", 6, PathCondition::Create))
            .unwrap();
        (inc, r.entry, s.read().changes(None, 10).unwrap())
    };
    let s = open(dir.path());
    let rd = s.read();
    assert_eq!(rd.visible_workspace("w").unwrap().incarnation, inc);
    assert_eq!(
        rd.path_entry(&inc, &p("outputs/x")).unwrap().unwrap(),
        entry
    );
    assert_eq!(rd.changes(None, 10).unwrap(), events);
    assert_eq!(rd.manifest(&entry.artifact_revision_id).unwrap().len(), 1);
    // Writes keep working after reopen with the new owner epoch.
    put(&s, "w", "outputs/y");
    assert_eq!(
        s.read().visible_workspace("w").unwrap().workspace_revision,
        3
    );
}

#[test]
fn changes_resume_strictly_after_a_position() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.create_workspace("w").unwrap();
    put(&s, "w", "a");
    put(&s, "w", "b");
    let all = s.read().changes(None, 100).unwrap();
    assert_eq!(all.len(), 3);
    let after = s.read().changes(Some((all[0].0, all[0].1)), 100).unwrap();
    assert_eq!(after, all[1..].to_vec());
    let one = s.read().changes(None, 1).unwrap();
    assert_eq!(one, all[..1].to_vec());
}

#[test]
fn interrupted_initialization_at_version_zero_is_completed() {
    if engine::holt_only("holt creates trees one by one before the initializing commit") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    {
        let db = holt::Db::open(dir.path(), holt::Options::default()).unwrap();
        for f in &Family::ALL[..5] {
            db.create_tree(f.name(), f.tag(), f.versioned()).unwrap();
        }
        assert_eq!(db.version(), 0);
    }
    let s = open(dir.path());
    assert_eq!(s.owner_epoch(), 1);
    assert_eq!(engine::registry(&s).len(), 26);
    assert_eq!(engine::version(&s), 1);
}

#[test]
fn concurrent_publishers_rebuild_on_stale_read_versions() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<MetaShard>();
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let inc = s.create_workspace("w").unwrap().workspace.incarnation;
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    put(&s, "w", &format!("t{t}/f{i}"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let (all, more) = s.read().scan_files(&inc, None, None, 100).unwrap();
    assert!(!more);
    assert_eq!(all.len(), 20);
    let mut generations: Vec<u64> = all.iter().map(|(_, e)| e.generation).collect();
    generations.sort_unstable();
    generations.dedup();
    assert_eq!(
        generations.len(),
        20,
        "generations are unique commit versions"
    );
    assert_eq!(
        s.read().visible_workspace("w").unwrap().workspace_revision,
        21
    );
}
