//! Durable commits, tags, lineage, retirement and find (docs/metadata-format.md "Commit Closure";
//! docs/workbench.md "commit" and "find") through the SDK and the Workbench facade.

mod commits_support;

use commits_support::{assert_reference_counts_match_rows, row_count};
use meta::ops::tag::TagCondition;
use nokv::commit::CommitRequest;
use nokv::workbench::{canonical, Workbench};
use nokv::{Client, ClientOptions};
use nokv_tests::{err, ok};
use serde_json::{json, Value};

fn store_with_root(root: &str) -> (tempfile::TempDir, Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = Client::open_with(
        dir.path().join("store"),
        ClientOptions {
            presentation_root: Some(root.to_owned()),
            ..Default::default()
        },
    )
    .expect("open");
    (dir, client)
}

fn setup() -> (tempfile::TempDir, Workbench) {
    let (t, client) = store_with_root("/agents/local/wb");
    (t, Workbench::new(client))
}

fn put(wb: &Workbench, id: &str, section: &str, path: &str, text: &str) {
    ok(wb.call(
        "workbench_put_file",
        &json!({"id": id, "section": section, "path": path, "text": text}),
    ));
}

fn digest(byte: u8) -> String {
    format!("sha256:{}", format!("{byte:02x}").repeat(32))
}

fn commit(wb: &Workbench, id: &str, manifest: Value, byte: u8, replace: bool) -> Value {
    wb.call(
        "workbench_commit",
        &json!({"id": id, "manifest": manifest, "content_digest_uri": digest(byte), "replace": replace}),
    )
}

#[test]
fn real_commit_path_reproduces_the_contract_test_vector_byte_for_byte() {
    let (_t, client) = store_with_root("/agents/test/wb");
    client.create_workbench("wb-main").unwrap();
    let manifest = json!({"task": "ptycho", "model": "viking"});
    let receipt = client
        .commit_with_clock(
            &CommitRequest {
                workbench_id: "wb-main".into(),
                manifest: manifest.clone(),
                content_digest_uri: digest(1),
                replace: false,
                parents: Vec::new(),
            },
            1_700_000_000,
        )
        .unwrap();
    assert!(receipt.manifest_digest_uri.starts_with("sha256:23312ff4"));
    assert!(receipt.commit_identity.starts_with("9f3a0a15"));
    assert_eq!(receipt.size_bytes, 472);
    assert!(receipt.envelope_digest_uri.starts_with("sha256:dd01f7d8"));
    assert_eq!(
        receipt.path,
        "/agents/test/wb/wb-main/metadata/run_manifest.json"
    );
    let published = client
        .read_all("wb-main", "metadata/run_manifest.json")
        .unwrap();
    let expected = canonical::run_manifest_envelope(
        "wb-main",
        "/agents/test/wb/wb-main",
        &digest(1),
        &manifest,
        1_700_000_000,
    )
    .unwrap();
    assert_eq!(published, expected);
    assert_eq!(published.len(), 472);
    assert!(canonical::sha256_uri(&published).starts_with("sha256:dd01f7d8"));
    let entry = client
        .stat("wb-main", "metadata/run_manifest.json")
        .unwrap();
    assert_eq!(entry.content_type, "application/json");
    assert_eq!(entry.generation, receipt.generation);
    // The commit id is the identity, and the head names it.
    let head = client.commit_head("wb-main").unwrap().unwrap();
    assert_eq!(head.commit_id, receipt.commit_identity);
    assert_eq!(head.tree_digest_uri, receipt.tree_digest_uri);
    assert_eq!(head.state, "sealed");
}

#[test]
fn commit_result_has_the_contract_fields_and_exact_retry_is_a_replay() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "run"})));
    put(&wb, "run", "outputs", "a.txt", "alpha");
    let first = ok(commit(&wb, "run", json!({"k": 1}), 1, false));
    for field in [
        "workbench_id",
        "workbench_path",
        "path",
        "size_bytes",
        "generation",
        "content_digest_uri",
        "manifest_digest_uri",
        "commit_identity",
        "envelope_digest_uri",
        "tree_digest_uri",
        "replace",
        "idempotent_replay",
    ] {
        assert!(first.get(field).is_some(), "missing {field} in {first:#}");
    }
    assert_eq!(first["idempotent_replay"], false);
    assert_eq!(
        first["path"],
        "/agents/local/wb/run/metadata/run_manifest.json"
    );
    let again = ok(commit(&wb, "run", json!({"k": 1}), 1, false));
    assert_eq!(again["idempotent_replay"], true);
    for field in [
        "generation",
        "commit_identity",
        "envelope_digest_uri",
        "tree_digest_uri",
    ] {
        assert_eq!(again[field], first[field], "{field}");
    }
}

#[test]
fn exact_retry_after_a_replacement_returns_the_original_result() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "run"})));
    put(&wb, "run", "outputs", "a.txt", "alpha");
    let a = ok(commit(&wb, "run", json!({"v": "a"}), 1, false));
    let b = ok(commit(&wb, "run", json!({"v": "b"}), 2, true));
    assert_ne!(a["commit_identity"], b["commit_identity"]);
    assert!(b["generation"].as_u64() > a["generation"].as_u64());
    let replay = ok(commit(&wb, "run", json!({"v": "a"}), 1, false));
    assert_eq!(replay["idempotent_replay"], true);
    assert_eq!(replay["generation"], a["generation"]);
    assert_eq!(replay["commit_identity"], a["commit_identity"]);
    // The head and the published manifest still belong to the replacement.
    let head = wb.client().commit_head("run").unwrap().unwrap();
    assert_eq!(Value::from(head.commit_id), b["commit_identity"]);
    let stat = ok(wb.call(
        "workbench_stat",
        &json!({"id":"run","section":"metadata","path":"run_manifest.json"}),
    ));
    assert_eq!(stat["card"]["generation"], b["generation"]);
    assert_reference_counts_match_rows(wb.client());
}

#[test]
fn different_identity_without_replace_is_a_workbench_commit_conflict() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "run"})));
    let a = ok(commit(&wb, "run", json!({"v": "a"}), 1, false));
    let before = wb.client().meta().version().unwrap();
    let e = err(
        commit(&wb, "run", json!({"v": "b"}), 1, false),
        "WorkbenchCommitConflict",
    );
    assert_eq!(
        e["details"]["current_commit_identity"],
        a["commit_identity"]
    );
    assert_eq!(
        wb.client().meta().version().unwrap(),
        before,
        "nothing written"
    );
    // The same identity with another replace bit is not an exact retry.
    err(
        commit(&wb, "run", json!({"v": "a"}), 1, true),
        "WorkbenchCommitProtocolMismatch",
    );
    err(commit(&wb, "missing", json!({}), 1, false), "NotFound");
    err(
        wb.call(
            "workbench_commit",
            &json!({"id":"run","manifest":{},"content_digest_uri":"sha256:XYZ"}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn commit_members_and_references_match_their_seals() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "run"})));
    for i in 0..150 {
        put(
            &wb,
            "run",
            "outputs",
            &format!("f{i:03}.txt"),
            &format!("body {i}"),
        );
    }
    put(&wb, "run", "input", "z/data.csv", "a,b\n1,2\n");
    let c = ok(commit(&wb, "run", json!({"n": 151}), 3, false));
    let client = wb.client();
    let id = meta::ids::CommitId::from_hex(c["commit_identity"].as_str().unwrap()).unwrap();
    let seals = meta::ops::commit::closure_seals(client.meta(), &id).unwrap();
    let info = client.commit_info(&id.to_hex()).unwrap().unwrap();
    // 151 files + the virtual run manifest, spread over several member batches.
    assert_eq!(seals.member_count, 152);
    assert_eq!(info.member_count, 152);
    assert_eq!(seals.revision_count, info.unique_revision_count);
    assert_eq!(seals.revision_count, 152);
    assert_eq!(
        info.tree_digest_uri,
        format!("sha256:{}", objstore::hex_lower(&seals.member_digest))
    );
    assert_eq!(c["tree_digest_uri"], Value::from(info.tree_digest_uri));
    let kinds = assert_reference_counts_match_rows(client);
    assert_eq!(
        kinds.get(&2).copied(),
        Some(152),
        "one Commit ref per unique revision"
    );
    // No build leftovers: the history hold is released.
    assert_eq!(row_count(client, "history_hold"), 0);
}

#[test]
fn replaced_run_manifest_keeps_its_commit_reference() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "run"})));
    put(&wb, "run", "outputs", "a.txt", "alpha");
    ok(commit(&wb, "run", json!({"v": 1}), 1, false));
    put(&wb, "run", "outputs", "b.txt", "beta");
    ok(commit(&wb, "run", json!({"v": 2}), 2, true));
    let client = wb.client();
    let kinds = assert_reference_counts_match_rows(client);
    // Commit refs: first commit {a, m1}; second {a, b, m2}.
    assert_eq!(kinds.get(&2).copied(), Some(5));
    // The old manifest revision lost only its path reference.
    assert_eq!(row_count(client, "gc_candidate"), 0);
}

#[test]
fn tags_are_cas_protected_and_never_retire_commits() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "data"})));
    put(&wb, "data", "input", "penguins.csv", "species\nAdelie\n");
    let c1 = ok(commit(&wb, "data", json!({"v": 1}), 1, false));
    let c1 = c1["commit_identity"].as_str().unwrap().to_owned();
    let client = wb.client();
    let t = client
        .set_tag("data", "penguins-v1", &c1, TagCondition::Absent)
        .unwrap();
    assert_eq!(t.commit_id.to_hex(), c1);
    assert_eq!(client.commit_info(&c1).unwrap().unwrap().consumer_count, 2);
    // Create-only again conflicts; a stale generation conflicts.
    assert!(matches!(
        client.set_tag("data", "penguins-v1", &c1, TagCondition::Absent),
        Err(nokv::Error::Meta(meta::Error::TagConflict { .. }))
    ));
    put(&wb, "data", "input", "more.csv", "x\n");
    let c2 = ok(commit(&wb, "data", json!({"v": 2}), 2, true));
    let c2 = c2["commit_identity"].as_str().unwrap().to_owned();
    assert!(matches!(
        client.set_tag(
            "data",
            "penguins-v1",
            &c2,
            TagCondition::Generation(t.tag_generation + 1)
        ),
        Err(nokv::Error::Meta(meta::Error::TagConflict { .. }))
    ));
    let moved = client
        .set_tag(
            "data",
            "penguins-v1",
            &c2,
            TagCondition::Generation(t.tag_generation),
        )
        .unwrap();
    assert!(moved.tag_generation > t.tag_generation);
    // c1 lost its head (replaced) and its tag (moved) but stays Sealed.
    let info1 = client.commit_info(&c1).unwrap().unwrap();
    assert_eq!(info1.state, "sealed");
    assert_eq!(info1.consumer_count, 0);
    assert_eq!(
        client
            .get_tag("data", "penguins-v1")
            .unwrap()
            .unwrap()
            .commit_id
            .to_hex(),
        c2
    );
    client
        .set_tag("data", "old", &c1, TagCondition::Any)
        .unwrap();
    let names: Vec<String> = client
        .list_tags("data")
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, vec!["old", "penguins-v1"]);
    let removed = client.delete_tag("data", "old", TagCondition::Any).unwrap();
    assert!(removed.is_some());
    assert!(client.get_tag("data", "old").unwrap().is_none());
    assert_eq!(client.commit_info(&c1).unwrap().unwrap().state, "sealed");
    assert_reference_counts_match_rows(client);
}

#[test]
fn retirement_requires_zero_consumers_and_releases_the_closure() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "data"})));
    put(&wb, "data", "input", "a.csv", "a\n");
    let c1 = ok(commit(&wb, "data", json!({"v": 1}), 1, false))["commit_identity"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = wb.client();
    // The head consumes it.
    assert!(matches!(
        client.retire_commit(&c1),
        Err(nokv::Error::Meta(meta::Error::CommitLifecycle { .. }))
    ));
    client.set_tag("data", "t", &c1, TagCondition::Any).unwrap();
    ok(commit(&wb, "data", json!({"v": 2}), 2, true));
    // Still tagged.
    assert!(client.retire_commit(&c1).is_err());
    client.delete_tag("data", "t", TagCondition::Any).unwrap();
    let r = client.retire_commit(&c1).unwrap();
    assert!(!r.already_retired);
    assert_eq!(client.commit_info(&c1).unwrap().unwrap().state, "retired");
    let again = client.retire_commit(&c1).unwrap();
    assert!(again.already_retired);
    assert_eq!(again.commit_version, r.commit_version);
    // A retired commit cannot be tagged.
    assert!(client.set_tag("data", "t", &c1, TagCondition::Any).is_err());
    let kinds = assert_reference_counts_match_rows(client);
    // Only the current commit's {a, m2} Commit refs remain.
    assert_eq!(kinds.get(&2).copied(), Some(2));
    // The first manifest revision has no reference left.
    assert_eq!(row_count(client, "gc_candidate"), 1);
}

#[test]
fn lineage_parents_are_recorded_and_consumer_counted() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "input"})));
    put(&wb, "input", "input", "penguins.csv", "species\n");
    let input = ok(commit(
        &wb,
        "input",
        json!({"dataset": "penguins"}),
        1,
        false,
    ))["commit_identity"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = wb.client();
    ok(wb.call("workbench_create", &json!({"id": "run-1"})));
    put(&wb, "run-1", "outputs", "m.json", "{}");
    let run = client
        .commit(&CommitRequest {
            workbench_id: "run-1".into(),
            manifest: json!({"run": 1}),
            content_digest_uri: digest(9),
            replace: false,
            parents: vec![input.clone(), input.clone()],
        })
        .unwrap();
    assert_eq!(run.parents, vec![input.clone()]);
    let run_info = client.commit_info(&run.commit_identity).unwrap().unwrap();
    assert_eq!(run_info.parents, vec![input.clone()]);
    let parent = client.commit_info(&input).unwrap().unwrap();
    assert_eq!(parent.consumer_count, 2, "head + child commit");
    // A parent that does not exist is refused before anything is written.
    let missing = "ab".repeat(32);
    ok(wb.call("workbench_create", &json!({"id": "run-2"})));
    let e = client.commit(&CommitRequest {
        workbench_id: "run-2".into(),
        manifest: json!({}),
        content_digest_uri: digest(9),
        replace: false,
        parents: vec![missing],
    });
    assert!(matches!(
        e,
        Err(nokv::Error::Meta(meta::Error::CommitNotFound { .. }))
    ));
    assert!(client.commit_head("run-2").unwrap().is_none());
    // Retiring the child releases its parent consumer.
    ok(commit(&wb, "run-1", json!({"run": "again"}), 8, true));
    client.retire_commit(&run.commit_identity).unwrap();
    assert_eq!(
        client.commit_info(&input).unwrap().unwrap().consumer_count,
        1
    );
    assert_reference_counts_match_rows(client);
}

#[test]
fn find_filters_committed_workbenches_and_matches_manifest_literals() {
    let (_t, wb) = setup();
    for (id, species) in [("run-adelie", "Adelie"), ("run-gentoo", "Gentoo")] {
        ok(wb.call("workbench_create", &json!({"id": id})));
        put(&wb, id, "outputs", "r.txt", species);
        ok(commit(
            &wb,
            id,
            json!({"species": species, "epochs": 3}),
            4,
            false,
        ));
    }
    ok(wb.call("workbench_create", &json!({"id": "scratch"})));
    let all = ok(wb.call("workbench_find", &json!({})));
    assert_eq!(all["match_count"], 3);
    assert_eq!(all["truncated"], false);
    assert_eq!(all["path"], "/agents/local/wb");
    let committed = ok(wb.call("workbench_find", &json!({"committed": true})));
    assert_eq!(committed["match_count"], 2);
    for m in committed["matches"].as_array().unwrap() {
        assert_eq!(m["committed"], true);
        assert_eq!(m["commit_identity_verified"], true);
        assert!(m["manifest_digest_uri"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"));
        assert_eq!(m["manifest"], Value::Null);
    }
    let uncommitted = ok(wb.call("workbench_find", &json!({"committed": false})));
    assert_eq!(uncommitted["matches"][0]["workbench_id"], "scratch");
    assert_eq!(uncommitted["matches"][0]["manifest_path"], Value::Null);
    let gentoo = ok(wb.call(
        "workbench_find",
        &json!({"manifest_pattern": "GENTOO", "include_manifest": true}),
    ));
    assert_eq!(gentoo["match_count"], 1);
    assert_eq!(gentoo["matches"][0]["workbench_id"], "run-gentoo");
    // `manifest` is the whole run-manifest envelope; the user manifest is its `manifest`.
    let envelope = &gentoo["matches"][0]["manifest"];
    assert_eq!(envelope["manifest"]["species"], "Gentoo");
    assert_eq!(envelope["schema"], "nokv.workbench.run_manifest.v1");
    assert_eq!(envelope["workbench_id"], "run-gentoo");
    assert_eq!(
        envelope["commit_identity"],
        gentoo["matches"][0]["commit_identity"]
    );
    let summary = &gentoo["matches"][0]["manifest_summary"];
    assert_eq!(summary["schema"], "nokv.workbench.run_manifest.v1");
    assert_eq!(summary["workbench_id"], "run-gentoo");
    assert_eq!(summary["commit_identity"], envelope["commit_identity"]);
    assert_eq!(
        summary["content_digest_uri"],
        envelope["content_digest_uri"]
    );
    assert_eq!(
        summary["manifest_digest_uri"],
        envelope["manifest_digest_uri"]
    );
    assert_eq!(
        summary["committed_at_unix_seconds"],
        envelope["committed_at_unix_seconds"]
    );
    let mut keys: Vec<String> = envelope["manifest"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(summary["manifest_keys"], json!(keys));
    assert_eq!(
        summary["manifest_task"],
        Value::Null,
        "no string `task` member"
    );
    // Pagination over one read version.
    let p1 = ok(wb.call("workbench_find", &json!({"committed": true, "limit": 1})));
    assert_eq!(p1["match_count"], 1);
    assert_eq!(p1["truncated"], true);
    let cursor = p1["next_cursor"].as_str().unwrap().to_owned();
    let p2 = ok(wb.call(
        "workbench_find",
        &json!({"committed": true, "limit": 1, "cursor": cursor}),
    ));
    assert_eq!(p2["match_count"], 1);
    assert_ne!(
        p2["matches"][0]["workbench_id"],
        p1["matches"][0]["workbench_id"]
    );
    assert_eq!(p2["truncated"], false, "the last match ends the listing");
    assert_eq!(p2["next_cursor"], Value::Null);
    // A cursor is bound to its request.
    err(
        wb.call(
            "workbench_find",
            &json!({"committed": false, "cursor": p1["next_cursor"]}),
        ),
        "InvalidArguments",
    );
}

#[test]
fn aborted_build_releases_every_reference_and_replays_its_terminal_error() {
    use meta::codec::{BuildCommitPhase, ManifestRow, OperationResult};
    use meta::ids::CommitId;
    use meta::ops::commit::{self as build, BuildCommitRequest, StagedManifest, StepOutcome};

    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "input"})));
    put(&wb, "input", "input", "d.csv", "x\n");
    let parent = ok(commit(&wb, "input", json!({}), 1, false))["commit_identity"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(wb.call("workbench_create", &json!({"id": "run"})));
    for i in 0..70 {
        put(&wb, "run", "outputs", &format!("f{i:02}"), &format!("{i}"));
    }
    let client = wb.client();
    let shard = client.meta();
    let refs_before = assert_reference_counts_match_rows(client);
    let req = BuildCommitRequest {
        workbench_id: "run".into(),
        commit_id: CommitId([7; 32]),
        projection_input_digest: [9; 32],
        content_digest_uri: digest(1),
        manifest_digest_uri: digest(2),
        replace: false,
        producer: "test".into(),
        lineage: Vec::new(),
        parents: vec![CommitId::from_hex(&parent).unwrap()],
        observed_unix_seconds: 1,
    };
    let h = build::begin(shard, &req).unwrap();
    assert!(h.created);
    assert_eq!(row_count(client, "history_hold"), 1);
    assert_eq!(
        build::step(shard, &h.operation_id).unwrap(),
        StepOutcome::NeedsManifest
    );
    let rev = build::staged_manifest_revision(&shard.root_id(), &h.operation_id);
    let staged = StagedManifest {
        revision_id: rev,
        logical_size: 2,
        body_digest_uri: digest(3),
        content_type: "application/json".into(),
        manifest: vec![ManifestRow {
            object_index: 0,
            physical_owner_revision: rev,
            physical_object_index: 0,
            object_key: "unused".into(),
            logical_offset: 0,
            object_offset: 0,
            length: 2,
            digest_uri: digest(3),
            append_segment: None,
        }],
    };
    build::stage_manifest(shard, &h.operation_id, &staged).unwrap();
    // Two member batches, then the parent consumer.
    for expected in ["member-batch", "member-batch", "parents"] {
        assert_eq!(
            build::step(shard, &h.operation_id).unwrap(),
            StepOutcome::Advanced(expected)
        );
    }
    assert_eq!(
        client.commit_info(&parent).unwrap().unwrap().consumer_count,
        2
    );
    // A partial build is invisible: no commit, no head, no manifest path.
    assert!(client.commit_head("run").unwrap().is_none());
    assert!(client.stat("run", "metadata/run_manifest.json").is_err());
    build::request_abort(shard, &h.operation_id, "InvalidState", "test abort").unwrap();
    let mut steps = 0;
    while build::step(shard, &h.operation_id).unwrap() != StepOutcome::Terminal {
        steps += 1;
        assert!(steps < 100);
    }
    let op = build::read_operation(shard, &h.operation_id)
        .unwrap()
        .unwrap();
    assert_eq!(op.phase, BuildCommitPhase::Cleaned);
    assert!(matches!(op.result, OperationResult::Failed(ref t) if t.code == "InvalidState"));
    assert_eq!(
        client.commit_info(&parent).unwrap().unwrap().consumer_count,
        1
    );
    assert_eq!(row_count(client, "history_hold"), 0);
    assert_eq!(
        row_count(client, "commit_member"),
        2,
        "only the input commit's members"
    );
    let refs_after = assert_reference_counts_match_rows(client);
    assert_eq!(
        refs_after, refs_before,
        "every Commit reference of the build released"
    );
    // The exact retry finds the terminal operation.
    let again = build::begin(shard, &req).unwrap();
    assert!(!again.created);
    assert_eq!(again.operation.phase, BuildCommitPhase::Cleaned);
    // Another replace bit is an input mismatch.
    let mut other = req.clone();
    other.replace = true;
    assert!(matches!(
        build::begin(shard, &other),
        Err(meta::Error::OperationInputMismatch { .. })
    ));
}

#[test]
fn a_manifest_over_the_payload_bound_is_payload_too_large_and_commits_nothing() {
    let (_t, wb) = setup();
    ok(wb.call("workbench_create", &json!({"id": "big"})));
    put(&wb, "big", "input", "a.txt", "a");
    let before = wb.client().meta().version().unwrap();
    let huge = "x".repeat(nokv::workbench::payload::MAX_PAYLOAD_BYTES as usize);
    let e = err(
        commit(&wb, "big", json!({"blob": huge}), 7, false),
        "PayloadTooLarge",
    );
    assert!(e["message"]
        .as_str()
        .unwrap()
        .contains("canonical manifest"));
    assert_eq!(
        wb.client().meta().version().unwrap(),
        before,
        "nothing was written"
    );
    // A manifest under the bound commits and stays findable with a verified identity.
    ok(commit(&wb, "big", json!({"blob": "small"}), 7, false));
    let found = ok(wb.call(
        "workbench_find",
        &json!({"committed": true, "manifest_pattern": "small"}),
    ));
    assert_eq!(found["matches"][0]["commit_identity_verified"], true);
}
