//! Fuzz the discriminated owner-id codecs (docs/metadata-format.md): RevisionRef.reference_owner_id
//! (Path / Commit / RevisionDependency) and CommitConsumer.consumer_owner_id
//! (WorkbenchHead / Tag / Lease / ChildCommit), alone and inside their full keys:
//! * arbitrary bytes never panic; whatever decodes is canonical (re-encodes to the same bytes)
//!   and keeps its kind;
//! * owners built from the input (a normalized path, a validated tag name) round-trip through
//!   the owner id and the full key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta::codec::commit_consumer::{CommitConsumerKey, CommitConsumerKind, ConsumerOwner};
use meta::codec::revision_ref::{RefOwner, ReferenceKind, RevisionRefKey};
use meta::ids::{ArtifactRevisionId, CommitId, RootId, TagName, WorkspaceIncarnationId};

const REF_KINDS: [ReferenceKind; 3] = [
    ReferenceKind::Path,
    ReferenceKind::Commit,
    ReferenceKind::RevisionDependency,
];
const CONSUMER_KINDS: [CommitConsumerKind; 4] = [
    CommitConsumerKind::WorkbenchHead,
    CommitConsumerKind::Tag,
    CommitConsumerKind::Lease,
    CommitConsumerKind::ChildCommit,
];

fn id16(data: &[u8], salt: u8) -> [u8; 16] {
    let mut a = [salt; 16];
    for (i, b) in data.iter().take(16).enumerate() {
        a[i] ^= b;
    }
    a
}

fuzz_target!(|data: &[u8]| {
    // Raw decoding of owner ids and keys.
    for kind in REF_KINDS {
        if let Ok(o) = RefOwner::from_owner_id_bytes(kind, data) {
            assert_eq!(o.kind(), kind);
            assert_eq!(o.owner_id_bytes(), data, "non-canonical RevisionRef owner");
        }
    }
    for kind in CONSUMER_KINDS {
        if let Ok(o) = ConsumerOwner::from_owner_id_bytes(kind, data) {
            assert_eq!(o.kind(), kind);
            assert_eq!(
                o.owner_id_bytes(),
                data,
                "non-canonical CommitConsumer owner"
            );
        }
    }
    if let Ok(k) = RevisionRefKey::decode(data) {
        assert_eq!(k.encode(), data, "non-canonical RevisionRef key");
    }
    if let Ok(k) = CommitConsumerKey::decode(data) {
        assert_eq!(k.encode(), data, "non-canonical CommitConsumer key");
    }

    // Structured owners.
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let root = RootId(id16(rest, 1));
    let inc = WorkspaceIncarnationId(id16(rest, 2));
    let rev = ArtifactRevisionId(id16(rest, 3));
    let mut c = [4u8; 32];
    c[..16].copy_from_slice(&id16(rest, 5));
    let commit = CommitId(c);
    let ref_owner = match sel % 3 {
        0 => match meta::normalize(&text) {
            Ok(path) => Some(RefOwner::Path {
                incarnation: inc,
                path,
            }),
            Err(_) => None,
        },
        1 => Some(RefOwner::Commit(commit)),
        _ => Some(RefOwner::RevisionDependency { child: rev }),
    };
    if let Some(owner) = ref_owner {
        let bytes = owner.owner_id_bytes();
        assert_eq!(
            RefOwner::from_owner_id_bytes(owner.kind(), &bytes).unwrap(),
            owner
        );
        let key = RevisionRefKey {
            root,
            owner,
            target: rev,
        };
        assert_eq!(RevisionRefKey::decode(&key.encode()).unwrap(), key);
    }
    let consumer = match (sel / 3) % 4 {
        0 => Some(ConsumerOwner::WorkbenchHead { incarnation: inc }),
        1 => TagName::new(text.as_ref())
            .ok()
            .map(|tag| ConsumerOwner::Tag {
                incarnation: inc,
                tag,
            }),
        2 => Some(ConsumerOwner::Lease {
            operation_id: meta::ids::OperationId(id16(rest, 6)),
        }),
        _ => Some(ConsumerOwner::ChildCommit { child: commit }),
    };
    if let Some(owner) = consumer {
        let bytes = owner.owner_id_bytes();
        assert_eq!(
            ConsumerOwner::from_owner_id_bytes(owner.kind(), &bytes).unwrap(),
            owner
        );
        let key = CommitConsumerKey {
            root,
            commit_id: commit,
            owner,
        };
        assert_eq!(CommitConsumerKey::decode(&key.encode()).unwrap(), key);
    }
});
