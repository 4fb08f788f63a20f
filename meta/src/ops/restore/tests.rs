//! Unit tests of the restore digests and identities.

use super::*;
use crate::codec::operation::restore_identity_digest;
use crate::codec::RestoreSource;
use crate::ids::{CommitId, SnapshotId};
use crate::path::normalize_stored;
use crate::ArtifactRevisionId;
use crate::RootId;
use crate::WorkspaceIncarnationId;
use sha2::{Digest, Sha256};

#[test]
fn initialization_digest_follows_the_seed_byte_layout() {
    let identity = [0xabu8; 32];
    let entry = b"encoded-path-entry".to_vec();
    let mut bytes = b"nokv.restore.initialization.v3\0".to_vec();
    bytes.extend_from_slice(&identity);
    bytes.extend_from_slice(&[0, 0, 0, 1, 1]);
    bytes.extend_from_slice(&(30u32).to_be_bytes());
    bytes.extend_from_slice(b"metadata/restore_manifest.json");
    bytes.extend_from_slice(&(entry.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&entry);
    let expected: [u8; 32] = Sha256::digest(&bytes).into();
    assert_eq!(initialization_digest(&identity, &entry), expected);
    assert_ne!(initialization_digest(&identity, b"other"), expected);
}

#[test]
fn identity_digest_follows_the_seed_byte_layout_and_names_the_operation() {
    let root = RootId([1; 16]);
    let src_inc = WorkspaceIncarnationId([2; 16]);
    let dst_inc = WorkspaceIncarnationId([3; 16]);
    let source = RestoreSource::Snapshot(SnapshotId(0x0102));
    let mut bytes = b"nokv.restore.operation.v2\0".to_vec();
    bytes.extend_from_slice(&[1; 16]);
    bytes.extend_from_slice(&3u32.to_be_bytes());
    bytes.extend_from_slice(b"src");
    bytes.extend_from_slice(&[2; 16]);
    bytes.push(1);
    bytes.extend_from_slice(&0x0102u64.to_be_bytes());
    bytes.extend_from_slice(&3u32.to_be_bytes());
    bytes.extend_from_slice(b"dst");
    bytes.extend_from_slice(&[3; 16]);
    let expected: [u8; 32] = Sha256::digest(&bytes).into();
    let got = restore_identity_digest(&root, "src", &src_inc, &source, "dst", &dst_inc);
    assert_eq!(got, expected);
    assert_eq!(operation_id_of(&got).as_bytes()[..], expected[..16]);
    let commit = RestoreSource::Commit(CommitId([9; 32]));
    assert_ne!(
        restore_identity_digest(&root, "src", &src_inc, &commit, "dst", &dst_inc),
        got
    );
}

#[test]
fn destination_incarnation_is_stable_per_attempt_and_new_after_reclaim() {
    let root = RootId([1; 16]);
    let src_inc = WorkspaceIncarnationId([2; 16]);
    let source = RestoreSource::Snapshot(SnapshotId(7));
    let first = destination_incarnation_for(&root, "a", &src_inc, &source, "b", None);
    assert_eq!(
        first,
        destination_incarnation_for(&root, "a", &src_inc, &source, "b", None)
    );
    let second = destination_incarnation_for(&root, "a", &src_inc, &source, "b", Some(&first));
    assert_ne!(first, second);
    let other = RestoreSource::Snapshot(SnapshotId(8));
    assert_ne!(
        first,
        destination_incarnation_for(&root, "a", &src_inc, &other, "b", None)
    );
}

#[test]
fn member_digest_binds_sequence_path_entry_and_order() {
    let a = normalize_stored("input/a").unwrap();
    let b = normalize_stored("input/b").unwrap();
    let ra = member_row_digest(0, &a, b"entry-a");
    let rb = member_row_digest(1, &b, b"entry-b");
    assert_ne!(ra, member_row_digest(1, &a, b"entry-a"));
    assert_ne!(ra, member_row_digest(0, &a, b"entry-x"));
    let ab = chain_member_digest(&chain_member_digest(&EMPTY_MEMBER_DIGEST, &ra), &rb);
    let ba = chain_member_digest(&chain_member_digest(&EMPTY_MEMBER_DIGEST, &rb), &ra);
    assert_ne!(ab, ba);
}

#[test]
fn restore_manifest_entry_is_deterministic_and_newer_than_the_source() {
    let desc = RestoreManifestDescriptor {
        revision_id: ArtifactRevisionId([4; 16]),
        logical_size: 10,
        body_digest_uri: format!("sha256:{}", "00".repeat(32)),
        content_type: "application/json".into(),
        producer: "workbench_restore".into(),
        manifest: Vec::new(),
    };
    let e = restore_manifest_entry(41, &desc);
    assert_eq!(e.generation, 42);
    assert_eq!(e.encode(), restore_manifest_entry(41, &desc).encode());
}
