//! Golden-byte tests for every durable key and value codec of docs/metadata-format.md: each sample record must
//! encode to exactly the hand-written bytes in `tests/fixtures/<family>.hex` and decode back from
//! them; unknown value versions, unknown enum discriminants, unknown framing tags, every
//! truncation and a trailing byte must fail closed with `Error::Codec`. Also checks the complete
//! discriminant registry and the value-version registry.

#[path = "fixtures/samples.rs"]
mod samples;

use std::fmt::Debug;

use meta::codec::*;
use meta::ids::OperationId;
use meta::index::IndexValue;
use meta::Error;
use samples::*;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn expect_codec<T: Debug>(r: meta::Result<T>, what: &str) {
    match r {
        Err(Error::Codec { .. }) => {}
        other => panic!("{what}: expected Error::Codec, got {other:?}"),
    }
}

/// Mutations every key or value must refuse: enum bytes at 0 and 0xff, framing bytes at 0xff,
/// every strict prefix, and one trailing byte.
fn reject_mutations<T: Debug>(
    name: &str,
    sec: &Section,
    decode: &dyn Fn(&[u8]) -> meta::Result<T>,
) {
    for &at in &sec.enums {
        for bad in [0x00, 0xff] {
            let mut b = sec.bytes.clone();
            b[at] = bad;
            expect_codec(decode(&b), &format!("{name}: enum byte {at} = {bad:#04x}"));
        }
    }
    for &at in &sec.tags {
        let mut b = sec.bytes.clone();
        b[at] = 0xff;
        expect_codec(decode(&b), &format!("{name}: framing byte {at} = 0xff"));
    }
    for cut in 0..sec.bytes.len() {
        expect_codec(
            decode(&sec.bytes[..cut]),
            &format!("{name}: truncated to {cut}"),
        );
    }
    for extra in [0x00, 0x01, 0xff] {
        let mut b = sec.bytes.clone();
        b.push(extra);
        expect_codec(decode(&b), &format!("{name}: trailing {extra:#04x}"));
    }
}

fn check_key<T: PartialEq + Debug>(
    file: &str,
    section: &str,
    sample: &T,
    encoded: Vec<u8>,
    decode: impl Fn(&[u8]) -> meta::Result<T>,
) {
    let f = load(file);
    let sec = f
        .get(section)
        .unwrap_or_else(|| panic!("{file}.hex has no @{section}"));
    let name = format!("{file}@{section}");
    assert_eq!(hex(&encoded), hex(&sec.bytes), "{name}: encode != fixture");
    assert_eq!(
        &decode(&sec.bytes).unwrap(),
        sample,
        "{name}: decode != sample"
    );
    reject_mutations(&name, sec, &decode);
}

fn check_value<T: PartialEq + Debug>(
    file: &str,
    section: &str,
    sample: &T,
    encoded: Vec<u8>,
    decode: impl Fn(&[u8]) -> meta::Result<T>,
) {
    check_key(file, section, sample, encoded, &decode);
    let f = load(file);
    let sec = &f[section];
    let version = u16::from_be_bytes([sec.bytes[0], sec.bytes[1]]);
    for bad in [0, version.wrapping_sub(1), version + 1, u16::MAX] {
        if bad == version {
            continue;
        }
        let mut b = sec.bytes.clone();
        b[..2].copy_from_slice(&bad.to_be_bytes());
        expect_codec(decode(&b), &format!("{file}@{section}: version {bad}"));
    }
}

#[test]
fn workspace_current_matches_golden_bytes() {
    let k = workspace_current_key();
    check_key(
        "workspace_current",
        "key",
        &k,
        k.encode(),
        WorkspaceCurrentKey::decode,
    );
    let v = workspace_current();
    check_value(
        "workspace_current",
        "value",
        &v,
        v.encode(),
        WorkspaceCurrent::decode,
    );
    let v = workspace_current_expired();
    check_value(
        "workspace_current",
        "value.expired",
        &v,
        v.encode(),
        WorkspaceCurrent::decode,
    );
}

#[test]
fn workspace_incarnation_claim_matches_golden_bytes() {
    let k = claim_key();
    check_key(
        "workspace_incarnation_claim",
        "key",
        &k,
        k.encode(),
        WorkspaceIncarnationClaimKey::decode,
    );
    let v = claim();
    check_value(
        "workspace_incarnation_claim",
        "value",
        &v,
        v.encode(),
        WorkspaceIncarnationClaim::decode,
    );
}

#[test]
fn path_current_matches_golden_bytes() {
    let k = path_current_key();
    check_key(
        "path_current",
        "key",
        &k,
        k.encode(),
        PathCurrentKey::decode,
    );
    let v = path_entry();
    check_value("path_current", "value", &v, v.encode(), PathEntry::decode);
}

#[test]
fn artifact_revision_matches_golden_bytes() {
    let k = artifact_revision_key();
    check_key(
        "artifact_revision",
        "key",
        &k,
        k.encode(),
        ArtifactRevisionKey::decode,
    );
    let v = artifact_revision();
    check_value(
        "artifact_revision",
        "value",
        &v,
        v.encode(),
        ArtifactRevision::decode,
    );
}

#[test]
fn artifact_manifest_matches_golden_bytes() {
    let k = manifest_key();
    check_key(
        "artifact_manifest",
        "key",
        &k,
        k.encode(),
        ArtifactManifestKey::decode,
    );
    let v = manifest_row();
    check_value("artifact_manifest", "value", &v, v.encode_value(), |b| {
        ManifestRow::decode_value(7, b)
    });
}

#[test]
fn revision_ref_matches_golden_bytes_for_every_owner_kind() {
    for (section, k) in [
        ("key.path", revision_ref_key_path()),
        ("key.commit", revision_ref_key_commit()),
        ("key.revision_dependency", revision_ref_key_dependency()),
    ] {
        check_key(
            "revision_ref",
            section,
            &k,
            k.encode(),
            RevisionRefKey::decode,
        );
        let owner = k.owner.owner_id_bytes();
        assert_eq!(
            RefOwner::from_owner_id_bytes(k.owner.kind(), &owner).unwrap(),
            k.owner
        );
    }
    let v = revision_ref();
    check_value("revision_ref", "value", &v, v.encode(), RevisionRef::decode);
}

#[test]
fn commit_matches_golden_bytes() {
    let k = commit_key();
    check_key("commit", "key", &k, k.encode(), CommitKey::decode);
    let v = commit();
    check_value("commit", "value", &v, v.encode(), Commit::decode);
    assert_eq!(v.tree_digest_uri(), format!("sha256:{}", "d1".repeat(32)));
    assert_eq!(v.parent_count(), 2);
    // Version 3 appends the build's source read version; version 2 records stay readable.
    let v3 = Commit {
        source_read_version: Some(42),
        ..commit()
    };
    check_value("commit", "value.v3", &v3, v3.encode(), Commit::decode);
}

#[test]
fn commit_parents_must_be_strictly_ascending() {
    let mut v = commit();
    v.parents = vec![c3(), c2()];
    expect_codec(Commit::decode(&v.encode()), "descending parents");
    v.parents = vec![c2(), c2()];
    expect_codec(Commit::decode(&v.encode()), "duplicate parents");
}

#[test]
fn commit_member_matches_golden_bytes() {
    let k = commit_member_key();
    check_key(
        "commit_member",
        "key",
        &k,
        k.encode(),
        CommitMemberKey::decode,
    );
    let v = commit_member();
    check_value(
        "commit_member",
        "value",
        &v,
        v.encode(),
        CommitMember::decode,
    );
}

#[test]
fn workbench_commit_head_matches_golden_bytes() {
    let k = head_key();
    check_key(
        "workbench_commit_head",
        "key",
        &k,
        k.encode(),
        WorkbenchCommitHeadKey::decode,
    );
    let v = head();
    check_value(
        "workbench_commit_head",
        "value",
        &v,
        v.encode(),
        WorkbenchCommitHead::decode,
    );
}

#[test]
fn tag_matches_golden_bytes() {
    let k = tag_key();
    check_key("tag", "key", &k, k.encode(), TagKey::decode);
    let v = tag();
    check_value("tag", "value", &v, v.encode(), Tag::decode);
}

#[test]
fn snapshot_ref_matches_golden_bytes() {
    let k = snapshot_ref_key();
    check_key(
        "snapshot_ref",
        "key",
        &k,
        k.encode(),
        SnapshotRefKey::decode,
    );
    let v = snapshot_ref();
    check_value("snapshot_ref", "value", &v, v.encode(), SnapshotRef::decode);
    // Version 2: a row retired with an annotation appends the retire annotation.
    let v = snapshot_ref_retired();
    check_value(
        "snapshot_ref",
        "value_v2",
        &v,
        v.encode(),
        SnapshotRef::decode,
    );
}

#[test]
fn snapshot_alias_matches_golden_bytes() {
    let k = snapshot_alias_key();
    check_key(
        "snapshot_alias",
        "key",
        &k,
        k.encode(),
        SnapshotAliasKey::decode,
    );
    let v = snapshot_alias();
    check_value(
        "snapshot_alias",
        "value",
        &v,
        v.encode(),
        SnapshotAlias::decode,
    );
}

#[test]
fn history_hold_matches_golden_bytes_for_every_hold_kind() {
    for (section, hold) in [
        ("key.snapshot", HoldId::Snapshot(meta::ids::SnapshotId(42))),
        ("key.build_commit", HoldId::BuildCommit(op())),
        ("key.restore", HoldId::Restore(op2())),
    ] {
        let k = hold_key(hold);
        check_key(
            "history_hold",
            section,
            &k,
            k.encode(),
            HistoryHoldKey::decode,
        );
    }
    let v = history_hold();
    check_value("history_hold", "value", &v, v.encode(), HistoryHold::decode);
}

#[test]
fn commit_consumer_matches_golden_bytes_for_every_owner_kind() {
    for (section, owner) in [
        (
            "key.workbench_head",
            ConsumerOwner::WorkbenchHead { incarnation: inc() },
        ),
        (
            "key.tag",
            ConsumerOwner::Tag {
                incarnation: inc(),
                tag: meta::ids::TagName::new("v1").unwrap(),
            },
        ),
        ("key.lease", ConsumerOwner::Lease { operation_id: op() }),
        (
            "key.child_commit",
            ConsumerOwner::ChildCommit { child: c2() },
        ),
    ] {
        let k = consumer_key(owner);
        check_key(
            "commit_consumer",
            section,
            &k,
            k.encode(),
            CommitConsumerKey::decode,
        );
        let id = k.owner.owner_id_bytes();
        assert_eq!(
            ConsumerOwner::from_owner_id_bytes(k.owner.kind(), &id).unwrap(),
            k.owner
        );
    }
    let v = consumer();
    check_value(
        "commit_consumer",
        "value",
        &v,
        v.encode(),
        CommitConsumer::decode,
    );
}

#[test]
fn secondary_index_matches_golden_bytes() {
    let k = secondary_index_key();
    check_key(
        "secondary_index",
        "key",
        &k,
        k.encode().unwrap(),
        SecondaryIndexKey::decode,
    );
    let v = secondary_index_entry();
    check_value(
        "secondary_index",
        "value",
        &v,
        v.encode(),
        SecondaryIndexEntry::decode,
    );
}

#[test]
fn index_values_match_golden_bytes() {
    let f = load("index_value");
    let cases = [
        ("null", IndexValue::Null),
        ("false", IndexValue::Bool(false)),
        ("true", IndexValue::Bool(true)),
        ("int_neg_5", IndexValue::Int(-5)),
        ("int_min", IndexValue::Int(i64::MIN)),
        ("int_zero", IndexValue::Int(0)),
        ("uint_zero", IndexValue::UInt(0)),
        ("float_zero", IndexValue::float(-0.0).unwrap()),
        ("uint_4096", IndexValue::UInt(4096)),
        ("uint_max", IndexValue::UInt(u64::MAX)),
        ("float_half", IndexValue::float(0.5).unwrap()),
        ("float_neg_1_5", IndexValue::float(-1.5).unwrap()),
        (
            "float_min_subnormal",
            IndexValue::float(f64::from_bits(1)).unwrap(),
        ),
        ("float_max", IndexValue::float(f64::MAX).unwrap()),
        (
            "timestamp",
            IndexValue::Timestamp(meta::index::Timestamp::new(1, 500).unwrap()),
        ),
        (
            "timestamp_neg",
            IndexValue::Timestamp(meta::index::Timestamp::new(-1, 0).unwrap()),
        ),
        ("string", IndexValue::String("a\0b".into())),
        ("string_empty", IndexValue::String(String::new())),
        ("bytes", IndexValue::Bytes(vec![0x00, 0xff])),
    ];
    assert_eq!(cases.len(), f.len(), "every fixture section has a case");
    for (section, v) in cases {
        check_key(
            "index_value",
            section,
            &v,
            v.encode().unwrap(),
            IndexValue::decode,
        );
    }
    // Unknown codec version and type bytes.
    expect_codec(IndexValue::decode(&[2, 0x10]), "codec version 2");
    expect_codec(IndexValue::decode(&[1, 0x11]), "type 0x11");
    expect_codec(IndexValue::decode(&[1, 0x31, 0x04]), "numeric subtype 4");
}

#[test]
fn change_event_matches_golden_bytes() {
    let k = change_event_key();
    check_key(
        "change_event",
        "key",
        &k,
        k.encode(),
        ChangeEventKey::decode,
    );
    let v = change_event();
    check_value("change_event", "value", &v, v.encode(), ChangeEvent::decode);
}

#[test]
fn operation_matches_golden_bytes_for_every_kind() {
    for (section, k) in [
        ("key.publish", operation_key(OperationKind::Publish, op())),
        ("key.restore", operation_key(OperationKind::Restore, op2())),
    ] {
        check_key("operation", section, &k, k.encode(), OperationKey::decode);
    }
    for (section, v) in [
        ("value.publish", publish_operation()),
        ("value.build_commit", build_commit_operation()),
        ("value.restore", restore_operation()),
        ("value.restore_commit", restore_commit_operation()),
        ("value.commit_retire", commit_retire_operation()),
        ("value.gc", gc_operation()),
    ] {
        check_value("operation", section, &v, v.encode(), Operation::decode);
        let kind = v.kind();
        check_value("operation", section, &v, v.encode(), |b| {
            Operation::decode_for_kind(kind, b)
        });
    }
}

#[test]
fn operation_values_carry_the_seed_versions_and_refuse_a_foreign_kind() {
    assert_eq!(&build_commit_operation().encode()[..3], &[0, 5, 2]);
    assert_eq!(&restore_operation().encode()[..3], &[0, 4, 3]);
    assert_eq!(&publish_operation().encode()[..3], &[0, 1, 1]);
    assert_eq!(&commit_retire_operation().encode()[..3], &[0, 1, 4]);
    assert_eq!(&gc_operation().encode()[..3], &[0, 1, 5]);
    // A BuildCommit value under a Restore key.
    expect_codec(
        Operation::decode_for_kind(OperationKind::Restore, &build_commit_operation().encode()),
        "kind mismatch",
    );
    // A Restore payload announced with the BuildCommit version 5 is refused.
    let mut b = restore_operation().encode();
    b[..2].copy_from_slice(&5u16.to_be_bytes());
    expect_codec(Operation::decode(&b), "restore at version 5");
}

#[test]
fn restore_identity_digest_binds_every_input_and_derives_the_operation_id() {
    use meta::codec::operation::restore_identity_digest;
    use sha2::Digest;
    let src = RestoreSource::Snapshot(meta::ids::SnapshotId(42));
    let got = restore_identity_digest(&root(), "wb-main", &inc(), &src, "wb-copy", &inc2());
    // Hand-built preimage of docs/metadata-format.md "Restore Closure".
    let mut pre = b"nokv.restore.operation.v2\0".to_vec();
    pre.extend_from_slice(&[0x11; 16]);
    pre.extend_from_slice(&[0, 0, 0, 7]);
    pre.extend_from_slice(b"wb-main");
    pre.extend_from_slice(&[0x22; 16]);
    pre.push(1);
    pre.extend_from_slice(&42u64.to_be_bytes());
    pre.extend_from_slice(&[0, 0, 0, 7]);
    pre.extend_from_slice(b"wb-copy");
    pre.extend_from_slice(&[0x23; 16]);
    let want: [u8; 32] = sha2::Sha256::digest(&pre).into();
    assert_eq!(got, want);
    let other = restore_identity_digest(
        &root(),
        "wb-main",
        &inc(),
        &RestoreSource::Commit(c1()),
        "wb-copy",
        &inc2(),
    );
    assert_ne!(got, other);
    let mut r = match restore_operation() {
        Operation::Restore(r) => r,
        _ => unreachable!(),
    };
    r.identity_digest = got;
    let mut first16 = [0u8; 16];
    first16.copy_from_slice(&got[..16]);
    assert_eq!(r.operation_id(), OperationId(first16));
}

#[test]
fn restore_member_matches_golden_bytes() {
    let k = restore_member_key();
    check_key(
        "restore_member",
        "key",
        &k,
        k.encode(),
        RestoreMemberKey::decode,
    );
    let v = restore_member();
    check_value(
        "restore_member",
        "value",
        &v,
        v.encode(),
        RestoreMember::decode,
    );
}

#[test]
fn staged_object_matches_golden_bytes() {
    let k = staged_object_key();
    check_key(
        "staged_object",
        "key",
        &k,
        k.encode(),
        StagedObjectKey::decode,
    );
    let v = staged_object();
    check_value(
        "staged_object",
        "value",
        &v,
        v.encode(),
        StagedObject::decode,
    );
}

#[test]
fn command_dedupe_matches_golden_bytes() {
    let k = dedupe_key();
    check_key(
        "command_dedupe",
        "key",
        &k,
        k.encode(),
        CommandDedupeKey::decode,
    );
    let v = dedupe();
    check_value(
        "command_dedupe",
        "value",
        &v,
        v.encode(),
        CommandDedupe::decode,
    );
}

#[test]
fn gc_candidate_matches_golden_bytes() {
    let k = gc_candidate_key();
    check_key(
        "gc_candidate",
        "key",
        &k,
        k.encode(),
        GcCandidateKey::decode,
    );
    let v = gc_candidate();
    check_value("gc_candidate", "value", &v, v.encode(), GcCandidate::decode);
}

#[test]
fn gc_barrier_matches_golden_bytes() {
    let k = gc_barrier_key();
    check_key("gc_barrier", "key", &k, k.encode(), GcBarrierKey::decode);
    let v = gc_barrier();
    check_value("gc_barrier", "value", &v, v.encode(), GcBarrier::decode);
}

#[test]
fn recovery_outbox_keys_match_golden_bytes() {
    let h = RecoveryOutboxKey::Header { recovery_lsn: 7 };
    check_key(
        "recovery_outbox",
        "key.header",
        &h,
        h.encode(),
        RecoveryOutboxKey::decode,
    );
    let c = RecoveryOutboxKey::Chunk {
        recovery_lsn: 7,
        chunk_index: 2,
    };
    check_key(
        "recovery_outbox",
        "key.chunk",
        &c,
        c.encode(),
        RecoveryOutboxKey::decode,
    );
    assert!(c.encode().starts_with(&RecoveryOutboxKey::chunk_prefix(7)));
    assert!(h.encode() < c.encode(), "headers sort before chunks");
}

#[test]
fn history_rows_match_golden_bytes() {
    let k = HistoryKey {
        source: meta::schema::Family::PathCurrent,
        user_key: vec![0xaa, 0xbb, 0xcc],
        commit_version: 9,
    };
    check_key("history", "key", &k, k.encode(), HistoryKey::decode);
    let f = load("history");
    use meta::codec::history::{decode_value, encode_value};
    assert_eq!(encode_value(Some(&[0xaa])), f["value.previous"].bytes);
    assert_eq!(
        decode_value(&f["value.previous"].bytes).unwrap(),
        Some(vec![0xaa])
    );
    assert_eq!(encode_value(None), f["value.absent"].bytes);
    assert_eq!(decode_value(&f["value.absent"].bytes).unwrap(), None);
    expect_codec(decode_value(&[]), "empty history value");
    expect_codec(decode_value(&[2, 0xaa]), "unknown history kind");
    expect_codec(decode_value(&[0, 0xaa]), "bytes after a tombstone");
    // Reserved engine trees are not history sources.
    for tag in [0x00u8, 0x18, 0xf0, 0xf1] {
        let mut b = k.encode();
        b[0] = tag;
        expect_codec(HistoryKey::decode(&b), &format!("source tag {tag:#04x}"));
    }
}

#[test]
fn root_fence_and_schema_marker_match_golden_bytes() {
    let k = root();
    check_key("root_fence", "key", &k, root_fence::key(&k), |b| {
        decode_root_key("root_fence", b)
    });
    let v = RootFence {
        logical_shard_id: shard(),
        placement_generation: 1,
        activation_state: RootActivationState::Active,
    };
    check_value("root_fence", "value", &v, v.encode(), RootFence::decode);
    let f = load("system");
    assert_eq!(SchemaMarker::current().encode(), f["schema_marker"].bytes);
}

/// Checks one enum against its docs/metadata-format.md row: names, values, `TryFrom`, and fail-closed decoding
/// of 0, max+1 and 255.
fn table<E>(all: &[E], to: fn(E) -> u8, from: fn(u8) -> meta::Result<E>, expected: &[(&str, u8)])
where
    E: Copy + Debug + PartialEq + TryFrom<u8, Error = Error>,
{
    let got: Vec<(String, u8)> = all.iter().map(|v| (format!("{v:?}"), to(*v))).collect();
    let want: Vec<(String, u8)> = expected.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    assert_eq!(got, want);
    for v in all {
        assert_eq!(from(to(*v)).unwrap(), *v);
        assert_eq!(E::try_from(to(*v)).unwrap(), *v);
    }
    let max = expected.iter().map(|(_, v)| *v).max().unwrap();
    for bad in [0, max + 1, 255] {
        expect_codec(from(bad), &format!("{:?} discriminant {bad}", all[0]));
        assert!(matches!(E::try_from(bad), Err(Error::Codec { .. })));
    }
}

#[test]
fn durable_enum_discriminants_are_exactly_the_seed_registry() {
    table(
        WorkspaceState::ALL,
        WorkspaceState::to_u8,
        WorkspaceState::from_u8,
        &[
            ("Staging", 1),
            ("Visible", 2),
            ("Retired", 3),
            ("Expired", 4),
        ],
    );
    table(
        RevisionState::ALL,
        RevisionState::to_u8,
        RevisionState::from_u8,
        &[
            ("Available", 1),
            ("Deleting", 2),
            ("Deleted", 3),
            ("Quarantined", 4),
        ],
    );
    table(
        CommitState::ALL,
        CommitState::to_u8,
        CommitState::from_u8,
        &[("Sealed", 1), ("Retiring", 2), ("Retired", 3)],
    );
    table(
        SnapshotState::ALL,
        SnapshotState::to_u8,
        SnapshotState::from_u8,
        &[
            ("Active", 1),
            ("ReapClaimed", 2),
            ("Reaped", 3),
            ("Retired", 4),
        ],
    );
    table(
        ReferenceKind::ALL,
        ReferenceKind::to_u8,
        ReferenceKind::from_u8,
        &[("Path", 1), ("Commit", 2), ("RevisionDependency", 3)],
    );
    table(
        HistoryHoldKind::ALL,
        HistoryHoldKind::to_u8,
        HistoryHoldKind::from_u8,
        &[("Snapshot", 1), ("BuildCommit", 2), ("Restore", 3)],
    );
    table(
        HistoryHoldState::ALL,
        HistoryHoldState::to_u8,
        HistoryHoldState::from_u8,
        &[("Active", 1), ("Releasing", 2)],
    );
    table(
        RootActivationState::ALL,
        RootActivationState::to_u8,
        RootActivationState::from_u8,
        &[
            ("Installing", 1),
            ("Active", 2),
            ("Draining", 3),
            ("Fenced", 4),
        ],
    );
    table(
        RootPlacementLifecycle::ALL,
        RootPlacementLifecycle::to_u8,
        RootPlacementLifecycle::from_u8,
        &[
            ("Provisioning", 1),
            ("Active", 2),
            ("Draining", 3),
            ("Retired", 4),
        ],
    );
    table(
        CommitConsumerKind::ALL,
        CommitConsumerKind::to_u8,
        CommitConsumerKind::from_u8,
        &[
            ("WorkbenchHead", 1),
            ("Tag", 2),
            ("Lease", 3),
            ("ChildCommit", 4),
        ],
    );
    table(
        RestoreSourceKind::ALL,
        RestoreSourceKind::to_u8,
        RestoreSourceKind::from_u8,
        &[("Snapshot", 1), ("Commit", 2)],
    );
    table(
        OperationKind::ALL,
        OperationKind::to_u8,
        OperationKind::from_u8,
        &[
            ("Publish", 1),
            ("BuildCommit", 2),
            ("Restore", 3),
            ("CommitRetire", 4),
            ("Gc", 5),
            ("Reserve", 6),
        ],
    );
    table(
        meta::codec::ReservePhase::ALL,
        meta::codec::ReservePhase::to_u8,
        meta::codec::ReservePhase::from_u8,
        &[("Reserved", 1), ("Retired", 2)],
    );
    table(
        PublishPhase::ALL,
        PublishPhase::to_u8,
        PublishPhase::from_u8,
        &[
            ("Uploading", 1),
            ("Finalizing", 2),
            ("Published", 3),
            ("Aborting", 4),
            ("Cleaning", 5),
            ("Cleaned", 6),
            ("Quarantined", 7),
        ],
    );
    table(
        BuildCommitPhase::ALL,
        BuildCommitPhase::to_u8,
        BuildCommitPhase::from_u8,
        &[
            ("Building", 1),
            ("Sealing", 2),
            ("Complete", 3),
            ("Aborting", 4),
            ("Cleaning", 5),
            ("Cleaned", 6),
            ("Quarantined", 7),
        ],
    );
    table(
        RestorePhase::ALL,
        RestorePhase::to_u8,
        RestorePhase::from_u8,
        &[
            ("Preparing", 1),
            ("Copying", 2),
            ("SourceSealed", 3),
            ("Ready", 4),
            ("Complete", 5),
            ("Aborting", 6),
            ("Cleaning", 7),
            ("Cleaned", 8),
            ("Quarantined", 9),
        ],
    );
    table(
        CommitRetirePhase::ALL,
        CommitRetirePhase::to_u8,
        CommitRetirePhase::from_u8,
        &[
            ("Claiming", 1),
            ("Releasing", 2),
            ("Complete", 3),
            ("Quarantined", 4),
        ],
    );
    table(
        GcPhase::ALL,
        GcPhase::to_u8,
        GcPhase::from_u8,
        &[
            ("Queued", 1),
            ("Claimed", 2),
            ("Deleting", 3),
            ("Deleted", 4),
            ("Quarantined", 5),
        ],
    );
    table(
        StagedProviderState::ALL,
        StagedProviderState::to_u8,
        StagedProviderState::from_u8,
        &[
            ("Planned", 1),
            ("Uploading", 2),
            ("Uploaded", 3),
            ("AbortPending", 4),
            ("Aborted", 5),
            ("Ambiguous", 6),
        ],
    );
    table(
        StagedCleanupState::ALL,
        StagedCleanupState::to_u8,
        StagedCleanupState::from_u8,
        &[
            ("Owned", 1),
            ("DeletePending", 2),
            ("Deleted", 3),
            ("Quarantined", 4),
        ],
    );
    table(
        GcClaimState::ALL,
        GcClaimState::to_u8,
        GcClaimState::from_u8,
        &[
            ("Candidate", 1),
            ("Claimed", 2),
            ("Complete", 3),
            ("Quarantined", 4),
        ],
    );
}

#[test]
fn value_versions_follow_the_durable_format_registry() {
    // Publication-owned workspace/path/revision records and immutable commit records: 2.
    assert_eq!(workspace_current::VALUE_VERSION, 2);
    // A marker with an expiry deadline (or Expired) is version 3.
    assert_eq!(workspace_current::VALUE_VERSION_EXPIRY, 3);
    assert_eq!(path_current::VALUE_VERSION, 2);
    assert_eq!(artifact_revision::VALUE_VERSION, 2);
    assert_eq!(artifact_manifest::VALUE_VERSION, 2);
    assert_eq!(revision_ref::VALUE_VERSION, 2);
    assert_eq!(commit::VALUE_VERSION, 2);
    assert_eq!(commit_member::VALUE_VERSION, 2);
    // ChangeEvent 2, CommandDedupe 2.
    assert_eq!(change_event::VALUE_VERSION, 2);
    assert_eq!(command_dedupe::VALUE_VERSION, 2);
    // BuildCommitOperation 5, RestoreOperation 4, other operations 1.
    assert_eq!(OperationKind::BuildCommit.value_version(), 5);
    assert_eq!(OperationKind::Restore.value_version(), 4);
    assert_eq!(OperationKind::Publish.value_version(), 1);
    assert_eq!(OperationKind::CommitRetire.value_version(), 1);
    assert_eq!(OperationKind::Gc.value_version(), 1);
    assert_eq!(OperationKind::Reserve.value_version(), 1);
    // Other ordinary workspace records: 1.
    assert_eq!(workspace_incarnation_claim::VALUE_VERSION, 1);
    assert_eq!(workbench_commit_head::VALUE_VERSION, 1);
    assert_eq!(tag::VALUE_VERSION, 1);
    // SnapshotRef: 1 without a retire annotation, 2 with one (this codec's addition).
    assert_eq!(snapshot_ref::VALUE_VERSION_V1, 1);
    assert_eq!(snapshot_ref::VALUE_VERSION, 2);
    assert_eq!(snapshot_alias::VALUE_VERSION, 1);
    assert_eq!(history_hold::VALUE_VERSION, 1);
    assert_eq!(commit_consumer::VALUE_VERSION, 1);
    assert_eq!(secondary_index::VALUE_VERSION, 1);
    assert_eq!(restore_member::VALUE_VERSION, 1);
    assert_eq!(staged_object::VALUE_VERSION, 1);
    assert_eq!(gc_candidate::VALUE_VERSION, 1);
    assert_eq!(gc_barrier::VALUE_VERSION, 1);
}

#[test]
fn a_reservation_round_trips_and_fails_closed_outside_its_bounds() {
    use meta::codec::{ReserveOperation, ReservedRevision, MAX_RESERVED_REVISIONS};
    let rev = |b: u8| meta::ArtifactRevisionId([b; 16]);
    let op = Operation::Reserve(ReserveOperation {
        revisions: vec![
            ReservedRevision {
                revision: rev(1),
                object_key: "nokv/artifacts/a/b/c/blocks/0000000000000000".into(),
            },
            ReservedRevision {
                revision: rev(2),
                object_key: "k".into(),
            },
        ],
    });
    let bytes = op.encode();
    // u16 version 1 | u8 kind 6 | u32 n 2 | …
    assert_eq!(&bytes[..7], &[0, 1, 6, 0, 0, 0, 2]);
    assert_eq!(Operation::decode(&bytes).unwrap(), op);
    assert_eq!(
        Operation::decode_for_kind(OperationKind::Reserve, &bytes).unwrap(),
        op
    );
    // No revision, or more than the bound: fail closed.
    expect_codec(
        Operation::decode(&[0, 1, 6, 0, 0, 0, 0]),
        "empty reservation",
    );
    let mut too_many = vec![0, 1, 6];
    too_many.extend_from_slice(&(MAX_RESERVED_REVISIONS as u32 + 1).to_be_bytes());
    expect_codec(Operation::decode(&too_many), "too many revisions");
    // Truncated and trailing bytes.
    expect_codec(Operation::decode(&bytes[..bytes.len() - 1]), "truncated");
    let mut trailing = bytes.clone();
    trailing.push(0);
    expect_codec(Operation::decode(&trailing), "trailing byte");
}
