//! The RecoveryOutbox (docs/metadata-format.md, "Shard-Local Families": RecoveryOutbox; "Durable Format
//! Registry"; the outbox paragraph after ReadChanges).
//!
//! Every shard-local write entrypoint appends one logical record to the reserved, unversioned
//! `recovery_outbox` tree **in the same holt atomic batch** as the mutation it describes, and
//! rewrites the System recovery tail ([`crate::codec::system::RecoveryTail`]) in that batch
//! under an Equals predicate on its previous bytes. The entrypoints are:
//!
//! - store initialization (LSN 1: marker, placement, presentation root, owner epoch 1, RootFence);
//! - physical-owner epoch advancement before a writer handle's first write
//!   ([`RecoveryEntry::OwnerEpochAdvance`]);
//! - every [`crate::command::MetadataCommand`];
//! - every monotonic lease-clock observation that changes the persisted lease clock
//!   ([`RecoveryEntry::LeaseClockObservation`], see [`crate::ops::lease_clock`]).
//!
//! ## Rows
//!
//! ```text
//! header key : 0x00 | u64be recovery_lsn                         (9 bytes)
//! header val : u16be 1 | u32be chunk_count | u64be record_len
//!              | previous_chain_digest[32] | chain_digest[32]     (78 bytes)
//! chunk key  : 0x01 | u64be recovery_lsn | u32be chunk_index      (13 bytes)
//! chunk val  : u16be 1 | u32be payload_len | payload
//! ```
//!
//! The logical record (value version 2, below) is cut into `chunk_count =
//! ceil(record_len / CHUNK_BYTES)` chunks; every chunk but the last carries exactly
//! [`CHUNK_BYTES`] (64 KiB) and the last carries the remainder (strict framing: any other split
//! is corruption). The storage framing is value version 1, the logical record value version 2
//! (docs/metadata-format.md, "Durable Format Registry").
//!
//! ## Logical record (value version 2)
//!
//! ```text
//! u16be 2 | u64be recovery_lsn | u64be commit_version | u8 kind | kind body
//! | u32be mutation_count | mutation*
//! kind 1 StoreInitialization: root_id[16] | logical_shard_id[16] | u64be placement_generation
//!                             | u64be owner_epoch
//! kind 2 OwnerEpochAdvance:   u64be previous_epoch | u64be owner_epoch
//! kind 3 MetadataCommand:     root_id[16] | logical_shard_id[16] | u64be placement_generation
//!                             | u64be owner_epoch | request_id[16] | command_digest[32]
//!                             | u64be read_version | u32be len | encoded CommandResult
//! kind 4 LeaseClockObservation: u64be owner_epoch | u64be observed_wall_unix_ms
//!                             | u64be previous_high_water_unix_ms | u64be high_water_unix_ms
//!                             | u64be reap_not_before_unix_ms
//! mutation: u8 op (1 = put, 2 = delete) | u8 family tree tag | u32be len | key
//!           | (put only) u32be len | value
//! ```
//!
//! The mutation list is the exact ordered list of authoritative puts/deletes the batch applied
//! (command mutations, ChangeEvent rows and the CommandDedupe row for a command), excluding the
//! outbox rows themselves, the System recovery tail and the retention bookkeeping of a
//! maintenance step carried by the same batch (removed outbox rows, the `recovery_pruned` and
//! `recovery_verified` points), which are derived. The typed result
//! evidence is the kind body: the encoded [`CommandResult`] (the same bytes CommandDedupe
//! stores) for a command, the new epoch for an epoch advance.
//!
//! ## Chain digest
//!
//! ```text
//! chain_digest(lsn) = SHA-256( "nokv.recovery_outbox.chain.v2\0"
//!                              || chain_digest(lsn - 1)     # 32 bytes
//!                              || record_bytes(lsn) )       # the complete logical record
//! chain_digest(0)   = 32 zero bytes (genesis)
//! ```
//!
//! LSNs start at 1 (the initialization record) and are contiguous. The header repeats the
//! previous digest so a single header can be checked against its predecessor.
//!
//! ## Verification
//!
//! Three System chain points bound the work (all in the [`RecoveryTail`] encoding):
//!
//! ```text
//! recovery_pruned   ≤   recovery_verified   ≤   recovery_tail
//! (last removed LSN)    (read back and verified) (last applied LSN)
//! ```
//!
//! - **At open** (writer or read-only) only the records after the verified head are read:
//!   the head must be anchored (its LSN within `[pruned, tail]`, and the retained header at
//!   its LSN carries exactly its digest), and the records after it must verify —
//!   contiguous LSNs, strict header/chunk framing, declared vs present chunks (missing or
//!   orphan chunk), the hash chain continuing from the head's digest, a decodable logical
//!   record naming its own LSN, no row after the last record, agreement of the last header
//!   with the System tail. Any failure is [`Error::RecoveryOutboxCorrupt`] naming the LSN
//!   and the store is refused before anything is written. The cost is the number of records
//!   appended since the head last moved — bounded by the maintenance interval of writers —
//!   not the store's history. A store written before these System records existed has no
//!   head and no pruned point: its first open verifies the whole chain from LSN 1 once.
//! - **The head moves** only in a writer's maintenance step (see below): to the tail that
//!   writer verified at its own open (recorded in the batch of its first write), or to the
//!   current tail after the step has read back and verified every record after the head.
//!   A head is therefore never ahead of what some open or step actually verified.
//! - **Full verification** — [`crate::MetaShard::verify_recovery_outbox`], the `nokv verify`
//!   command — reads every retained record from the pruned point to the tail, checks that
//!   nothing below the pruned point remains, and that the head is anchored. O(retained
//!   records); it runs on a read-only handle too.
//!
//! ## Retention
//!
//! Records below the applied recovery LSN are kept per a [`RetentionPolicy`]: at most
//! `max_records` (default 1,024) of the newest records and at most `max_bytes` (default
//! 2 MiB) of their logical bytes, whichever keeps fewer — but never a record after the
//! verified head. A **maintenance step** removes the oldest records the policy no longer keeps,
//! at most [`MAX_PRUNE_STEP`] (256) records (header and chunk rows) per step, and records the
//! new `recovery_pruned` point (the removed record's chain digest) in the same holt batch,
//! under Equals/Absent predicates on the previous points. Writers run one step with their
//! first write (in the owner-epoch advance batch) and one more whenever the shard's commit
//! version has advanced by [`RetentionPolicy::maintenance_interval`] (default
//! [`MAINTENANCE_INTERVAL`], 128) since the last one, so a long-running
//! writer keeps both the unverified suffix and the retained outbox bounded, and no step is a
//! pass over the whole history. Read-only handles never write. The pruned point and the head
//! are derived recovery bookkeeping like the tail: they get no outbox record of their own.
//!
//! This retention is a contract change of docs/metadata-format.md (which wires no outbox truncation):
//! the outbox keeps a bounded window of recent records as local recovery material; no remote
//! consumer, ACK protocol or replay to a consumer exists yet, so nothing depends on older
//! records. CommandDedupe rows keep their recovery LSN even after the record is removed.
//!
//! ```text
//! outbox/
//!   record.rs     the format: keys, header and chunk values, the chain digest, the logical record
//!   append.rs     the rows one batch appends, and the new tail
//!   verify.rs     verification of a run of records
//!   retention.rs  chain points, the retention policy and the maintenance step
//! ```

mod append;
mod record;
mod retention;
mod verify;

pub use append::{append, OutboxAppend};
pub use record::{
    chain_digest, chunk_key, chunks_for, decode_chunk, decode_chunk_key, decode_header_key,
    decode_record, encode_chunk, encode_record, header_key, OutboxHeader, RecoveryEntry,
    RecoveryRecord, CHAIN_DOMAIN, CHUNK_BYTES, CHUNK_KEY_TAG, FRAME_VALUE_VERSION, HEADER_KEY_TAG,
    HEADER_VALUE_BYTES, RECORD_VALUE_VERSION,
};
pub(crate) use retention::{plan_step, verify_after_head, verify_all};
pub use retention::{
    read_points, ChainPoints, MaintenanceReport, RetentionPolicy, DEFAULT_MAX_BYTES,
    DEFAULT_MAX_RECORDS, MAINTENANCE_INTERVAL, MAX_PRUNE_STEP,
};
pub use verify::OutboxSummary;

#[cfg(test)]
mod tests;
