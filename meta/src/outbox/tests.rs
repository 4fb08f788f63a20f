use super::*;
use crate::codec::system::{RecoveryTail, KEY_RECOVERY_TAIL};
use crate::codec::CommandResult;
use crate::codec::{WorkspaceCurrent, WorkspaceState};
use crate::family::Family;
use crate::ids::WorkspaceIncarnationId;
use crate::ids::{LogicalShardId, RequestId, RootId};
use crate::store::{Mutation, Predicate};

fn command_entry() -> RecoveryEntry {
    RecoveryEntry::MetadataCommand {
        root_id: RootId([1; 16]),
        logical_shard_id: LogicalShardId([2; 16]),
        placement_generation: 1,
        owner_epoch: 3,
        request_id: RequestId([4; 16]),
        command_digest: [5; 32],
        read_version: 9,
        result: CommandResult::WorkspaceCreated {
            workspace: WorkspaceCurrent {
                incarnation: WorkspaceIncarnationId([6; 16]),
                workspace_revision: 1,
                state: WorkspaceState::Visible,
                owning_operation: None,
                created_version: 10,
                modified_version: 10,
                expires_at_unix_ms: None,
            },
        },
    }
}

fn hex_to_bytes(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn keys_have_the_seed_layout_and_reject_other_shapes() {
    assert_eq!(header_key(0x0102), hex_to_bytes("00 0000000000000102"));
    assert_eq!(
        chunk_key(7, 3),
        hex_to_bytes("01 0000000000000007 00000003")
    );
    assert_eq!(decode_header_key(&header_key(u64::MAX)).unwrap(), u64::MAX);
    assert_eq!(decode_chunk_key(&chunk_key(8, 9)).unwrap(), (8, 9));
    assert!(decode_header_key(&chunk_key(1, 0)).is_err());
    assert!(decode_chunk_key(&header_key(1)).is_err());
    assert!(decode_header_key(&[0, 1]).is_err());
    assert!(decode_chunk_key(&[1; 14]).is_err());
    // Header keys of every LSN sort before every chunk key, and in LSN order.
    assert!(header_key(u64::MAX) < chunk_key(0, 0));
    assert!(header_key(255) < header_key(256));
    assert!(chunk_key(1, u32::MAX) < chunk_key(2, 0));
}

#[test]
fn header_golden_bytes_and_strict_framing() {
    let h = OutboxHeader {
        chunk_count: 1,
        record_len: 0x20,
        previous_digest: [0xaa; 32],
        chain_digest: [0xbb; 32],
    };
    let b = h.encode();
    let mut want = hex_to_bytes("0001 00000001 0000000000000020");
    want.extend_from_slice(&[0xaa; 32]);
    want.extend_from_slice(&[0xbb; 32]);
    assert_eq!(b, want);
    assert_eq!(b.len(), HEADER_VALUE_BYTES);
    assert_eq!(OutboxHeader::decode(&b).unwrap(), h);
    let mut v2 = b.clone();
    v2[1] = 2;
    assert!(
        OutboxHeader::decode(&v2).is_err(),
        "unknown framing version"
    );
    assert!(OutboxHeader::decode(&b[..b.len() - 1]).is_err());
    let mut wrong_count = h;
    wrong_count.chunk_count = 2;
    assert!(
        OutboxHeader::decode(&wrong_count.encode()).is_err(),
        "chunk count must be ceil(len / 64 KiB)"
    );
}

#[test]
fn chunk_golden_bytes_and_rejections() {
    let c = encode_chunk(b"abc");
    assert_eq!(c, hex_to_bytes("0001 00000003 616263"));
    assert_eq!(decode_chunk(&c).unwrap(), b"abc");
    assert!(decode_chunk(&c[..c.len() - 1]).is_err());
    let mut long = c.clone();
    long.push(0);
    assert!(decode_chunk(&long).is_err());
    let mut v9 = c;
    v9[1] = 9;
    assert!(decode_chunk(&v9).is_err());
}

#[test]
fn record_golden_bytes_for_an_owner_epoch_advance() {
    let entry = RecoveryEntry::OwnerEpochAdvance {
        previous_epoch: 1,
        owner_epoch: 2,
    };
    let muts = vec![
        Mutation::put(Family::System, b"owner_epoch".to_vec(), vec![0, 1, 2]),
        Mutation::Delete {
            family: Family::PathCurrent,
            key: vec![0xee],
        },
    ];
    let b = encode_record(5, 6, &entry, &muts);
    let want = hex_to_bytes(concat!(
        "0002",                                                  // record value version 2
        "0000000000000005",                                      // recovery_lsn
        "0000000000000006",                                      // commit_version
        "02",                                                    // kind OwnerEpochAdvance
        "0000000000000001",                                      // previous epoch
        "0000000000000002",                                      // owner epoch
        "00000002",                                              // two mutations
        "01 f0 0000000b 6f776e65725f65706f6368 00000003 000102", // put system owner_epoch
        "02 03 00000001 ee",                                     // delete path_current [ee]
    ));
    assert_eq!(b, want);
    let r = decode_record(&b).unwrap();
    assert_eq!(r.recovery_lsn, 5);
    assert_eq!(r.commit_version, 6);
    assert_eq!(r.entry, entry);
    assert_eq!(r.mutations, muts);
}

#[test]
fn record_round_trips_every_kind_and_rejects_unknown_values() {
    let muts = vec![Mutation::put(Family::CommandDedupe, vec![1, 2], vec![3])];
    for entry in [
        RecoveryEntry::StoreInitialization {
            root_id: RootId([7; 16]),
            logical_shard_id: LogicalShardId([8; 16]),
            placement_generation: 1,
            owner_epoch: 1,
        },
        RecoveryEntry::OwnerEpochAdvance {
            previous_epoch: 4,
            owner_epoch: 5,
        },
        command_entry(),
    ] {
        let b = encode_record(1, 2, &entry, &muts);
        let r = decode_record(&b).unwrap();
        assert_eq!(r.entry, entry);
        assert_eq!(r.mutations, muts);
        assert!(decode_record(&b[..b.len() - 1]).is_err(), "truncation");
        let mut trailing = b.clone();
        trailing.push(0);
        assert!(decode_record(&trailing).is_err(), "trailing bytes");
        let mut v1 = b.clone();
        v1[1] = 1;
        assert!(
            decode_record(&v1).is_err(),
            "record version 1 is not accepted"
        );
        let mut kind = b.clone();
        kind[18] = 4;
        assert!(decode_record(&kind).is_err(), "unknown kind 4");
    }
    let b = encode_record(
        1,
        2,
        &RecoveryEntry::OwnerEpochAdvance {
            previous_epoch: 0,
            owner_epoch: 1,
        },
        &muts,
    );
    // op byte, then family tag, of the single mutation.
    let op_at = b.len() - (1 + 1 + 4 + 2 + 4 + 1);
    let mut bad_op = b.clone();
    bad_op[op_at] = 3;
    assert!(decode_record(&bad_op).is_err(), "unknown mutation op");
    let mut bad_tag = b.clone();
    bad_tag[op_at + 1] = 0x00;
    assert!(
        decode_record(&bad_tag).is_err(),
        "history tag is not a family"
    );
    let mut huge_count = b;
    let n_at = op_at - 4;
    huge_count[n_at..n_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert!(decode_record(&huge_count).is_err());
}

#[test]
fn chain_digest_is_sha256_of_domain_previous_and_record() {
    use sha2::{Digest, Sha256};
    let prev = [3u8; 32];
    let rec = b"record bytes";
    let mut h = Sha256::new();
    h.update(b"nokv.recovery_outbox.chain.v2\0");
    h.update(prev);
    h.update(rec);
    let want: [u8; 32] = h.finalize().into();
    assert_eq!(chain_digest(&prev, rec), want);
    assert_ne!(chain_digest(&[0; 32], rec), want);
}

#[test]
fn append_chains_from_the_previous_tail_and_splits_large_records() {
    let big = vec![0x5a; 3 * CHUNK_BYTES / 2];
    let muts = vec![Mutation::put(Family::ArtifactManifest, vec![1], big)];
    let first = append(&RecoveryTail::GENESIS, 2, &command_entry(), &muts).unwrap();
    assert_eq!(first.tail.applied_lsn, 1);
    // header + 2 chunks + System tail.
    assert_eq!(first.rows.len(), 4);
    let Mutation::Put { key, value, .. } = &first.rows[0] else {
        panic!("header put expected")
    };
    assert_eq!(key, &header_key(1));
    let header = OutboxHeader::decode(value).unwrap();
    assert_eq!(header.chunk_count, 2);
    assert_eq!(header.previous_digest, [0; 32]);
    assert_eq!(header.chain_digest, first.tail.chain_digest);
    let mut record = Vec::new();
    for (i, row) in first.rows[1..3].iter().enumerate() {
        let Mutation::Put { key, value, .. } = row else {
            panic!("chunk put expected")
        };
        assert_eq!(key, &chunk_key(1, i as u32));
        let payload = decode_chunk(value).unwrap();
        if i == 0 {
            assert_eq!(payload.len(), CHUNK_BYTES);
        }
        record.extend_from_slice(payload);
    }
    assert_eq!(record.len() as u64, header.record_len);
    assert_eq!(chain_digest(&[0; 32], &record), header.chain_digest);
    assert_eq!(decode_record(&record).unwrap().mutations, muts);
    assert_eq!(
        first.tail_predicate,
        Predicate::equals(
            Family::System,
            KEY_RECOVERY_TAIL.to_vec(),
            RecoveryTail::GENESIS.encode()
        )
    );
    let second = append(&first.tail, 3, &command_entry(), &[]).unwrap();
    assert_eq!(second.tail.applied_lsn, 2);
    let Mutation::Put { value, .. } = &second.rows[0] else {
        panic!("header put expected")
    };
    assert_eq!(
        OutboxHeader::decode(value).unwrap().previous_digest,
        first.tail.chain_digest
    );
}

mod props {
    use super::super::*;
    use crate::family::Family;
    use crate::store::Mutation;
    use proptest::prelude::*;

    fn family() -> impl Strategy<Value = Family> {
        (0..Family::ALL.len()).prop_map(|i| Family::ALL[i])
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        (
            family(),
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..80)),
        )
            .prop_map(|(family, key, value)| match value {
                Some(value) => Mutation::Put { family, key, value },
                None => Mutation::Delete { family, key },
            })
    }

    proptest! {
        #[test]
        fn records_round_trip(
            lsn in any::<u64>(),
            cv in any::<u64>(),
            prev in any::<u64>(),
            muts in proptest::collection::vec(mutation(), 0..12),
        ) {
            let entry = RecoveryEntry::OwnerEpochAdvance { previous_epoch: prev, owner_epoch: prev.wrapping_add(1) };
            let b = encode_record(lsn, cv, &entry, &muts);
            let r = decode_record(&b).unwrap();
            prop_assert_eq!(r.recovery_lsn, lsn);
            prop_assert_eq!(r.commit_version, cv);
            prop_assert_eq!(r.entry, entry);
            prop_assert_eq!(r.mutations, muts);
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_decoders(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_record(&b);
            let _ = OutboxHeader::decode(&b);
            let _ = decode_chunk(&b);
            let _ = decode_header_key(&b);
            let _ = decode_chunk_key(&b);
        }
    }
}
