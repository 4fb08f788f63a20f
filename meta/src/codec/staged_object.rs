//! StagedObject (docs/metadata-format.md, tag 0x13) — the exact ledger of objects a publish operation owns
//! before upload. Object listing is never used to discover staged ownership.
//!
//! Key: `root_id 16 | publish_operation_id 16 | u64 object_sequence`.
//! Value (format version 1): `u16 1 | artifact_revision_id 16 | str object_key |
//! option(str upload_id) | u64 expected_length | str expected_digest_uri |
//! u8 StagedProviderState | u8 StagedCleanupState`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, OperationId, RootId};

const FAMILY: &str = "staged_object";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

durable_enum!(
    /// Provider-side state of a staged object (discriminants of docs/metadata-format.md).
    StagedProviderState, "staged_object" {
        /// Planned; nothing sent.
        Planned = 1,
        /// Upload in flight.
        Uploading = 2,
        /// Upload confirmed.
        Uploaded = 3,
        /// Multipart abort requested.
        AbortPending = 4,
        /// Aborted.
        Aborted = 5,
        /// Provider outcome unknown.
        Ambiguous = 6,
    }
);

durable_enum!(
    /// Cleanup ownership of a staged object (discriminants of docs/metadata-format.md).
    StagedCleanupState, "staged_object" {
        /// Owned by the live publication.
        Owned = 1,
        /// DELETE requested by cleanup.
        DeletePending = 2,
        /// Confirmed deleted.
        Deleted = 3,
        /// Awaiting reconciliation.
        Quarantined = 4,
    }
);

/// The StagedObject key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedObjectKey {
    /// Root.
    pub root: RootId,
    /// Owning publish operation.
    pub publish_operation_id: OperationId,
    /// Object sequence within the operation.
    pub object_sequence: u64,
}

impl StagedObjectKey {
    /// `root_id | publish_operation_id | u64 object_sequence` (40 bytes).
    pub fn encode(&self) -> Vec<u8> {
        Enc::new()
            .raw(self.root.as_bytes())
            .raw(self.publish_operation_id.as_bytes())
            .u64(self.object_sequence)
            .finish()
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 40.
    pub fn decode(key: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, key);
        let k = StagedObjectKey {
            root: RootId(d.b16()?),
            publish_operation_id: OperationId(d.b16()?),
            object_sequence: d.u64()?,
        };
        d.finish()?;
        Ok(k)
    }
}

/// The StagedObject value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedObject {
    /// Revision the object belongs to.
    pub artifact_revision_id: ArtifactRevisionId,
    /// Provider object key.
    pub object_key: String,
    /// Multipart upload id, once started.
    pub upload_id: Option<String>,
    /// Expected object length in bytes.
    pub expected_length: u64,
    /// Expected `sha256:` object digest URI.
    pub expected_digest_uri: String,
    /// Provider state.
    pub provider_state: StagedProviderState,
    /// Cleanup state.
    pub cleanup_state: StagedCleanupState,
}

impl StagedObject {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .raw(self.artifact_revision_id.as_bytes())
            .str(&self.object_key)
            .opt_str(self.upload_id.as_deref())
            .u64(self.expected_length)
            .str(&self.expected_digest_uri)
            .u8(self.provider_state.to_u8())
            .u8(self.cleanup_state.to_u8())
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let v = StagedObject {
            artifact_revision_id: ArtifactRevisionId(d.b16()?),
            object_key: d.string()?,
            upload_id: d.opt_string()?,
            expected_length: d.u64()?,
            expected_digest_uri: d.string()?,
            provider_state: StagedProviderState::from_u8(d.u8()?)?,
            cleanup_state: StagedCleanupState::from_u8(d.u8()?)?,
        };
        d.finish()?;
        Ok(v)
    }
}
