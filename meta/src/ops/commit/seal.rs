//! `Building -> Sealing`: the seal step.

use super::keys::{chain, consumer_key, op_key};
use super::model::PARENT_DOMAIN;
use super::seals::recompute_seals;
use super::state::{advance_build, checked_build, read_build};
use crate::codec::{BuildCommitPhase, ConsumerOwner, OperationKind, SetCursor};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::{ArtifactRevisionId, OperationId};
use crate::ops::{run_step as run, Step as Built};
use crate::shard::MetaShard;
use crate::store::Snapshot;
use std::collections::BTreeSet;

pub(super) fn seal(shard: &MetaShard, op_id: &OperationId) -> Result<()> {
    let root = shard.root_id();
    let key = op_key(&root, OperationKind::BuildCommit, op_id);
    run(shard, |snap| {
        let Some((bytes, op)) = read_build(snap, &root, op_id)? else {
            return Err(Error::codec("operation", "build operation vanished"));
        };
        if op.phase != BuildCommitPhase::Building {
            return Ok(Built::Done(()));
        }
        let seals = recompute_seals(snap, &root, &op.commit_id)?;
        if seals.member_count != op.member_count || seals.member_digest != op.member_digest {
            return Err(Error::CommitLifecycle {
                reason: "the CommitMember rows do not match the member seal".into(),
            });
        }
        let referenced: BTreeSet<ArtifactRevisionId> =
            seals.referenced_revisions.iter().copied().collect();
        if referenced != seals.member_revisions {
            return Err(Error::CommitLifecycle {
                reason: "the commit revision references do not match its members".into(),
            });
        }
        let mut parent_digest = [0u8; 32];
        for p in &op.parents {
            let ck = consumer_key(
                &root,
                p,
                ConsumerOwner::ChildCommit {
                    child: op.commit_id,
                },
            );
            if snap.get(Family::CommitConsumer, &ck)?.is_none() {
                return Err(Error::CommitLifecycle {
                    reason: "a parent consumer row is missing".into(),
                });
            }
            parent_digest = chain(PARENT_DOMAIN, &parent_digest, &[p.as_bytes()]);
        }
        if parent_digest != op.parent_digest || op.parent_count != op.parents.len() as u64 {
            return Err(Error::CommitLifecycle {
                reason: "the parent consumers do not match the parent seal".into(),
            });
        }
        let mut next = op.clone();
        next.phase = BuildCommitPhase::Sealing;
        next.revision_count = seals.revision_count;
        next.revision_digest = seals.revision_digest;
        next.cursor.revisions = SetCursor {
            after: seals.referenced_revisions.last().copied(),
            complete: true,
        };
        let cmd = advance_build(
            shard,
            snap,
            &key,
            bytes,
            op_id,
            b"seal",
            checked_build(&op, &next),
        )?;
        Ok(Built::Command(Box::new(cmd), ()))
    })
}
