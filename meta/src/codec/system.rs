//! System tree records (reserved engine tree `system`, tag 0xF0, unversioned).
//!
//! Keys are short ASCII strings:
//!
//! | key                  | value                                                                 |
//! |----------------------|-----------------------------------------------------------------------|
//! | `schema`             | [`SchemaMarker`]: u16 value_format_version=1, u32 len + `nokv_workspace`, u32 format_version=8 |
//! | `root_placement`     | [`RootPlacement`]: u16 1, root_id 16, logical_shard_id 16, u64 placement_generation, u8 RootPlacementLifecycle |
//! | `presentation_root`  | u16 1, u32 len + UTF-8 absolute presentation root                     |
//! | `owner_epoch`        | u16 1, u64 owner epoch (advanced by one commit before a writer handle's first write) |
//! | `recovery_tail`      | [`RecoveryTail`]: u16 1, u64 applied recovery LSN, 32-byte chain digest |
//! | `recovery_pruned`    | [`RecoveryTail`] shape: the last RecoveryOutbox LSN removed by retention and the chain digest after it (absent: nothing pruned, LSN 0 and the genesis digest) |
//! | `recovery_verified`  | [`RecoveryTail`] shape: the RecoveryOutbox LSN up to which the chain was read back and verified, and the chain digest after it (absent: the `recovery_pruned` point) |
//! | `pending_operation` \| u8 OperationKind \| operation_id 16 | u16 1 ([`PENDING_OPERATION_VALUE`]): one row per non-terminal operation |
//!
//! ## Pending-operation registry
//!
//! Terminal operations are never garbage collected (docs/metadata-format.md, "Commit Closure"), so a scan of
//! the Operation family grows with every operation ever begun. The registry keeps one System
//! row per operation that is *not* terminal, so recovery at open costs O(non-terminal
//! operations). Key: the 17 ASCII bytes `pending_operation`, the [`OperationKind`] discriminant
//! (one byte) and the 16-byte operation id (34 bytes in all; the store serves one root, so the
//! root id is implied). Value: [`PENDING_OPERATION_VALUE`] (`u16be 1`, nothing else).
//!
//! The rows are written only by [`crate::command::MetadataCommand`]s — the one System key shape
//! a command may write (see [`is_pending_operation_key`]) — and always in the same command as
//! the Operation row change they mirror: inserted by the command that begins (or re-begins) an
//! operation, deleted by the command that makes it terminal. For Publish
//! ([`crate::ops::publish::operation`]): present while Uploading, Finalizing, Aborting, Cleaning
//! and Quarantined; absent once Published or Cleaned. Other kinds do not register yet.
//! The embedded store keeps the control-plane RootPlacement record here because there is no
//! separate control plane yet (docs/metadata-format.md, "Placement Authority").

use super::operation::OperationKind;
use super::wire::{durable_enum, Dec, Enc};
use crate::error::{Error, Result};
use crate::ids::{LogicalShardId, OperationId, RootId};

const FAMILY: &str = "system";

/// Key of the schema marker (docs/metadata-format.md, `System("schema")`).
pub const KEY_SCHEMA: &[u8] = b"schema";
/// Key of the embedded RootPlacement record.
pub const KEY_ROOT_PLACEMENT: &[u8] = b"root_placement";
/// Key of the durable presentation root.
pub const KEY_PRESENTATION_ROOT: &[u8] = b"presentation_root";
/// Key of the persisted owner epoch counter.
pub const KEY_OWNER_EPOCH: &[u8] = b"owner_epoch";
/// Key of the applied recovery LSN and chain digest (docs/metadata-format.md, System: "applied recovery LSN,
/// recovery chain digest").
pub const KEY_RECOVERY_TAIL: &[u8] = b"recovery_tail";

/// Key of the pruned chain point: the last RecoveryOutbox LSN removed by retention and the
/// chain digest after it (see [`crate::outbox`], "Retention"). Same encoding as
/// [`RecoveryTail`]; absent means nothing was pruned ([`RecoveryTail::GENESIS`]).
pub const KEY_RECOVERY_PRUNED: &[u8] = b"recovery_pruned";
/// Key of the verified chain head: the RecoveryOutbox LSN up to which a writer read the chain
/// back and verified it, and the chain digest after it (see [`crate::outbox`], "Verification").
/// Same encoding as [`RecoveryTail`]; absent means the pruned point.
pub const KEY_RECOVERY_VERIFIED: &[u8] = b"recovery_verified";

/// Key prefix of the pending-operation registry rows (see the module docs).
pub const PENDING_OPERATION_PREFIX: &[u8] = b"pending_operation";
/// Length of a pending-operation registry key: prefix (17) + kind (1) + operation id (16).
pub const PENDING_OPERATION_KEY_LEN: usize = PENDING_OPERATION_PREFIX.len() + 1 + 16;
/// The value of every pending-operation registry row: `u16be 1` (value format version 1, no
/// payload; the Operation row is the record).
pub const PENDING_OPERATION_VALUE: [u8; 2] = [0x00, 0x01];

/// The pending-operation registry key of operation `id` of `kind`:
/// `"pending_operation" | u8 kind | operation_id 16` (34 bytes).
pub fn pending_operation_key(kind: OperationKind, id: &OperationId) -> Vec<u8> {
    Enc::new()
        .raw(PENDING_OPERATION_PREFIX)
        .u8(kind.to_u8())
        .raw(id.as_bytes())
        .finish()
}

/// The key prefix of every registry row of `kind` (`"pending_operation" | u8 kind`, 18 bytes).
pub fn pending_operation_prefix(kind: OperationKind) -> Vec<u8> {
    Enc::new()
        .raw(PENDING_OPERATION_PREFIX)
        .u8(kind.to_u8())
        .finish()
}

/// Decodes a registry key into `(kind, operation_id)`.
///
/// Errors: [`Error::Codec`] for another prefix, a wrong length or an unknown kind.
pub fn decode_pending_operation_key(k: &[u8]) -> Result<(OperationKind, OperationId)> {
    let mut d = Dec::new(FAMILY, k);
    if d.take(PENDING_OPERATION_PREFIX.len())? != PENDING_OPERATION_PREFIX {
        return Err(d.err("not a pending_operation registry key"));
    }
    let kind = OperationKind::from_u8(d.u8()?)?;
    let id = OperationId(d.b16()?);
    d.finish()?;
    Ok((kind, id))
}

/// True when `k` is a well-formed pending-operation registry key — the only System key a
/// [`crate::command::MetadataCommand`] may put or delete (the executor refuses every other
/// System key).
pub fn is_pending_operation_key(k: &[u8]) -> bool {
    decode_pending_operation_key(k).is_ok()
}

/// Decodes a registry row value; only [`PENDING_OPERATION_VALUE`] is accepted.
///
/// Errors: [`Error::Codec`] for another version or any payload.
pub fn decode_pending_operation_value(b: &[u8]) -> Result<()> {
    let mut d = Dec::new(FAMILY, b);
    d.expect_version(1)?;
    d.finish()
}

/// The only supported schema id.
pub const SCHEMA_ID: &str = "nokv_workspace";
/// The only supported system format version (docs/metadata-format.md).
pub const FORMAT_VERSION: u32 = 8;
/// Value format version of the marker record.
pub const MARKER_VALUE_VERSION: u16 = 1;

/// The decoded `System("schema")` marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaMarker {
    /// Leading value format version (must be 1).
    pub value_format_version: u16,
    /// Schema id (must be `nokv_workspace`).
    pub schema_id: String,
    /// System format version (must be 8).
    pub format_version: u32,
}

impl SchemaMarker {
    /// The exact marker this build supports.
    pub fn current() -> Self {
        SchemaMarker {
            value_format_version: MARKER_VALUE_VERSION,
            schema_id: SCHEMA_ID.to_owned(),
            format_version: FORMAT_VERSION,
        }
    }

    /// Encodes `u16 value_format_version | u32 len | schema_id | u32 format_version`.
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(self.value_format_version)
            .str(&self.schema_id)
            .u32(self.format_version)
            .finish()
    }

    /// Decodes a marker of value format version 1 without judging schema id or format version
    /// (the schema gate compares those and names the difference).
    ///
    /// Errors: [`Error::Codec`] for another value format version, truncation or trailing bytes.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(MARKER_VALUE_VERSION)?;
        let schema_id = d.string()?;
        let format_version = d.u32()?;
        d.finish()?;
        Ok(SchemaMarker {
            value_format_version: MARKER_VALUE_VERSION,
            schema_id,
            format_version,
        })
    }
}

durable_enum!(
    /// Control-plane lifecycle of a RootPlacement (docs/metadata-format.md, "Durable Format Registry").
    RootPlacementLifecycle, "system" {
        /// Being provisioned.
        Provisioning = 1,
        /// Serving.
        Active = 2,
        /// Draining.
        Draining = 3,
        /// Retired.
        Retired = 4,
    }
);

/// The embedded RootPlacement record (docs/metadata-format.md, "Placement Authority").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootPlacement {
    /// The root this store serves.
    pub root_id: RootId,
    /// The logical shard the root is placed on.
    pub logical_shard_id: LogicalShardId,
    /// Placement generation (1 at creation).
    pub placement_generation: u64,
    /// Control-plane lifecycle.
    pub lifecycle: RootPlacementLifecycle,
}

impl RootPlacement {
    /// Encodes `u16 1 | root_id | logical_shard_id | u64 placement_generation | u8 lifecycle`.
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(1)
            .raw(self.root_id.as_bytes())
            .raw(self.logical_shard_id.as_bytes())
            .u64(self.placement_generation)
            .u8(self.lifecycle.to_u8())
            .finish()
    }

    /// Decodes the record. Errors: [`Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(1)?;
        let root_id = RootId(d.b16()?);
        let logical_shard_id = LogicalShardId(d.b16()?);
        let placement_generation = d.u64()?;
        let lifecycle = RootPlacementLifecycle::from_u8(d.u8()?)?;
        d.finish()?;
        Ok(RootPlacement {
            root_id,
            logical_shard_id,
            placement_generation,
            lifecycle,
        })
    }
}

/// Encodes the presentation root record: `u16 1 | u32 len | UTF-8`.
pub fn encode_presentation_root(root: &str) -> Vec<u8> {
    Enc::version(1).str(root).finish()
}

/// Decodes the presentation root record. Errors: [`Error::Codec`].
pub fn decode_presentation_root(b: &[u8]) -> Result<String> {
    let mut d = Dec::new(FAMILY, b);
    d.expect_version(1)?;
    let s = d.string()?;
    d.finish()?;
    Ok(s)
}

/// Encodes the owner epoch record: `u16 1 | u64 epoch`.
pub fn encode_owner_epoch(epoch: u64) -> Vec<u8> {
    Enc::version(1).u64(epoch).finish()
}

/// Decodes the owner epoch record. Errors: [`Error::Codec`].
pub fn decode_owner_epoch(b: &[u8]) -> Result<u64> {
    let mut d = Dec::new(FAMILY, b);
    d.expect_version(1)?;
    let e = d.u64()?;
    d.finish()?;
    Ok(e)
}

/// The System recovery tail: the last RecoveryOutbox LSN applied to this store and the chain
/// digest after it (see [`crate::outbox`]). Every command, owner-epoch advance and the
/// initialization rewrite it in the same holt batch as the outbox rows, under an Equals predicate
/// on its previous bytes, so two writers cannot fork the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryTail {
    /// Last applied recovery LSN (0 before the first record).
    pub applied_lsn: u64,
    /// SHA-256 chain digest after `applied_lsn` (32 zero bytes before the first record).
    pub chain_digest: [u8; 32],
}

impl RecoveryTail {
    /// The tail before any record: LSN 0 and the all-zero genesis digest.
    pub const GENESIS: RecoveryTail = RecoveryTail {
        applied_lsn: 0,
        chain_digest: [0; 32],
    };

    /// Encodes `u16 1 | u64 applied_lsn | chain_digest 32` (42 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(1)
            .u64(self.applied_lsn)
            .raw(&self.chain_digest)
            .finish()
    }

    /// Decodes the record. Errors: [`Error::Codec`] for another version, truncation or trailing
    /// bytes.
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(1)?;
        let applied_lsn = d.u64()?;
        let chain_digest = d.b32()?;
        d.finish()?;
        Ok(RecoveryTail {
            applied_lsn,
            chain_digest,
        })
    }
}

/// Default durable presentation root (docs/workbench.md, "Presentation root").
pub const DEFAULT_PRESENTATION_ROOT: &str = "/agents/local/wb";

/// Validates a presentation root: absolute, not `/`, no empty/`.`/`..` components, no backslash
/// or NUL, ≤64 components, ≤4096 bytes.
///
/// Errors: [`Error::InvalidArgument`] naming the rule.
pub fn validate_presentation_root(root: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid(format!("presentation root {root:?}: {why}")));
    if root.len() > 4096 {
        return bad("longer than 4096 bytes");
    }
    let Some(rest) = root.strip_prefix('/') else {
        return bad("must be absolute");
    };
    if rest.is_empty() {
        return bad("must not be '/'");
    }
    if root.contains('\\') || root.contains('\0') {
        return bad("must not contain backslash or NUL");
    }
    let mut count = 0;
    for c in rest.split('/') {
        if c.is_empty() || c == "." || c == ".." {
            return bad("has an empty, '.' or '..' component");
        }
        count += 1;
    }
    if count > 64 {
        return bad("has more than 64 components");
    }
    Ok(())
}

/// The exact marker bytes this build writes and requires.
pub fn marker_bytes() -> Vec<u8> {
    SchemaMarker::current().encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_golden_bytes() {
        let b = SchemaMarker::current().encode();
        let mut expected = vec![0x00, 0x01, 0x00, 0x00, 0x00, 0x0e];
        expected.extend_from_slice(b"nokv_workspace");
        expected.extend_from_slice(&[0x00, 0x00, 0x00, 0x08]);
        assert_eq!(b, expected);
        assert_eq!(SchemaMarker::decode(&b).unwrap(), SchemaMarker::current());
    }

    #[test]
    fn marker_rejects_unknown_version_and_trailing_bytes() {
        let mut b = SchemaMarker::current().encode();
        b.push(0);
        assert!(matches!(SchemaMarker::decode(&b), Err(Error::Codec { .. })));
        let mut b = SchemaMarker::current().encode();
        b[1] = 2;
        assert!(matches!(SchemaMarker::decode(&b), Err(Error::Codec { .. })));
        assert!(SchemaMarker::decode(&[0, 1, 0]).is_err());
    }

    #[test]
    fn placement_round_trips_and_rejects_unknown_lifecycle() {
        let p = RootPlacement {
            root_id: RootId([1; 16]),
            logical_shard_id: LogicalShardId([2; 16]),
            placement_generation: 1,
            lifecycle: RootPlacementLifecycle::Active,
        };
        let mut b = p.encode();
        assert_eq!(RootPlacement::decode(&b).unwrap(), p);
        let last = b.len() - 1;
        b[last] = 9;
        assert!(RootPlacement::decode(&b).is_err());
    }

    #[test]
    fn recovery_tail_golden_bytes_and_rejections() {
        let t = RecoveryTail {
            applied_lsn: 0x0102,
            chain_digest: [0xcd; 32],
        };
        let b = t.encode();
        let mut expected = vec![0, 1, 0, 0, 0, 0, 0, 0, 0x01, 0x02];
        expected.extend_from_slice(&[0xcd; 32]);
        assert_eq!(b, expected);
        assert_eq!(RecoveryTail::decode(&b).unwrap(), t);
        assert!(RecoveryTail::decode(&b[..b.len() - 1]).is_err());
        let mut v2 = b.clone();
        v2[1] = 2;
        assert!(RecoveryTail::decode(&v2).is_err());
        let mut long = b;
        long.push(0);
        assert!(RecoveryTail::decode(&long).is_err());
    }

    #[test]
    fn pending_operation_key_round_trips_and_rejects_other_shapes() {
        let id = OperationId([0xab; 16]);
        let k = pending_operation_key(OperationKind::Publish, &id);
        assert_eq!(k.len(), PENDING_OPERATION_KEY_LEN);
        assert!(k.starts_with(&pending_operation_prefix(OperationKind::Publish)));
        assert_eq!(&k[..17], b"pending_operation");
        assert_eq!(k[17], OperationKind::Publish.to_u8());
        assert_eq!(&k[18..], &[0xab; 16]);
        assert_eq!(
            decode_pending_operation_key(&k).unwrap(),
            (OperationKind::Publish, id)
        );
        assert!(is_pending_operation_key(&k));
        for bad in [
            &k[..k.len() - 1],
            &[k.as_slice(), &[0]].concat()[..],
            KEY_SCHEMA,
            KEY_OWNER_EPOCH,
            KEY_RECOVERY_TAIL,
            b"lease_clock",
            b"x",
        ] {
            assert!(!is_pending_operation_key(bad), "{bad:?}");
        }
        let mut unknown_kind = k.clone();
        unknown_kind[17] = 0xff;
        assert!(!is_pending_operation_key(&unknown_kind));
        assert!(decode_pending_operation_value(&PENDING_OPERATION_VALUE).is_ok());
        assert!(decode_pending_operation_value(&[0, 2]).is_err());
        assert!(decode_pending_operation_value(&[0, 1, 0]).is_err());
    }

    #[test]
    fn presentation_root_rules() {
        assert!(validate_presentation_root(DEFAULT_PRESENTATION_ROOT).is_ok());
        for bad in [
            "", "/", "rel/x", "/a//b", "/a/./b", "/a/../b", "/a\\b", "/a/", "/a\0",
        ] {
            assert!(validate_presentation_root(bad).is_err(), "{bad:?}");
        }
        let r = "/p";
        assert_eq!(
            decode_presentation_root(&encode_presentation_root(r)).unwrap(),
            r
        );
        assert_eq!(decode_owner_epoch(&encode_owner_epoch(7)).unwrap(), 7);
    }
}
