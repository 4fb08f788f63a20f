//! Recovery of orphaned Publish operations ([`Client::recover_operations`], run at every open)
//! and the ledger's listings.

use std::collections::HashSet;

use meta::codec::{PublishOperation, PublishPhase, StagedCleanupState};
use meta::ops::publish::operation::{self as ledger};
use meta::OperationId;

use super::plan::{is_definite_refusal, OperationInfo};
use crate::client::{Client, RecoverySummary};
use crate::error::{Error, Result};

impl Client {
    /// Recovers every orphaned Publish operation from the ledger (never by listing the bucket;
    /// see the module docs): Uploading/Aborting/Cleaning are aborted and cleaned, Finalizing
    /// ones are resumed to Published when their objects are present and verified (else taken
    /// over by abort with proof and cleaned), Quarantined ones from an earlier pass are
    /// reconciled. Operations this handle is running are skipped. Per-operation failures are
    /// collected in [`RecoverySummary::errors`] and leave that operation for the next pass.
    ///
    /// The operations are found through the pending-operation registry
    /// ([`meta::ops::publish::operation::list_pending`]): cost O(non-terminal operations), not
    /// O(publications ever made).
    ///
    /// Errors: [`Error::Meta`] when the operation list cannot be read.
    pub fn recover_operations(&self) -> Result<RecoverySummary> {
        let ops = ledger::list_pending(self.meta())?;
        let in_flight: HashSet<OperationId> = self
            .in_flight()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut summary = RecoverySummary {
            live_writers: self.other_writers_alive(),
            ..RecoverySummary::default()
        };
        if summary.live_writers > 0 {
            // Another writer process is alive and may be running any of them: leave them all
            // to a pass that finds no other writer (crate::writers).
            return Ok(summary);
        }
        for listed in ops {
            let id = listed.operation_id;
            let op = listed.operation;
            if ledger::is_terminal(op.phase) {
                continue;
            }
            if in_flight.contains(&id) {
                summary.in_flight += 1;
                continue;
            }
            // A publication of this handle may have finished since the list was read.
            if ledger::get(self.meta(), &id)?.is_some_and(|now| ledger::is_terminal(now.phase)) {
                continue;
            }
            match self.recover_one(&id, &op) {
                Ok(after) => match (op.phase, after.phase) {
                    (_, PublishPhase::Published) => summary.resumed += 1,
                    (PublishPhase::Quarantined, PublishPhase::Cleaned) => summary.reconciled += 1,
                    (_, PublishPhase::Cleaned) => summary.cleaned += 1,
                    (_, PublishPhase::Quarantined) => summary.quarantined += 1,
                    _ => summary.pending += 1,
                },
                Err(e) => summary.errors.push(format!("{}: {e}", id.to_hex())),
            }
        }
        // Revision reservations of other handles (at open: of the dead process): delete the
        // object of every reserved revision that was never published, then retire the row
        // (docs/metadata-format.md, "Revision reservations").
        for reservation in ledger::list_reservations(self.meta())? {
            if self.reservations().holds(&reservation.id) {
                continue;
            }
            match self.sweep_reservation(&reservation) {
                Ok(()) => summary.swept_reservations += 1,
                Err(e) => summary
                    .errors
                    .push(format!("reservation {}: {e}", reservation.id.to_hex())),
            }
        }
        Ok(summary)
    }

    /// Deletes the objects of the unpublished revisions of a reservation no live handle uses,
    /// then retires it. A failed DELETE leaves the reservation for the next pass.
    fn sweep_reservation(&self, reservation: &ledger::Reservation) -> Result<()> {
        let read = self.meta().read();
        for reserved in &reservation.revisions {
            if read.revision(&reserved.revision)?.is_some() {
                continue;
            }
            self.objects().delete(&reserved.object_key)?;
        }
        drop(read);
        ledger::retire(self.meta(), &[reservation.id])?;
        Ok(())
    }

    /// Recovers one orphaned operation; returns its record afterwards.
    pub(super) fn recover_one(
        &self,
        id: &OperationId,
        listed: &PublishOperation,
    ) -> Result<PublishOperation> {
        let meta = self.meta();
        // Act on the current row (it may have moved since the list was read).
        let current = ledger::get(meta, id)?;
        let op = current.as_ref().unwrap_or(listed);
        match op.phase {
            PublishPhase::Published | PublishPhase::Cleaned => Ok(op.clone()),
            PublishPhase::Quarantined | PublishPhase::Aborting | PublishPhase::Cleaning => {
                self.clean_operation(id)
            }
            PublishPhase::Uploading => {
                ledger::abort(meta, id, "orphaned upload aborted by recovery")?;
                self.clean_operation(id)
            }
            PublishPhase::Finalizing => {
                let refusal = match self.verify_own_objects(id) {
                    Err(
                        e @ (objstore::Error::NotFound { .. }
                        | objstore::Error::IntegrityMismatch { .. }),
                    ) => {
                        // The message never carries the object key (nokv's error mapping).
                        format!(
                            "its objects are not all present and verified: {}",
                            Error::from(e)
                        )
                    }
                    Err(e) => return Err(e.into()),
                    Ok(()) => match ledger::publish_operation(meta, id) {
                        Ok(_) => return Ok(ledger::get(meta, id)?.unwrap_or_else(|| op.clone())),
                        Err(e) if is_definite_refusal(&e) => e.to_string(),
                        Err(e) => return Err(e.into()),
                    },
                };
                ledger::take_over(
                    meta,
                    id,
                    &format!("recovery could not resume the publication: {refusal}"),
                )?;
                self.clean_operation(id)
            }
        }
    }

    /// Verifies every own object of a Finalizing operation (present, exact length and SHA-256).
    fn verify_own_objects(&self, id: &OperationId) -> std::result::Result<(), objstore::Error> {
        let objects =
            ledger::own_objects(self.meta(), id).map_err(|e| objstore::Error::Unavailable {
                key: String::new(),
                reason: format!("ledger unreadable: {e}"),
            })?;
        for (key, len, digest) in objects {
            objstore::get_verified(self.objects().as_ref(), &key, len, &digest)?;
        }
        Ok(())
    }

    /// Publish operations of this store, in operation-id order: the non-terminal ones, read
    /// through the pending-operation registry (O(non-terminal operations)); with
    /// `include_terminal` (`nokv operation list --all`) every one, by a full scan of the
    /// Operation family (one bounded scan per 255 operations).
    ///
    /// Errors: [`Error::Meta`].
    pub fn list_operations(&self, include_terminal: bool) -> Result<Vec<OperationInfo>> {
        let mut out = Vec::new();
        let listed_ops = if include_terminal {
            ledger::list(self.meta())?
        } else {
            ledger::list_pending(self.meta())?
        };
        for listed in listed_ops {
            let op = listed.operation;
            if !include_terminal && ledger::is_terminal(op.phase) {
                continue;
            }
            let rows = ledger::ledger(self.meta(), &listed.operation_id)?;
            let live = if op.phase == PublishPhase::Published {
                0
            } else {
                rows.iter()
                    .filter(|(_, r)| r.cleanup_state != StagedCleanupState::Deleted)
                    .count() as u64
            };
            let (generation, note) = match &op.result {
                meta::codec::OperationResult::Succeeded(r) => (r.path_generation, None),
                meta::codec::OperationResult::Failed(t) => {
                    (None, Some(format!("{}: {}", t.code, t.message)))
                }
                meta::codec::OperationResult::Pending => (None, None),
            };
            out.push(OperationInfo {
                operation_id: listed.operation_id.to_hex(),
                phase: format!("{:?}", op.phase),
                workbench_id: op.workbench_id.clone(),
                path: op.path.as_str().to_string(),
                staged_objects: rows.len() as u64,
                live_objects: live,
                expected_length: op.expected_length,
                expected_digest_uri: op.expected_digest_uri.clone(),
                generation,
                note: op.quarantine_evidence.clone().or(note),
            });
        }
        Ok(out)
    }

    /// The object keys the StagedObject ledger still owns: rows of every operation that is not
    /// Published whose cleanup is not confirmed (Deleted), and the keys of live revision
    /// reservations. With the ArtifactManifest rows of
    /// visible revisions this is the complete set of objects the store may hold (crash tests
    /// compare it with a listing).
    ///
    /// Errors: [`Error::Meta`].
    pub fn ledger_owned_keys(&self) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        for listed in ledger::list(self.meta())? {
            if listed.operation.phase == PublishPhase::Published {
                continue;
            }
            for (_, row) in ledger::ledger(self.meta(), &listed.operation_id)? {
                if row.cleanup_state != StagedCleanupState::Deleted {
                    keys.push(row.object_key);
                }
            }
        }
        for reservation in ledger::list_reservations(self.meta())? {
            keys.extend(reservation.revisions.into_iter().map(|r| r.object_key));
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}
