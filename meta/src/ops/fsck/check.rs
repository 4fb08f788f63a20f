//! The read-only check: typed findings recomputed from the authoritative rows.

use super::findings::{Finding, FindingKind, FsckReport, FsckStats};
use crate::codec::{
    commit_consumer, path_current, revision_ref, ArtifactRevision, ArtifactRevisionKey,
    BuildCommitPhase, Commit, CommitConsumerKey, CommitKey, CommitState, ConsumerOwner,
    GcCandidate, GcCandidateKey, GcClaimState, GcPhase, ManifestRow, Operation, OperationKey,
    PathCurrentKey, PathEntry, PublishPhase, RefOwner, RestoreMember, RestoreMemberKey,
    RestorePhase, RevisionRef, RevisionRefKey, RevisionState, SecondaryIndexKey,
    WorkspaceIncarnationClaim, WorkspaceIncarnationClaimKey,
};
use crate::command::projection::index_rows;
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, CommitId, RootId, WorkspaceIncarnationId};
use crate::path::NormPath;
use crate::shard::MetaShard;
use crate::store::{ShardSnapshot, Snapshot, TxnStore};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub(super) struct Checker<'a> {
    pub(super) snap: &'a ShardSnapshot,
    pub(super) root: RootId,
    pub(super) findings: Vec<Finding>,
    pub(super) stats: FsckStats,
}

impl Checker<'_> {
    fn find(&mut self, kind: FindingKind, subject: impl Into<String>, detail: impl Into<String>) {
        self.findings.push(Finding {
            kind,
            subject: subject.into(),
            detail: detail.into(),
        });
    }

    /// Every row of `family` under the root, undecodable keys/values reported as
    /// `UnreadableRow` by the caller's decoder.
    fn rows(&self, family: Family, what: &'static str) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.snap.rows(family, self.root.as_bytes(), what)
    }

    fn unreadable(&mut self, family: &str, key: &[u8], e: &Error) {
        self.find(
            FindingKind::UnreadableRow,
            format!("{family} row {}", crate::ids::to_hex(key)),
            e.to_string(),
        );
    }
}

pub(super) fn rev_subject(rev: &ArtifactRevisionId) -> String {
    format!("revision {rev}")
}

pub(super) fn path_subject(
    workbench: Option<&str>,
    inc: &WorkspaceIncarnationId,
    path: &NormPath,
) -> String {
    match workbench {
        Some(w) => format!("path {w}/{path}"),
        None => format!("path {path} (incarnation {inc})"),
    }
}

/// Per-revision facts gathered from the manifest rows.
#[derive(Default)]
pub(super) struct ManifestFacts {
    pub(super) rows: Vec<ManifestRow>,
}

/// Checks the store (see the module docs). Never fails on corrupt rows: they become
/// `UnreadableRow` findings.
///
/// Errors: storage errors only (and [`Error::Codec`] for a corrupt System recovery tail, which
/// the open would already have refused).
pub fn check(shard: &MetaShard) -> Result<FsckReport> {
    let mut scrubbed = FsckReport::default();
    if let Some(db) = shard.inner.store.holt_db() {
        let report = db.scrub();
        scrubbed.stats.metadata_blocks = report.blocks;
        scrubbed
            .findings
            .extend(report.damaged.into_iter().map(|e| match e {
                holt::Error::Corrupt {
                    file,
                    offset,
                    reason,
                } => Finding {
                    kind: FindingKind::DamagedMetadataBlock,
                    subject: format!("{} at byte {offset}", file.display()),
                    detail: reason,
                },
                other => Finding {
                    kind: FindingKind::DamagedMetadataBlock,
                    subject: "metadata images".into(),
                    detail: other.to_string(),
                },
            }));
    }
    if !scrubbed.is_clean() {
        scrubbed.rows_skipped = true;
        return Ok(scrubbed);
    }
    let snap = shard.inner.store.snapshot();
    let root = shard.root_id();
    let mut c = Checker {
        snap: &snap,
        root,
        findings: Vec::new(),
        stats: FsckStats {
            read_version: snap.version(),
            ..scrubbed.stats
        },
    };

    // Workbench ids of incarnations.
    let mut workbench: HashMap<WorkspaceIncarnationId, String> = HashMap::new();
    for (k, v) in c.rows(
        Family::WorkspaceIncarnationClaim,
        "workspace_incarnation_claim",
    )? {
        match (
            WorkspaceIncarnationClaimKey::decode(&k),
            WorkspaceIncarnationClaim::decode(&v),
        ) {
            (Ok(key), Ok(claim)) => {
                workbench.insert(key.incarnation, claim.workbench_id);
            }
            (Err(e), _) | (_, Err(e)) => c.unreadable("workspace_incarnation_claim", &k, &e),
        }
    }

    // PathCurrent: references expected, index rows expected, file/directory clashes.
    let mut paths: HashMap<(WorkspaceIncarnationId, NormPath), ArtifactRevisionId> = HashMap::new();
    let mut expected_index: BTreeMap<Vec<u8>, (Vec<u8>, String)> = BTreeMap::new();
    let mut previous_key: Option<Vec<u8>> = None;
    for (k, v) in c.rows(Family::PathCurrent, "path_current")? {
        let (key, entry) = match (PathCurrentKey::decode(&k), PathEntry::decode(&v)) {
            (Ok(key), Ok(entry)) => (key, entry),
            (Err(e), _) | (_, Err(e)) => {
                c.unreadable("path_current", &k, &e);
                continue;
            }
        };
        c.stats.paths += 1;
        let wb = workbench.get(&key.incarnation).cloned();
        let subject = path_subject(wb.as_deref(), &key.incarnation, &key.path);
        // Keys sort `a/…` (a | NUL …) immediately before the exact row `a` (a | 0x01): the row
        // just before an exact row is one of its descendants iff it starts with `a | NUL`.
        if let (Some(prev), Some(stem)) = (
            &previous_key,
            k.strip_suffix(&[crate::path::EXACT_TERMINATOR]),
        ) {
            let mut dir = stem.to_vec();
            dir.push(crate::path::COMPONENT_DELIMITER);
            if prev.starts_with(&dir) {
                c.find(
                    FindingKind::FileDirectoryClash,
                    subject.clone(),
                    "the path is a file and also has descendant files",
                );
            }
        }
        previous_key = Some(k.clone());
        let ref_key = revision_ref::key(
            &root,
            &RefOwner::Path {
                incarnation: key.incarnation,
                path: key.path.clone(),
            },
            &entry.artifact_revision_id,
        );
        if snap.get(Family::RevisionRef, &ref_key)?.is_none() {
            c.find(
                FindingKind::PathReferenceMissing,
                subject.clone(),
                format!(
                    "no RevisionRef(Path) for its revision {}",
                    entry.artifact_revision_id
                ),
            );
        }
        match &wb {
            Some(w) => match index_rows(&root, &key.incarnation, w, &key.path, &entry) {
                Ok(rows) => {
                    for (ik, iv) in rows {
                        expected_index.insert(ik, (iv, subject.clone()));
                    }
                }
                Err(e) => c.find(FindingKind::UnreadableRow, subject.clone(), e.to_string()),
            },
            None => c.find(
                FindingKind::UnreadableRow,
                subject.clone(),
                "the incarnation has no WorkspaceIncarnationClaim (its index rows cannot be derived)",
            ),
        }
        paths.insert((key.incarnation, key.path), entry.artifact_revision_id);
    }

    // Commits and builds in progress (for commit references).
    let mut commits: BTreeMap<CommitId, Commit> = BTreeMap::new();
    for (k, v) in c.rows(Family::Commit, "commit")? {
        match (CommitKey::decode(&k), Commit::decode(&v)) {
            (Ok(key), Ok(commit)) => {
                commits.insert(key.commit_id, commit);
            }
            (Err(e), _) | (_, Err(e)) => c.unreadable("commit", &k, &e),
        }
    }
    let mut building: BTreeSet<CommitId> = BTreeSet::new();
    let mut restores = Vec::new();
    let mut gc_ops: BTreeMap<crate::ids::OperationId, crate::codec::GcOperation> = BTreeMap::new();
    let mut live_staged_ops = BTreeSet::new();
    for (k, v) in c.rows(Family::Operation, "operation")? {
        let key = match OperationKey::decode(&k) {
            Ok(key) => key,
            Err(e) => {
                c.unreadable("operation", &k, &e);
                continue;
            }
        };
        match Operation::decode_for_kind(key.kind, &v) {
            Ok(Operation::BuildCommit(b)) => {
                if !matches!(
                    b.phase,
                    BuildCommitPhase::Complete | BuildCommitPhase::Cleaned
                ) {
                    building.insert(b.commit_id);
                }
            }
            Ok(Operation::Restore(r)) => restores.push((key.operation_id, *r)),
            Ok(Operation::Gc(g)) => {
                gc_ops.insert(key.operation_id, g);
            }
            Ok(Operation::Publish(p)) => {
                if p.phase != PublishPhase::Published {
                    live_staged_ops.insert(key.operation_id);
                }
            }
            Ok(Operation::CommitRetire(_)) | Ok(Operation::Reserve(_)) => {}
            Err(e) => c.unreadable("operation", &k, &e),
        }
    }

    // RevisionRef rows.
    let mut ref_counts: HashMap<ArtifactRevisionId, (u64, u64)> = HashMap::new();
    let mut dependency_refs: BTreeSet<(ArtifactRevisionId, ArtifactRevisionId)> = BTreeSet::new();
    for (k, v) in c.rows(Family::RevisionRef, "revision_ref")? {
        let (key, value) = match (RevisionRefKey::decode(&k), RevisionRef::decode(&v)) {
            (Ok(key), Ok(value)) => (key, value),
            (Err(e), _) | (_, Err(e)) => {
                c.unreadable("revision_ref", &k, &e);
                continue;
            }
        };
        c.stats.references += 1;
        let slot = ref_counts.entry(key.target).or_default();
        slot.0 += 1;
        slot.1 = slot.1.max(value.reference_epoch_at_add);
        match &key.owner {
            RefOwner::Path { incarnation, path } => {
                if paths.get(&(*incarnation, path.clone())) != Some(&key.target) {
                    let wb = workbench.get(incarnation).cloned();
                    c.find(
                        FindingKind::PathReferenceOrphan,
                        path_subject(wb.as_deref(), incarnation, path),
                        format!(
                            "RevisionRef(Path) to revision {} but PathCurrent does not name it",
                            key.target
                        ),
                    );
                }
            }
            RefOwner::Commit(id) => {
                let ok = building.contains(id)
                    || commits.get(id).is_some_and(|cm| {
                        matches!(cm.state, CommitState::Sealed | CommitState::Retiring)
                    });
                if !ok {
                    c.find(
                        FindingKind::CommitReferenceOrphan,
                        format!("commit {}", id.to_hex()),
                        format!(
                            "RevisionRef(Commit) to revision {} but the commit is {}",
                            key.target,
                            commits.get(id).map_or_else(
                                || "absent and not being built".to_owned(),
                                |cm| format!("{:?}", cm.state)
                            )
                        ),
                    );
                }
            }
            RefOwner::RevisionDependency { child } => {
                dependency_refs.insert((*child, key.target));
            }
        }
    }

    // GcCandidate rows.
    let mut candidates: HashMap<(ArtifactRevisionId, u64), GcCandidate> = HashMap::new();
    for (k, v) in c.rows(Family::GcCandidate, "gc_candidate")? {
        match (GcCandidateKey::decode(&k), GcCandidate::decode(&v)) {
            (Ok(key), Ok(cand)) => {
                c.stats.gc_candidates += 1;
                candidates.insert((key.revision, key.reference_epoch), cand);
            }
            (Err(e), _) | (_, Err(e)) => c.unreadable("gc_candidate", &k, &e),
        }
    }

    // Manifests grouped by revision (one ordered scan).
    let mut manifests: HashMap<ArtifactRevisionId, ManifestFacts> = HashMap::new();
    for (k, v) in c.rows(Family::ArtifactManifest, "artifact_manifest")? {
        match crate::codec::ArtifactManifestKey::decode(&k) {
            Ok(key) => match ManifestRow::decode_value(key.object_index, &v) {
                Ok(row) => manifests.entry(key.revision).or_default().rows.push(row),
                Err(e) => c.unreadable("artifact_manifest", &k, &e),
            },
            Err(e) => c.unreadable("artifact_manifest", &k, &e),
        }
    }

    // ArtifactRevision rows.
    let mut revisions: HashMap<ArtifactRevisionId, RevisionState> = HashMap::new();
    for (k, v) in c.rows(Family::ArtifactRevision, "artifact_revision")? {
        let (key, row) = match (
            ArtifactRevisionKey::decode(&k),
            ArtifactRevision::decode(&v),
        ) {
            (Ok(key), Ok(row)) => (key, row),
            (Err(e), _) | (_, Err(e)) => {
                c.unreadable("artifact_revision", &k, &e);
                continue;
            }
        };
        c.stats.revisions += 1;
        let rev = key.revision;
        revisions.insert(rev, row.state);
        let subject = rev_subject(&rev);
        let (refs, max_epoch) = ref_counts.get(&rev).copied().unwrap_or((0, 0));
        if refs != row.strong_reference_count {
            c.find(
                FindingKind::ReferenceCountMismatch,
                subject.clone(),
                format!(
                    "strong_reference_count is {} but {refs} RevisionRef row(s) target it",
                    row.strong_reference_count
                ),
            );
        }
        if max_epoch > row.reference_epoch {
            c.find(
                FindingKind::ReferenceEpochBehind,
                subject.clone(),
                format!(
                    "reference_epoch is {} but a reference was added at epoch {max_epoch}",
                    row.reference_epoch
                ),
            );
        }
        if refs > 0 && row.state != RevisionState::Available {
            c.find(
                FindingKind::ReferenceToUnavailableRevision,
                subject.clone(),
                format!("{refs} reference(s) target a {:?} revision", row.state),
            );
        }
        let facts = manifests.remove(&rev).unwrap_or_default();
        let gc_id = crate::ops::gc::operation_id(&root, &rev, row.reference_epoch);
        let cand = candidates.get(&(rev, row.reference_epoch));
        match row.state {
            RevisionState::Deleted => {
                if !facts.rows.is_empty() {
                    c.find(
                        FindingKind::DeletedRevisionResidue,
                        subject.clone(),
                        format!("{} manifest row(s) remain", facts.rows.len()),
                    );
                }
                continue;
            }
            RevisionState::Available => {
                if row.strong_reference_count == 0 {
                    let ok = cand.is_some_and(|cd| {
                        cd.claim_state == GcClaimState::Candidate
                            && Some(cd.last_zero_ref_version) == row.last_zero_ref_version
                    });
                    if !ok {
                        c.find(
                            FindingKind::GcCandidateMissing,
                            subject.clone(),
                            format!(
                                "no reference holds it but no GcCandidate exists at epoch {}",
                                row.reference_epoch
                            ),
                        );
                    }
                }
            }
            RevisionState::Deleting | RevisionState::Quarantined => {
                let op = gc_ops.get(&gc_id);
                let expected_claim = if row.state == RevisionState::Deleting {
                    GcClaimState::Claimed
                } else {
                    GcClaimState::Quarantined
                };
                let op_ok = op.is_some_and(|o| match row.state {
                    RevisionState::Deleting => {
                        matches!(o.phase, GcPhase::Claimed | GcPhase::Deleting)
                    }
                    _ => o.phase == GcPhase::Quarantined,
                });
                if !op_ok || cand.map(|cd| cd.claim_state) != Some(expected_claim) {
                    c.find(
                        FindingKind::GcOperationMismatch,
                        subject.clone(),
                        format!(
                            "revision is {:?} but its Gc operation is {} and its candidate {}",
                            row.state,
                            op.map_or_else(|| "absent".to_owned(), |o| format!("{:?}", o.phase)),
                            cand.map_or_else(
                                || "absent".to_owned(),
                                |cd| format!("{:?}", cd.claim_state)
                            )
                        ),
                    );
                }
            }
        }
        // Manifest: row count and digest.
        if facts.rows.len() as u64 != row.block_count {
            c.find(
                FindingKind::ManifestMismatch,
                subject.clone(),
                format!(
                    "block_count is {} but {} manifest row(s) exist",
                    row.block_count,
                    facts.rows.len()
                ),
            );
        } else if crate::codec::manifest_digest_uri(&facts.rows) != row.manifest_digest_uri {
            c.find(
                FindingKind::ManifestMismatch,
                subject.clone(),
                "the manifest rows do not hash to manifest_digest_uri",
            );
        }
        // Dependencies: the sealed set against the manifest and its references.
        let owners: BTreeSet<ArtifactRevisionId> = facts
            .rows
            .iter()
            .map(|r| r.physical_owner_revision)
            .filter(|o| *o != rev)
            .collect();
        if owners.len() as u64 != u64::from(row.dependency_count)
            || crate::ops::publish::dependency_digest(&owners) != row.dependency_digest
        {
            c.find(
                FindingKind::DependencyMismatch,
                subject.clone(),
                format!(
                    "the manifest reuses blocks of {} revision(s) but the seal says {} (or its digest differs)",
                    owners.len(),
                    row.dependency_count
                ),
            );
        }
        for owner in &owners {
            if !dependency_refs.remove(&(rev, *owner)) {
                c.find(
                    FindingKind::DependencyMismatch,
                    subject.clone(),
                    format!("reuses blocks of {owner} without a RevisionDependency reference"),
                );
            }
        }
    }
    for (child, target) in dependency_refs {
        c.find(
            FindingKind::DependencyReferenceOrphan,
            rev_subject(&target),
            format!("RevisionDependency from {child}, which does not reuse its blocks"),
        );
    }
    for (rev, _) in ref_counts.iter() {
        if !revisions.contains_key(rev) {
            c.find(
                FindingKind::DanglingReference,
                rev_subject(rev),
                "references target a revision that does not exist",
            );
        }
    }
    for (rev, facts) in manifests {
        c.find(
            FindingKind::ManifestMismatch,
            rev_subject(&rev),
            format!(
                "{} manifest row(s) of a revision that does not exist",
                facts.rows.len()
            ),
        );
    }
    for ((rev, _), _) in candidates {
        if !revisions.contains_key(&rev) {
            c.find(
                FindingKind::GcCandidateOrphan,
                rev_subject(&rev),
                "a GcCandidate names a revision that does not exist",
            );
        }
    }

    // Commit seals, parents, consumers.
    for (id, commit) in &commits {
        c.stats.commits += 1;
        let subject = format!("commit {}", id.to_hex());
        let mut consumers = 0u64;
        snap.for_each_row(
            Family::CommitConsumer,
            &commit_consumer::commit_prefix(&root, id),
            "commit_consumer",
            |_, _| {
                consumers += 1;
                Ok(())
            },
        )?;
        if consumers != commit.consumer_count {
            c.find(
                FindingKind::CommitConsumerMismatch,
                subject.clone(),
                format!(
                    "consumer_count is {} but {consumers} CommitConsumer row(s) exist",
                    commit.consumer_count
                ),
            );
        }
        if commit.state != CommitState::Sealed {
            continue;
        }
        let seals = crate::ops::commit::recompute_seals(&snap, &root, id)?;
        if seals.member_count != commit.member_count || seals.member_digest != commit.member_digest
        {
            c.find(
                FindingKind::CommitSealMismatch,
                subject.clone(),
                format!(
                    "member seal is {} row(s) but {} CommitMember row(s) (or their digest) differ",
                    commit.member_count, seals.member_count
                ),
            );
        }
        if seals.revision_count != commit.unique_revision_count
            || seals.revision_digest != commit.revision_digest
        {
            c.find(
                FindingKind::CommitSealMismatch,
                subject.clone(),
                format!(
                    "revision seal is {} but {} RevisionRef(Commit) row(s) (or their digest) differ",
                    commit.unique_revision_count, seals.revision_count
                ),
            );
        }
        if crate::ops::commit::parent_digest(&commit.parents) != commit.parent_digest {
            c.find(
                FindingKind::CommitParentMismatch,
                subject.clone(),
                "parent_digest does not match the parent list",
            );
        }
        for p in &commit.parents {
            let ck = CommitConsumerKey {
                root,
                commit_id: *p,
                owner: ConsumerOwner::ChildCommit { child: *id },
            }
            .encode();
            if snap.get(Family::CommitConsumer, &ck)?.is_none() {
                c.find(
                    FindingKind::CommitParentMismatch,
                    subject.clone(),
                    format!("parent {} has no ChildCommit consumer row", p.to_hex()),
                );
            }
        }
    }

    // Restore seals.
    for (op_id, r) in &restores {
        c.stats.restores += 1;
        if !matches!(
            r.phase,
            RestorePhase::SourceSealed | RestorePhase::Ready | RestorePhase::Complete
        ) {
            continue;
        }
        let subject = format!("restore {}", op_id.to_hex());
        let prefix = {
            let mut p = root.as_bytes().to_vec();
            p.extend_from_slice(op_id.as_bytes());
            p
        };
        let mut seq = 0u64;
        let mut digest = crate::ops::restore::EMPTY_MEMBER_DIGEST;
        let mut problems = Vec::new();
        for (k, v) in snap.rows(Family::RestoreMember, &prefix, "restore_member")? {
            let (key, m) = match (RestoreMemberKey::decode(&k), RestoreMember::decode(&v)) {
                (Ok(key), Ok(m)) => (key, m),
                (Err(e), _) | (_, Err(e)) => {
                    c.unreadable("restore_member", &k, &e);
                    continue;
                }
            };
            if key.member_sequence != seq {
                problems.push(format!(
                    "member sequence {} where {seq} was expected",
                    key.member_sequence
                ));
            }
            if r.phase != RestorePhase::Complete {
                let staged = snap.get(
                    Family::PathCurrent,
                    &path_current::key(&root, &r.destination_incarnation, &m.destination_path),
                )?;
                let ok = staged.is_some_and(|b| {
                    crate::ops::restore::member_row_digest(
                        key.member_sequence,
                        &m.destination_path,
                        &b,
                    ) == m.row_digest
                });
                if !ok {
                    problems.push(format!("member {seq} does not match its staged path"));
                }
            }
            digest = crate::ops::restore::chain_member_digest(&digest, &m.row_digest);
            seq += 1;
        }
        if seq != r.member_count || digest != r.member_digest {
            problems.push(format!(
                "sealed {} member(s) but {seq} RestoreMember row(s) (or their digest) differ",
                r.member_count
            ));
        }
        for p in problems {
            c.find(FindingKind::RestoreSealMismatch, subject.clone(), p);
        }
    }

    // SecondaryIndex rows versus PathCurrent.
    for (k, v) in c.rows(Family::SecondaryIndex, "secondary_index")? {
        c.stats.index_rows += 1;
        match expected_index.remove(&k) {
            Some((value, _)) if value == v => {}
            Some((_, subject)) => c.find(
                FindingKind::IndexRowMismatch,
                subject,
                format!("index row {} holds another value", index_row_name(&k)),
            ),
            None => {
                let subject = match SecondaryIndexKey::decode(&k) {
                    Ok(key) => path_subject(
                        workbench.get(&key.incarnation).map(String::as_str),
                        &key.incarnation,
                        &key.path,
                    ),
                    Err(_) => "secondary_index".to_owned(),
                };
                c.find(
                    FindingKind::IndexRowStale,
                    subject,
                    format!(
                        "index row {} is not projected by PathCurrent",
                        index_row_name(&k)
                    ),
                );
            }
        }
    }
    for (k, (_, subject)) in expected_index {
        c.find(
            FindingKind::IndexRowMissing,
            subject,
            format!("index row {} is missing", index_row_name(&k)),
        );
    }

    let mut findings = c.findings;
    let mut stats = c.stats;
    drop(snap);

    // RecoveryOutbox chain (the one public verification).
    match shard.verify_recovery_outbox() {
        Ok(summary) => stats.outbox_records = summary.records,
        Err(Error::RecoveryOutboxCorrupt { lsn, reason }) => findings.push(Finding {
            kind: FindingKind::RecoveryOutboxBroken,
            subject: format!("lsn {lsn}"),
            detail: reason,
        }),
        Err(e) => findings.push(Finding {
            kind: FindingKind::RecoveryOutboxBroken,
            subject: "recovery outbox".into(),
            detail: e.to_string(),
        }),
    }
    // Snapshot, alias and hold invariants.
    match crate::ops::snapshot::check_invariants(shard) {
        Ok(problems) => findings.extend(problems.into_iter().map(|p| Finding {
            kind: FindingKind::SnapshotInvariant,
            subject: "snapshots".into(),
            detail: p,
        })),
        Err(e) => findings.push(Finding {
            kind: FindingKind::SnapshotInvariant,
            subject: "snapshots".into(),
            detail: e.to_string(),
        }),
    }
    Ok(FsckReport {
        findings,
        stats,
        rows_skipped: false,
    })
}

/// `field=value` of an index key for messages (the raw key when it does not decode).
pub(super) fn index_row_name(k: &[u8]) -> String {
    match SecondaryIndexKey::decode(k) {
        Ok(key) => format!("{}={:?}", key.index_id.as_str(), key.value),
        Err(_) => crate::ids::to_hex(k),
    }
}
