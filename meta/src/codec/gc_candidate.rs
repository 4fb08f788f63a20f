//! GcCandidate (docs/metadata-format.md, tag 0x15) — written when a revision's strong reference count reaches 0.
//!
//! Key: `root_id | artifact_revision_id | u64 reference_epoch` (the epoch after the release, so a
//! later reference addition makes the candidate stale).
//! Value (format version 1): `u16 1 | u64 last_zero_ref_version | u8 GcClaimState |
//! u32 retry_count`.

use super::wire::{durable_enum, Dec, Enc};
use crate::error::Result;
use crate::ids::{ArtifactRevisionId, RootId};

const FAMILY: &str = "gc_candidate";
/// Value format version.
pub const VALUE_VERSION: u16 = 1;

durable_enum!(
    /// GC claim state of a candidate (discriminants of docs/metadata-format.md).
    GcClaimState, "gc_candidate" {
        /// Waiting for the history floor.
        Candidate = 1,
        /// Claimed by a collector.
        Claimed = 2,
        /// Collected.
        Complete = 3,
        /// Ambiguous; awaiting reconciliation.
        Quarantined = 4,
    }
);

/// The GcCandidate value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcCandidate {
    /// Commit version at which the count became zero.
    pub last_zero_ref_version: u64,
    /// Claim state.
    pub claim_state: GcClaimState,
    /// Number of failed attempts so far.
    pub retry_count: u32,
}

/// The GcCandidate key.
pub fn key(root: &RootId, rev: &ArtifactRevisionId, reference_epoch: u64) -> Vec<u8> {
    Enc::new()
        .raw(root.as_bytes())
        .raw(rev.as_bytes())
        .u64(reference_epoch)
        .finish()
}

/// The decoded GcCandidate key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcCandidateKey {
    /// Root.
    pub root: RootId,
    /// Candidate revision.
    pub revision: ArtifactRevisionId,
    /// Reference epoch after the release that zeroed the count.
    pub reference_epoch: u64,
}

impl GcCandidateKey {
    /// `root_id | artifact_revision_id | u64 reference_epoch` (40 bytes).
    pub fn encode(&self) -> Vec<u8> {
        key(&self.root, &self.revision, self.reference_epoch)
    }

    /// Decodes a key. Errors: [`crate::Error::Codec`] for any length other than 40.
    pub fn decode(k: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, k);
        let v = GcCandidateKey {
            root: RootId(d.b16()?),
            revision: ArtifactRevisionId(d.b16()?),
            reference_epoch: d.u64()?,
        };
        d.finish()?;
        Ok(v)
    }
}

impl GcCandidate {
    /// Encodes the value (format version 1).
    pub fn encode(&self) -> Vec<u8> {
        Enc::version(VALUE_VERSION)
            .u64(self.last_zero_ref_version)
            .u8(self.claim_state.to_u8())
            .u32(self.retry_count)
            .finish()
    }

    /// Decodes the value. Errors: [`crate::Error::Codec`].
    pub fn decode(b: &[u8]) -> Result<Self> {
        let mut d = Dec::new(FAMILY, b);
        d.expect_version(VALUE_VERSION)?;
        let r = GcCandidate {
            last_zero_ref_version: d.u64()?,
            claim_state: GcClaimState::from_u8(d.u8()?)?,
            retry_count: d.u32()?,
        };
        d.finish()?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_candidate_golden_bytes() {
        let c = GcCandidate {
            last_zero_ref_version: 4,
            claim_state: GcClaimState::Candidate,
            retry_count: 0,
        };
        let b = c.encode();
        assert_eq!(b, vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 1, 0, 0, 0, 0]);
        assert_eq!(GcCandidate::decode(&b).unwrap(), c);
        let mut bad = b.clone();
        bad[10] = 5;
        assert!(GcCandidate::decode(&bad).is_err());
    }
}
