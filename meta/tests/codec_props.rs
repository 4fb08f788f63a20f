//! Property tests for the invariants the cargo-fuzz targets in `fuzz/` check (so they also run in
//! plain `cargo test -p meta`): the secondary-index value codec, the History key, the
//! RevisionRef / CommitConsumer owner ids, and the RecoveryOutbox record.

use meta::codec::commit_consumer::{CommitConsumerKey, CommitConsumerKind, ConsumerOwner};
use meta::codec::history::{key_prefix, source_family, HistoryKey};
use meta::codec::revision_ref::{RefOwner, ReferenceKind, RevisionRefKey};
use meta::ids::{
    ArtifactRevisionId, CommitId, OperationId, RootId, TagName, WorkspaceIncarnationId,
};
use meta::index::value_codec::{IndexValue, Timestamp};
use meta::schema::Family;
use proptest::prelude::*;

fn index_value() -> impl Strategy<Value = IndexValue> {
    prop_oneof![
        Just(IndexValue::Null),
        any::<bool>().prop_map(IndexValue::Bool),
        any::<i64>().prop_map(IndexValue::Int),
        any::<u64>().prop_map(IndexValue::UInt),
        prop_oneof![
            any::<f64>(),
            (-1.0e6f64..1.0e6),
            Just(0.0),
            Just(-0.0),
            (any::<i32>()).prop_map(f64::from)
        ]
        .prop_filter_map("finite", |f| IndexValue::float(f).ok()),
        (any::<i64>(), 0u32..1_000_000_000)
            .prop_filter_map("timestamp", |(s, n)| Timestamp::new(s, n).ok())
            .prop_map(IndexValue::Timestamp),
        "[a-z\\x00\\u{1}\\u{ff}é]{0,12}".prop_map(IndexValue::String),
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), Just(0xff), any::<u8>()],
            0..12
        )
        .prop_map(IndexValue::Bytes),
    ]
}

fn history_source() -> impl Strategy<Value = Family> {
    (1u8..=0x17).prop_map(|t| source_family(t).expect("a source family tag"))
}

fn id16() -> impl Strategy<Value = [u8; 16]> {
    any::<[u8; 16]>()
}

fn ref_owner() -> impl Strategy<Value = RefOwner> {
    prop_oneof![
        (id16(), "[a-z]{1,4}(/[a-z\\u{1}é]{1,4}){0,3}").prop_map(|(i, p)| RefOwner::Path {
            incarnation: WorkspaceIncarnationId(i),
            path: meta::normalize(&p).expect("valid path"),
        }),
        any::<[u8; 32]>().prop_map(|c| RefOwner::Commit(CommitId(c))),
        id16().prop_map(|c| RefOwner::RevisionDependency {
            child: ArtifactRevisionId(c)
        }),
    ]
}

fn consumer_owner() -> impl Strategy<Value = ConsumerOwner> {
    prop_oneof![
        id16().prop_map(|i| ConsumerOwner::WorkbenchHead {
            incarnation: WorkspaceIncarnationId(i)
        }),
        (id16(), "[A-Za-z0-9 .é\\u{1}]{1,20}").prop_map(|(i, t)| ConsumerOwner::Tag {
            incarnation: WorkspaceIncarnationId(i),
            tag: TagName::new(t).expect("valid tag"),
        }),
        id16().prop_map(|o| ConsumerOwner::Lease {
            operation_id: OperationId(o)
        }),
        any::<[u8; 32]>().prop_map(|c| ConsumerOwner::ChildCommit { child: CommitId(c) }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn index_values_round_trip_and_encodings_preserve_order(a in index_value(), b in index_value()) {
        let (ea, eb) = (a.encode().unwrap(), b.encode().unwrap());
        prop_assert_eq!(IndexValue::decode(&ea).unwrap(), a.clone());
        prop_assert_eq!(ea.cmp(&eb), a.cmp(&b));
        if ea != eb {
            prop_assert!(!ea.starts_with(&eb) && !eb.starts_with(&ea));
        }
        prop_assert!(ea.starts_with(&a.order_prefix().unwrap()));
        let mut cont = ea.clone();
        cont.extend_from_slice(&eb);
        prop_assert_eq!(IndexValue::decode_prefix(&cont).unwrap(), (a, ea.len()));
    }

    #[test]
    fn non_finite_floats_are_rejected(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        prop_assert_eq!(IndexValue::float(f).is_ok(), f.is_finite());
    }

    #[test]
    fn index_value_decoder_accepts_only_canonical_bytes(b in proptest::collection::vec(any::<u8>(), 0..24)) {
        if let Ok(v) = IndexValue::decode(&b) {
            prop_assert_eq!(v.encode().unwrap(), b);
        }
    }

    #[test]
    fn history_keys_round_trip_sort_newest_first_and_never_share_prefixes(
        sa in history_source(), ka in proptest::collection::vec(any::<u8>(), 0..8), va in any::<u64>(),
        sb in history_source(), kb in proptest::collection::vec(any::<u8>(), 0..8), vb in any::<u64>(),
    ) {
        let a = HistoryKey { source: sa, user_key: ka, commit_version: va };
        let b = HistoryKey { source: sb, user_key: kb, commit_version: vb };
        let (ea, eb) = (a.encode(), b.encode());
        prop_assert_eq!(HistoryKey::decode(&ea).unwrap(), a.clone());
        if (a.source, &a.user_key) == (b.source, &b.user_key) {
            prop_assert_eq!(ea.cmp(&eb), vb.cmp(&va));
        } else {
            prop_assert!(!eb.starts_with(&key_prefix(a.source, &a.user_key)));
        }
    }

    #[test]
    fn history_key_decoder_rejects_non_sources_and_accepts_only_canonical_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..24)
    ) {
        if let Ok(k) = HistoryKey::decode(&b) {
            prop_assert_eq!(k.encode(), b.clone());
            prop_assert!(k.source.versioned());
        }
        if let Some(&t) = b.first() {
            if source_family(t).is_none() {
                prop_assert!(HistoryKey::decode(&b).is_err());
            }
        }
    }

    #[test]
    fn revision_ref_owner_ids_round_trip(root in id16(), owner in ref_owner(), target in id16()) {
        let bytes = owner.owner_id_bytes();
        prop_assert_eq!(RefOwner::from_owner_id_bytes(owner.kind(), &bytes).unwrap(), owner.clone());
        let key = RevisionRefKey { root: RootId(root), owner, target: ArtifactRevisionId(target) };
        prop_assert_eq!(RevisionRefKey::decode(&key.encode()).unwrap(), key);
    }

    #[test]
    fn commit_consumer_owner_ids_round_trip(root in id16(), commit in any::<[u8; 32]>(), owner in consumer_owner()) {
        let bytes = owner.owner_id_bytes();
        prop_assert_eq!(ConsumerOwner::from_owner_id_bytes(owner.kind(), &bytes).unwrap(), owner.clone());
        let key = CommitConsumerKey { root: RootId(root), commit_id: CommitId(commit), owner };
        prop_assert_eq!(CommitConsumerKey::decode(&key.encode()).unwrap(), key);
    }

    #[test]
    fn owner_id_decoders_accept_only_canonical_bytes(b in proptest::collection::vec(any::<u8>(), 0..60)) {
        for kind in [ReferenceKind::Path, ReferenceKind::Commit, ReferenceKind::RevisionDependency] {
            if let Ok(o) = RefOwner::from_owner_id_bytes(kind, &b) {
                prop_assert_eq!(o.kind(), kind);
                prop_assert_eq!(o.owner_id_bytes(), b.clone());
            }
        }
        for kind in [CommitConsumerKind::WorkbenchHead, CommitConsumerKind::Tag, CommitConsumerKind::Lease, CommitConsumerKind::ChildCommit] {
            if let Ok(o) = ConsumerOwner::from_owner_id_bytes(kind, &b) {
                prop_assert_eq!(o.kind(), kind);
                prop_assert_eq!(o.owner_id_bytes(), b.clone());
            }
        }
    }
}
