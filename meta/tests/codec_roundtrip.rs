//! Property tests for every family codec: random records round-trip through their key and value
//! codecs; arbitrary bytes never panic a decoder; a decoder that accepts a mutated encoding
//! re-encodes it to exactly the same bytes (one canonical byte string per record); and the key
//! layouts sort the way docs/metadata-format.md requires.

#[path = "fixtures/samples.rs"]
mod samples;

use meta::codec::*;
use meta::ids::{
    AliasName, ArtifactRevisionId, CommitId, OperationId, RequestId, RootId, SnapshotId, TagName,
    WorkspaceIncarnationId,
};
use meta::index::{FieldId, IndexValue, Timestamp};
use meta::path::{normalize, ordered_key, NormPath};
use meta::schema::Family;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

type Reencode = fn(&[u8]) -> meta::Result<Vec<u8>>;

fn rt<T: PartialEq + std::fmt::Debug>(
    v: &T,
    bytes: Vec<u8>,
    decode: impl Fn(&[u8]) -> meta::Result<T>,
) -> Result<(), TestCaseError> {
    let back = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(&back, v);
    Ok(())
}

fn root() -> impl Strategy<Value = RootId> {
    any::<[u8; 16]>().prop_map(RootId)
}
fn inc() -> impl Strategy<Value = WorkspaceIncarnationId> {
    any::<[u8; 16]>().prop_map(WorkspaceIncarnationId)
}
fn rev() -> impl Strategy<Value = ArtifactRevisionId> {
    any::<[u8; 16]>().prop_map(ArtifactRevisionId)
}
fn opid() -> impl Strategy<Value = OperationId> {
    any::<[u8; 16]>().prop_map(OperationId)
}
fn cid() -> impl Strategy<Value = CommitId> {
    any::<[u8; 32]>().prop_map(CommitId)
}
fn text() -> impl Strategy<Value = String> {
    "\\PC{0,8}"
}
fn wb_id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9_-]{0,15}"
}
fn path() -> impl Strategy<Value = NormPath> {
    proptest::collection::vec("[a-zA-Z0-9._ \u{1}\u{e9}\u{4e2d}-]{1,5}", 1..4)
        .prop_filter_map("dot components", |cs| normalize(&cs.join("/")).ok())
}
fn alias() -> impl Strategy<Value = AliasName> {
    "[^\\x00]{1,16}".prop_map(|s| AliasName::new(s).unwrap())
}
fn tag_name() -> impl Strategy<Value = TagName> {
    "[^\\x00]{1,16}".prop_map(|s| TagName::new(s).unwrap())
}
fn field_id() -> impl Strategy<Value = FieldId> {
    "[A-Za-z0-9_.-]{1,20}".prop_map(|s| FieldId::new(s).unwrap())
}
fn digest() -> impl Strategy<Value = [u8; 32]> {
    any::<[u8; 32]>()
}
fn projection() -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    proptest::collection::vec((text(), proptest::collection::vec(any::<u8>(), 0..6)), 0..3)
}
fn index_value() -> impl Strategy<Value = IndexValue> {
    prop_oneof![
        Just(IndexValue::Null),
        any::<bool>().prop_map(IndexValue::Bool),
        any::<i64>().prop_map(IndexValue::Int),
        any::<u64>().prop_map(IndexValue::UInt),
        any::<f64>().prop_filter_map("finite", |f| IndexValue::float(f).ok()),
        (-50i64..50).prop_map(|i| IndexValue::float(i as f64).unwrap()),
        (any::<i64>(), 0u32..1_000_000_000)
            .prop_map(|(s, n)| IndexValue::Timestamp(Timestamp::new(s, n).unwrap())),
        "\\PC{0,6}|a\\x00b?".prop_map(IndexValue::String),
        proptest::collection::vec(any::<u8>(), 0..6).prop_map(IndexValue::Bytes),
    ]
}
fn closure_cursor() -> impl Strategy<Value = ClosureCursor> {
    (
        (proptest::option::of(path()), any::<bool>()),
        (proptest::option::of(rev()), any::<bool>()),
        (proptest::option::of(cid()), any::<bool>()),
    )
        .prop_map(|((m, mc), (r, rc), (p, pc))| ClosureCursor {
            members: SetCursor {
                after: m,
                complete: mc,
            },
            revisions: SetCursor {
                after: r,
                complete: rc,
            },
            parents: SetCursor {
                after: p,
                complete: pc,
            },
        })
}
fn result<T: std::fmt::Debug + Clone + 'static>(
    payload: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = OperationResult<T>> {
    prop_oneof![
        Just(OperationResult::Pending),
        payload.prop_map(OperationResult::Succeeded),
        (text(), text())
            .prop_map(|(code, message)| OperationResult::Failed(TerminalError { code, message })),
    ]
}
fn pick<E: Copy + std::fmt::Debug + 'static>(all: &'static [E]) -> impl Strategy<Value = E> {
    proptest::sample::select(all)
}

fn operation() -> impl Strategy<Value = Operation> {
    let condition = prop_oneof![
        Just(PublishCondition::Create),
        any::<u64>().prop_map(|g| PublishCondition::Replace {
            expected_generation: g
        }),
        proptest::option::of(any::<u64>()).prop_map(|g| PublishCondition::Append {
            expected_generation: g
        }),
    ];
    let base = proptest::option::of((rev(), any::<u64>(), any::<u64>()).prop_map(
        |(revision, row_count, logical_size)| PublishBase {
            revision,
            row_count,
            logical_size,
        },
    ));
    let publish = (
        (
            pick(PublishPhase::ALL),
            rev(),
            any::<[u8; 32]>(),
            text(),
            path(),
            condition,
        ),
        (
            base,
            any::<u32>(),
            text(),
            text(),
            proptest::option::of(text()),
            proptest::collection::vec((text(), proptest::collection::vec(any::<u8>(), 0..4)), 0..3),
        ),
        (
            any::<u64>(),
            any::<u64>(),
            proptest::option::of(text()),
            any::<u64>(),
            proptest::option::of(text()),
        ),
        result(
            (any::<u64>(), proptest::option::of(any::<u64>())).prop_map(|(c, g)| PublishResult {
                commit_version: c,
                path_generation: g,
            }),
        ),
    )
        .prop_map(
            |(
                (phase, r, intent, wb, path, condition),
                (base, depth, ct, pr, mid, ix),
                (n, len, dg, cleanup, ev),
                result,
            )| {
                Operation::Publish(PublishOperation {
                    phase,
                    artifact_revision_id: r,
                    intent_digest: intent,
                    workbench_id: wb,
                    path,
                    condition,
                    base,
                    dependency_depth: depth,
                    content_type: ct,
                    producer: pr,
                    manifest_id: mid,
                    index_projection: ix,
                    staged_object_count: n,
                    expected_length: len,
                    expected_digest_uri: dg,
                    cleanup_next_sequence: cleanup,
                    quarantine_evidence: ev,
                    result,
                })
            },
        );
    let head = proptest::option::of((cid(), any::<u64>()).prop_map(|(c, g)| HeadRef {
        commit_id: c,
        head_generation: g,
    }));
    let binding = proptest::option::of(
        (opid(), inc(), rev(), any::<u64>(), text(), text(), text()).prop_map(
            |(p, i, r, n, b, m, c)| StagedManifestBinding {
                publish_operation_id: p,
                incarnation: i,
                revision: r,
                logical_size: n,
                body_digest_uri: b,
                manifest_digest_uri: m,
                content_type: c,
            },
        ),
    );
    let build = (
        (
            pick(BuildCommitPhase::ALL),
            cid(),
            digest(),
            digest(),
            wb_id(),
            inc(),
        ),
        (
            any::<u64>(),
            any::<u64>(),
            head,
            any::<bool>(),
            text(),
            text(),
        ),
        (
            proptest::option::of(any::<u64>()),
            any::<u64>(),
            binding,
            text(),
            proptest::collection::vec(any::<u8>(), 0..4),
            proptest::collection::vec(cid(), 0..3),
        ),
        (
            closure_cursor(),
            any::<u64>(),
            digest(),
            any::<u64>(),
            digest(),
        ),
        (any::<u64>(), digest(), closure_cursor()),
        result(
            (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(c, h, m)| BuildCommitResult {
                commit_version: c,
                head_generation: h,
                manifest_generation: m,
            }),
        ),
    )
        .prop_map(
            |(
                (phase, commit_id, pid, initd, wb, si),
                (srv, swr, expected_head, replace, cd, md),
                (rmg, at, staged_manifest, producer, lineage, parents),
                (cursor, mc, mdg, rc, rdg),
                (pc, pdg, cleanup_cursor),
                result,
            )| {
                Operation::BuildCommit(Box::new(BuildCommitOperation {
                    phase,
                    commit_id,
                    projection_input_digest: pid,
                    initialization_digest: initd,
                    workbench_id: wb,
                    source_incarnation: si,
                    source_read_version: srv,
                    source_workspace_revision: swr,
                    expected_head,
                    replace,
                    content_digest_uri: cd,
                    manifest_digest_uri: md,
                    run_manifest_expected_generation: rmg,
                    committed_at_unix_seconds: at,
                    staged_manifest,
                    producer,
                    lineage,
                    parents,
                    cursor,
                    member_count: mc,
                    member_digest: mdg,
                    revision_count: rc,
                    revision_digest: rdg,
                    parent_count: pc,
                    parent_digest: pdg,
                    cleanup_cursor,
                    result,
                }))
            },
        );
    let source = prop_oneof![
        any::<u64>().prop_map(|s| RestoreSource::Snapshot(SnapshotId(s))),
        cid().prop_map(RestoreSource::Commit),
    ];
    let restore = (
        (
            pick(RestorePhase::ALL),
            wb_id(),
            inc(),
            source,
            any::<u64>(),
            wb_id(),
        ),
        (
            inc(),
            digest(),
            digest(),
            proptest::collection::vec(any::<u8>(), 0..4),
        ),
        (proptest::option::of(path()), any::<u64>(), any::<bool>()),
        (any::<u64>(), digest(), any::<u64>()),
        result(
            (any::<u64>(), any::<u64>()).prop_map(|(c, g)| RestoreResult {
                commit_version: c,
                destination_generation: g,
            }),
        ),
    )
        .prop_map(
            |(
                (phase, swb, si, source, srv, dwb),
                (di, idd, initd, entry),
                (ap, nms, eof),
                (mc, mdg, cns),
                result,
            )| {
                Operation::Restore(Box::new(RestoreOperation {
                    phase,
                    source_workbench_id: swb,
                    source_incarnation: si,
                    source,
                    source_read_version: srv,
                    destination_workbench_id: dwb,
                    destination_incarnation: di,
                    identity_digest: idd,
                    initialization_digest: initd,
                    restore_manifest_entry: entry,
                    cursor: RestoreCursor {
                        after_path: ap,
                        next_member_sequence: nms,
                        source_eof: eof,
                    },
                    member_count: mc,
                    member_digest: mdg,
                    cleanup_next_sequence: cns,
                    result,
                }))
            },
        );
    let retire = (
        pick(CommitRetirePhase::ALL),
        cid(),
        any::<u64>(),
        closure_cursor(),
        result(any::<u64>()),
    )
        .prop_map(|(phase, c, e, cursor, result)| {
            Operation::CommitRetire(CommitRetireOperation {
                phase,
                commit_id: c,
                expected_consumer_epoch: e,
                cursor,
                result,
            })
        });
    let gc = (
        pick(GcPhase::ALL),
        rev(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        proptest::option::of(text()),
        result(any::<u64>()),
    )
        .prop_map(|(phase, r, e, n, d, q, result)| {
            Operation::Gc(GcOperation {
                phase,
                artifact_revision_id: r,
                reference_epoch: e,
                next_object_index: n,
                deleted_object_count: d,
                quarantine_evidence: q,
                result,
            })
        });
    prop_oneof![publish, build, restore, retire, gc]
}

fn ref_owner() -> impl Strategy<Value = RefOwner> {
    prop_oneof![
        (inc(), path()).prop_map(|(incarnation, path)| RefOwner::Path { incarnation, path }),
        cid().prop_map(RefOwner::Commit),
        rev().prop_map(|child| RefOwner::RevisionDependency { child }),
    ]
}

fn consumer_owner() -> impl Strategy<Value = ConsumerOwner> {
    prop_oneof![
        inc().prop_map(|incarnation| ConsumerOwner::WorkbenchHead { incarnation }),
        (inc(), tag_name()).prop_map(|(incarnation, tag)| ConsumerOwner::Tag { incarnation, tag }),
        opid().prop_map(|operation_id| ConsumerOwner::Lease { operation_id }),
        cid().prop_map(|child| ConsumerOwner::ChildCommit { child }),
    ]
}

fn hold_id() -> impl Strategy<Value = HoldId> {
    prop_oneof![
        any::<u64>().prop_map(|s| HoldId::Snapshot(SnapshotId(s))),
        opid().prop_map(HoldId::BuildCommit),
        opid().prop_map(HoldId::Restore),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn workspace_rows_round_trip(
        r in root(), wb in wb_id(), i in inc(), n in any::<u64>(),
        st in pick(WorkspaceState::ALL), o in proptest::option::of(opid()),
        cv in any::<u64>(), mv in any::<u64>(), ex in proptest::option::of(any::<u64>()),
    ) {
        let k = WorkspaceCurrentKey { root: r, workbench_id: wb.clone() };
        rt(&k, k.encode(), WorkspaceCurrentKey::decode)?;
        let v = WorkspaceCurrent { incarnation: i, workspace_revision: n, state: st,
            owning_operation: o, created_version: cv, modified_version: mv,
            expires_at_unix_ms: if st == WorkspaceState::Expired { Some(ex.unwrap_or(1)) } else { ex } };
        rt(&v, v.encode(), WorkspaceCurrent::decode)?;
        let ck = WorkspaceIncarnationClaimKey { root: r, incarnation: i };
        rt(&ck, ck.encode(), WorkspaceIncarnationClaimKey::decode)?;
        let c = WorkspaceIncarnationClaim { workbench_id: wb };
        rt(&c, c.encode(), WorkspaceIncarnationClaim::decode)?;
    }

    #[test]
    fn path_and_revision_rows_round_trip(
        r in root(), i in inc(), pa in path(), rv in rev(), nums in any::<[u64; 6]>(),
        strs in ("\\PC{0,8}", "\\PC{0,8}", "\\PC{0,8}", "\\PC{0,8}"),
        mid in proptest::option::of(text()), proj in projection(), dg in digest(),
        st in pick(RevisionState::ALL), lz in proptest::option::of(any::<u64>()),
        seg in proptest::option::of(any::<u32>()),
    ) {
        let k = PathCurrentKey { root: r, incarnation: i, path: pa.clone() };
        rt(&k, k.encode(), PathCurrentKey::decode)?;
        let e = PathEntry { generation: nums[0], artifact_revision_id: rv, logical_size: nums[1],
            body_digest_uri: strs.0.clone(), manifest_digest_uri: strs.1.clone(),
            dependency_count: nums[2] as u32, dependency_depth: nums[3] as u32,
            content_type: strs.2.clone(), producer: strs.3.clone(), manifest_id: mid,
            created_version: nums[4], modified_version: nums[5], index_projection: proj };
        rt(&e, e.encode(), PathEntry::decode)?;
        let ak = ArtifactRevisionKey { root: r, revision: rv };
        rt(&ak, ak.encode(), ArtifactRevisionKey::decode)?;
        let a = ArtifactRevision { logical_size: nums[0], body_digest_uri: strs.0.clone(),
            manifest_digest_uri: strs.1.clone(), block_count: nums[1],
            dependency_count: nums[2] as u32, dependency_depth: nums[3] as u32,
            dependency_digest: dg, content_type: strs.2.clone(), state: st,
            reference_epoch: nums[4], strong_reference_count: nums[5],
            last_zero_ref_version: lz, created_version: nums[0] };
        rt(&a, a.encode(), ArtifactRevision::decode)?;
        let mk = ArtifactManifestKey { root: r, revision: rv, object_index: nums[2] };
        rt(&mk, mk.encode(), ArtifactManifestKey::decode)?;
        let m = ManifestRow { object_index: nums[2], physical_owner_revision: rv,
            physical_object_index: nums[3], object_key: strs.3.clone(), logical_offset: nums[4],
            object_offset: nums[5], length: nums[0], digest_uri: strs.0, append_segment: seg };
        rt(&m, m.encode_value(), |b| ManifestRow::decode_value(nums[2], b))?;
        let gk = GcCandidateKey { root: r, revision: rv, reference_epoch: nums[1] };
        rt(&gk, gk.encode(), GcCandidateKey::decode)?;
    }

    #[test]
    fn revision_refs_round_trip_for_every_owner(
        r in root(), owner in ref_owner(), t in rev(), e in any::<u64>(), c in any::<u64>(),
    ) {
        let k = RevisionRefKey { root: r, owner: owner.clone(), target: t };
        rt(&k, k.encode(), RevisionRefKey::decode)?;
        let id = owner.owner_id_bytes();
        rt(&owner, id, |b| RefOwner::from_owner_id_bytes(owner.kind(), b))?;
        let v = RevisionRef { reference_epoch_at_add: e, created_version: c };
        rt(&v, v.encode(), RevisionRef::decode)?;
    }

    #[test]
    fn commit_rows_round_trip(
        r in root(), c in cid(), pa in path(), i in inc(), rv in rev(),
        nums in any::<[u64; 6]>(), ds in any::<[[u8; 32]; 3]>(),
        strs in (wb_id(), text(), text(), text()),
        parents in proptest::collection::btree_set(cid(), 0..4),
        lineage in proptest::collection::vec(any::<u8>(), 0..5),
        lz in proptest::option::of(any::<u64>()), st in pick(CommitState::ALL),
        cur in proptest::option::of(closure_cursor()),
        mid in proptest::option::of(text()), proj in projection(),
    ) {
        let k = CommitKey { root: r, commit_id: c };
        rt(&k, k.encode(), CommitKey::decode)?;
        let parents: Vec<CommitId> = parents.into_iter().collect();
        let v = Commit { source_workbench_id: strs.0.clone(), source_incarnation: i,
            content_digest_uri: strs.1.clone(), manifest_digest_uri: strs.2.clone(),
            tree_manifest_revision: rv, member_count: nums[0], member_digest: ds[0],
            unique_revision_count: nums[1], revision_digest: ds[1], parents,
            parent_digest: ds[2], producer: strs.3.clone(), lineage, consumer_count: nums[2],
            consumer_epoch: nums[3], last_zero_consumer_version: lz, state: st,
            retirement_cursor: cur, created_version: nums[4],
            source_read_version: lz };
        rt(&v, v.encode(), Commit::decode)?;
        let mk = CommitMemberKey { root: r, commit_id: c, path: pa };
        rt(&mk, mk.encode(), CommitMemberKey::decode)?;
        let m = CommitMember { artifact_revision_id: rv, path_generation: nums[0],
            body_digest_uri: strs.1.clone(), manifest_digest_uri: strs.2.clone(),
            logical_size: nums[1], dependency_count: nums[2] as u32,
            dependency_depth: nums[3] as u32, content_type: strs.3.clone(),
            producer: strs.0, manifest_id: mid, projection: proj };
        rt(&m, m.encode(), CommitMember::decode)?;
        let hk = WorkbenchCommitHeadKey { root: r, incarnation: i };
        rt(&hk, hk.encode(), WorkbenchCommitHeadKey::decode)?;
        let h = WorkbenchCommitHead { commit_id: c, head_generation: nums[5] };
        rt(&h, h.encode(), WorkbenchCommitHead::decode)?;
    }

    #[test]
    fn names_snapshots_and_holds_round_trip(
        r in root(), i in inc(), t in tag_name(), a in alias(), c in cid(),
        sid in any::<u64>(), nums in any::<[u64; 5]>(), ann in proptest::collection::vec(any::<u8>(), 0..8),
        sa in proptest::option::of(alias()), st in pick(SnapshotState::ALL),
        ts in proptest::option::of(pick(SnapshotState::ALL)), hold in hold_id(),
        src in proptest::option::of(any::<u64>()), hs in pick(HistoryHoldState::ALL),
    ) {
        let k = TagKey { root: r, incarnation: i, tag: t };
        rt(&k, k.encode(), TagKey::decode)?;
        let v = Tag { commit_id: c, tag_generation: nums[0] };
        rt(&v, v.encode(), Tag::decode)?;
        let sk = SnapshotRefKey { root: r, incarnation: i, snapshot_id: SnapshotId(sid) };
        rt(&sk, sk.encode(), SnapshotRefKey::decode)?;
        let s = SnapshotRef { read_version: nums[0], alias: sa, lease_deadline_unix_ms: nums[1],
            state: st, consumer_count: nums[2], consumer_epoch: nums[3], annotation: ann.clone(),
            retire_annotation: None };
        rt(&s, s.encode(), SnapshotRef::decode)?;
        let s = SnapshotRef { retire_annotation: Some(ann), ..s };
        rt(&s, s.encode(), SnapshotRef::decode)?;
        let ak = SnapshotAliasKey { root: r, incarnation: i, alias: a };
        rt(&ak, ak.encode(), SnapshotAliasKey::decode)?;
        let al = SnapshotAlias { snapshot_id: SnapshotId(sid), alias_generation: nums[4],
            terminal_state: ts };
        rt(&al, al.encode(), SnapshotAlias::decode)?;
        let hk = HistoryHoldKey { root: r, hold };
        rt(&hk, hk.encode(), HistoryHoldKey::decode)?;
        let h = HistoryHold { read_version: nums[0], source_snapshot_id: src.map(SnapshotId),
            state: hs, created_version: nums[1] };
        rt(&h, h.encode(), HistoryHold::decode)?;
    }

    #[test]
    fn commit_consumers_round_trip_for_every_owner(
        r in root(), c in cid(), owner in consumer_owner(), e in any::<u64>(), v in any::<u64>(),
    ) {
        let k = CommitConsumerKey { root: r, commit_id: c, owner: owner.clone() };
        rt(&k, k.encode(), CommitConsumerKey::decode)?;
        let id = owner.owner_id_bytes();
        rt(&owner, id, |b| ConsumerOwner::from_owner_id_bytes(owner.kind(), b))?;
        let val = CommitConsumer { consumer_epoch_at_add: e, created_version: v };
        rt(&val, val.encode(), CommitConsumer::decode)?;
    }

    #[test]
    fn secondary_index_rows_round_trip(
        r in root(), f in field_id(), val in index_value(), i in inc(), pa in path(),
        g in any::<u64>(), proj in projection(),
    ) {
        let k = SecondaryIndexKey { root: r, index_id: f, value: val, incarnation: i, path: pa };
        rt(&k, k.encode().unwrap(), SecondaryIndexKey::decode)?;
        let v = SecondaryIndexEntry { path_generation: g, projection: proj };
        rt(&v, v.encode(), SecondaryIndexEntry::decode)?;
    }

    #[test]
    fn operations_and_ledgers_round_trip(
        r in root(), o in opid(), op in operation(), seq in any::<u64>(), pa in path(),
        rv in rev(), g in any::<u64>(), dg in digest(), strs in (text(), text()),
        up in proptest::option::of(text()), ps in pick(StagedProviderState::ALL),
        cs in pick(StagedCleanupState::ALL),
    ) {
        let k = OperationKey { root: r, kind: op.kind(), operation_id: o };
        rt(&k, k.encode(), OperationKey::decode)?;
        rt(&op, op.encode(), Operation::decode)?;
        rt(&op, op.encode(), |b| Operation::decode_for_kind(op.kind(), b))?;
        let mk = RestoreMemberKey { root: r, operation_id: o, member_sequence: seq };
        rt(&mk, mk.encode(), RestoreMemberKey::decode)?;
        let m = RestoreMember { destination_path: pa, artifact_revision_id: rv,
            path_generation: g, row_digest: dg };
        rt(&m, m.encode(), RestoreMember::decode)?;
        let sk = StagedObjectKey { root: r, publish_operation_id: o, object_sequence: seq };
        rt(&sk, sk.encode(), StagedObjectKey::decode)?;
        let s = StagedObject { artifact_revision_id: rv, object_key: strs.0, upload_id: up,
            expected_length: g, expected_digest_uri: strs.1, provider_state: ps,
            cleanup_state: cs };
        rt(&s, s.encode(), StagedObject::decode)?;
    }

    #[test]
    fn feed_dedupe_gc_and_engine_rows_round_trip(
        r in root(), cv in any::<u64>(), seq in any::<u32>(), req in any::<[u8; 16]>(),
        dg in digest(), lsn in proptest::option::of(any::<u64>()), g in any::<u64>(),
        fam in proptest::sample::select(Family::ALL[..23].to_vec()), uk in proptest::collection::vec(any::<u8>(), 0..12),
        chunk in any::<u32>(), header in any::<bool>(),
    ) {
        let k = ChangeEventKey { root: r, commit_version: cv, event_sequence: seq };
        rt(&k, k.encode(), ChangeEventKey::decode)?;
        let dk = CommandDedupeKey { root: r, request_id: RequestId(req) };
        rt(&dk, dk.encode(), CommandDedupeKey::decode)?;
        let mut d = samples::dedupe();
        d.command_digest = dg;
        d.commit_version = cv;
        d.recovery_lsn = lsn;
        rt(&d, d.encode(), CommandDedupe::decode)?;
        let bk = GcBarrierKey { root: r };
        rt(&bk, bk.encode(), GcBarrierKey::decode)?;
        let b = GcBarrier { generation: g };
        rt(&b, b.encode(), GcBarrier::decode)?;
        let hk = HistoryKey { source: fam, user_key: uk, commit_version: cv };
        rt(&hk, hk.encode(), HistoryKey::decode)?;
        let ok = if header {
            RecoveryOutboxKey::Header { recovery_lsn: cv }
        } else {
            RecoveryOutboxKey::Chunk { recovery_lsn: cv, chunk_index: chunk }
        };
        rt(&ok, ok.encode(), RecoveryOutboxKey::decode)?;
    }

    #[test]
    fn secondary_index_keys_sort_by_value_then_incarnation_then_path(
        r in root(), f in field_id(),
        a in (index_value(), inc(), path()), b in (index_value(), inc(), path()),
    ) {
        let ka = SecondaryIndexKey { root: r, index_id: f.clone(), value: a.0.clone(),
            incarnation: a.1, path: a.2.clone() }.encode().unwrap();
        let kb = SecondaryIndexKey { root: r, index_id: f, value: b.0.clone(),
            incarnation: b.1, path: b.2.clone() }.encode().unwrap();
        let expected = a.0.cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(ordered_key(&a.2).cmp(&ordered_key(&b.2)));
        prop_assert_eq!(ka.cmp(&kb), expected);
    }

    #[test]
    fn history_rows_of_one_key_sort_newest_first(
        fam in proptest::sample::select(Family::ALL[..23].to_vec()), uk in proptest::collection::vec(any::<u8>(), 0..8),
        v1 in any::<u64>(), v2 in any::<u64>(),
    ) {
        let k = |v| HistoryKey { source: fam, user_key: uk.clone(), commit_version: v }.encode();
        prop_assert_eq!(k(v1).cmp(&k(v2)), v2.cmp(&v1));
    }

    #[test]
    fn snapshot_keys_sort_by_numeric_id(r in root(), i in inc(), a in any::<u64>(), b in any::<u64>()) {
        let k = |s| SnapshotRefKey { root: r, incarnation: i, snapshot_id: SnapshotId(s) }.encode();
        prop_assert_eq!(k(a).cmp(&k(b)), a.cmp(&b));
        prop_assert_eq!(SnapshotId(a).cmp(&SnapshotId(b)), a.cmp(&b));
    }
}

/// Every (name, canonical sample bytes, decode-then-re-encode) triple the mutation property uses.
fn canonical_cases() -> Vec<(&'static str, Vec<u8>, Reencode)> {
    use samples::*;
    vec![
        (
            "workspace_current key",
            workspace_current_key().encode(),
            |b| Ok(WorkspaceCurrentKey::decode(b)?.encode()),
        ),
        ("workspace_current", workspace_current().encode(), |b| {
            Ok(WorkspaceCurrent::decode(b)?.encode())
        }),
        ("claim key", claim_key().encode(), |b| {
            Ok(WorkspaceIncarnationClaimKey::decode(b)?.encode())
        }),
        ("claim", claim().encode(), |b| {
            Ok(WorkspaceIncarnationClaim::decode(b)?.encode())
        }),
        ("path_current key", path_current_key().encode(), |b| {
            Ok(PathCurrentKey::decode(b)?.encode())
        }),
        ("path_current", path_entry().encode(), |b| {
            Ok(PathEntry::decode(b)?.encode())
        }),
        ("artifact_revision", artifact_revision().encode(), |b| {
            Ok(ArtifactRevision::decode(b)?.encode())
        }),
        ("artifact_manifest", manifest_row().encode_value(), |b| {
            Ok(ManifestRow::decode_value(7, b)?.encode_value())
        }),
        ("revision_ref key", revision_ref_key_path().encode(), |b| {
            Ok(RevisionRefKey::decode(b)?.encode())
        }),
        ("revision_ref", revision_ref().encode(), |b| {
            Ok(RevisionRef::decode(b)?.encode())
        }),
        ("commit", commit().encode(), |b| {
            Ok(Commit::decode(b)?.encode())
        }),
        ("commit_member key", commit_member_key().encode(), |b| {
            Ok(CommitMemberKey::decode(b)?.encode())
        }),
        ("commit_member", commit_member().encode(), |b| {
            Ok(CommitMember::decode(b)?.encode())
        }),
        ("head", head().encode(), |b| {
            Ok(WorkbenchCommitHead::decode(b)?.encode())
        }),
        ("tag key", tag_key().encode(), |b| {
            Ok(TagKey::decode(b)?.encode())
        }),
        ("tag", tag().encode(), |b| Ok(Tag::decode(b)?.encode())),
        ("snapshot_ref", snapshot_ref().encode(), |b| {
            Ok(SnapshotRef::decode(b)?.encode())
        }),
        ("snapshot_alias key", snapshot_alias_key().encode(), |b| {
            Ok(SnapshotAliasKey::decode(b)?.encode())
        }),
        ("snapshot_alias", snapshot_alias().encode(), |b| {
            Ok(SnapshotAlias::decode(b)?.encode())
        }),
        (
            "history_hold key",
            hold_key(HoldId::Snapshot(SnapshotId(42))).encode(),
            |b| Ok(HistoryHoldKey::decode(b)?.encode()),
        ),
        ("history_hold", history_hold().encode(), |b| {
            Ok(HistoryHold::decode(b)?.encode())
        }),
        (
            "commit_consumer key",
            consumer_key(ConsumerOwner::Tag {
                incarnation: inc(),
                tag: TagName::new("v1").unwrap(),
            })
            .encode(),
            |b| Ok(CommitConsumerKey::decode(b)?.encode()),
        ),
        ("commit_consumer", consumer().encode(), |b| {
            Ok(CommitConsumer::decode(b)?.encode())
        }),
        (
            "secondary_index key",
            secondary_index_key().encode().unwrap(),
            |b| SecondaryIndexKey::decode(b)?.encode(),
        ),
        ("secondary_index", secondary_index_entry().encode(), |b| {
            Ok(SecondaryIndexEntry::decode(b)?.encode())
        }),
        ("change_event", change_event().encode(), |b| {
            Ok(ChangeEvent::decode(b)?.encode())
        }),
        ("operation publish", publish_operation().encode(), |b| {
            Ok(Operation::decode(b)?.encode())
        }),
        ("operation build", build_commit_operation().encode(), |b| {
            Ok(Operation::decode(b)?.encode())
        }),
        ("operation restore", restore_operation().encode(), |b| {
            Ok(Operation::decode(b)?.encode())
        }),
        (
            "operation retire",
            commit_retire_operation().encode(),
            |b| Ok(Operation::decode(b)?.encode()),
        ),
        ("operation gc", gc_operation().encode(), |b| {
            Ok(Operation::decode(b)?.encode())
        }),
        ("restore_member", restore_member().encode(), |b| {
            Ok(RestoreMember::decode(b)?.encode())
        }),
        ("staged_object", staged_object().encode(), |b| {
            Ok(StagedObject::decode(b)?.encode())
        }),
        ("command_dedupe", dedupe().encode(), |b| {
            Ok(CommandDedupe::decode(b)?.encode())
        }),
        ("gc_candidate", gc_candidate().encode(), |b| {
            Ok(GcCandidate::decode(b)?.encode())
        }),
        ("gc_barrier", gc_barrier().encode(), |b| {
            Ok(GcBarrier::decode(b)?.encode())
        }),
        (
            "history key",
            HistoryKey {
                source: Family::Tag,
                user_key: vec![1, 2],
                commit_version: 3,
            }
            .encode(),
            |b| Ok(HistoryKey::decode(b)?.encode()),
        ),
        (
            "recovery_outbox key",
            RecoveryOutboxKey::Chunk {
                recovery_lsn: 1,
                chunk_index: 2,
            }
            .encode(),
            |b| Ok(RecoveryOutboxKey::decode(b)?.encode()),
        ),
        (
            "index value",
            IndexValue::String("ab".into()).encode().unwrap(),
            |b| IndexValue::decode(b)?.encode(),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn a_mutated_encoding_either_fails_closed_or_is_canonical(
        which in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(),
        byte in any::<u8>(), cut in any::<bool>(),
    ) {
        let cases = canonical_cases();
        let (name, mut bytes, reencode) = cases[which.index(cases.len())].clone();
        let i = at.index(bytes.len());
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        match reencode(&bytes) {
            Ok(again) => prop_assert_eq!(again, bytes, "{} accepted a non-canonical form", name),
            Err(meta::Error::Codec { .. }) => {}
            Err(e) => prop_assert!(false, "{}: unexpected error kind {:?}", name, e),
        }
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(
        which in any::<prop::sample::Index>(),
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        let cases = canonical_cases();
        let (_, _, reencode) = cases[which.index(cases.len())];
        if let Ok(again) = reencode(&bytes) {
            prop_assert_eq!(again, bytes);
        }
    }
}
