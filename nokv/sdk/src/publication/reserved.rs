//! A small body published under a reserved revision: the block is written and made durable
//! under a key the handle's reservation already owns, then ONE metadata command creates the
//! Publish operation as Published together with the publication (docs/metadata-format.md,
//! "Revision reservations"). A put waits for two flushes in a row: its object, then that command.

use meta::codec::ReservedRevision;
use meta::ops::publish::operation::{
    self as ledger, PublishIntent, ReservationChange, StagedBlock,
};
use meta::OperationId;

use super::plan::{is_definite_refusal, Published};
use super::upload::{send_block, SendError};
use crate::client::Client;
use crate::error::{Error, Result};

/// Refuses a multipart upload: a reserved key owns one whole object and no upload id can be
/// recorded for it (bodies on this path are at most 4 MiB, below every provider's multipart
/// threshold, so this only guards a misconfiguration).
struct NoMultipart;

impl objstore::UploadObserver for NoMultipart {
    fn upload_started(&mut self, _upload_id: &str) -> std::result::Result<(), objstore::Error> {
        Err(objstore::Error::Unavailable {
            key: String::new(),
            reason: "a reserved publication is never uploaded in parts".into(),
        })
    }

    fn part_sent(&mut self, _part_number: u32) {}
}

/// Largest body published under a reserved revision (bytes).
pub(super) const MAX_RESERVED_BODY: usize = 4 << 20;

impl Client {
    /// Runs a publication command with the pool's refill riding on it when one is due
    /// (`crate::reservations`): `publish` gets the change to carry (empty when none is due).
    pub(super) fn with_refill<T>(
        &self,
        publish: impl FnOnce(&ReservationChange) -> meta::Result<T>,
    ) -> meta::Result<T> {
        let meta = self.meta();
        let refill = self.reservations().begin_refill(|| {
            (0..crate::reservations::RESERVATION_SIZE)
                .map(|_| {
                    let revision = meta::ArtifactRevisionId::random().ok()?;
                    let object_key = objstore::block_key(
                        meta.logical_shard_id().as_bytes(),
                        meta.root_id().as_bytes(),
                        revision.as_bytes(),
                        0,
                    );
                    Some(ReservedRevision {
                        revision,
                        object_key,
                    })
                })
                .collect()
        });
        let Some(refill) = refill else {
            return publish(&ReservationChange::default());
        };
        let outcome = publish(&refill.change);
        self.reservations().end_refill(refill, outcome.is_ok());
        outcome
    }

    /// Publishes `body` (one block, the whole body) under the reserved revision `reserved` of
    /// reservation `reservation`. The caller holds the operation's in-flight entry.
    pub(super) fn publish_reserved_body(
        &self,
        intent: &PublishIntent,
        expected_digest_uri: Option<&String>,
        reservation: OperationId,
        reserved: ReservedRevision,
        body: &[u8],
    ) -> Result<Published> {
        let meta = self.meta().clone();
        let objects = self.objects().clone();
        let digest = objstore::sha256_uri(body);
        if let Some(expected) = expected_digest_uri.filter(|e| **e != digest) {
            // Nothing was sent: the revision is simply not used.
            self.reservations().finish(&reservation, true);
            return Err(Error::DigestMismatch {
                path: intent.path.as_str().to_string(),
                expected: expected.clone(),
                actual: digest,
            });
        }
        let intent = PublishIntent {
            revision_id: reserved.revision,
            ..intent.clone()
        };
        let block = StagedBlock {
            object_key: reserved.object_key,
            length: body.len() as u64,
            digest_uri: digest,
        };
        if let Err(e) = send_block(
            objects.as_ref(),
            &block.object_key,
            body,
            &block.digest_uri,
            &mut NoMultipart,
        ) {
            // A definite failure: delete what may be there. An ambiguous one may still land
            // after a DELETE, so the reservation stays for the sweep at the next open.
            let (err, clean) = match e {
                SendError::Ambiguous(e) => {
                    let _ = objects.delete(&block.object_key);
                    (Error::from(e), false)
                }
                SendError::Definite(e) => (e, objects.delete(&block.object_key).is_ok()),
            };
            self.reservations().finish(&reservation, clean);
            return Err(err);
        }
        crate::fault::point("after-upload");
        match self.with_refill(|change| {
            ledger::publish_reserved(&meta, &reservation, &intent, &block, change)
        }) {
            Ok(receipt) => {
                self.reservations().finish(&reservation, true);
                self.reservations().completed_one();
                crate::fault::point("after-publish");
                Ok(Published { receipt })
            }
            Err(e) => {
                // Refused (or the reservation is gone): nothing was committed, the object is
                // this put's alone to delete. Otherwise the outcome is unknown: the sweep at the
                // next open decides.
                let refused =
                    is_definite_refusal(&e) || matches!(e, meta::Error::OperationState { .. });
                let clean = refused && objects.delete(&block.object_key).is_ok();
                self.reservations().finish(&reservation, clean);
                Err(crate::client::map_publish_error(
                    e,
                    &intent.path,
                    &intent.workbench_id,
                    intent.condition,
                ))
            }
        }
    }
}
