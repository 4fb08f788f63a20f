//! Durable store settings (System rows of [`crate::codec::setting`]).
//!
//! Two settings exist today:
//!
//! - **`audit_retention_days`** (u64 days, default 90, at most 36,500; `0` keeps forever): how
//!   long the audit trail of the front doors keeps a record (docs/server.md, "Audit trail").
//!   Meta only stores it.
//! - **`history_retention_versions`** (u64 commit versions, default
//!   [`crate::ops::snapshot::DEFAULT_HISTORY_RETENTION_VERSIONS`] = 1024): the diagnostic part of
//!   the MVCC history floor (docs/metadata-format.md, "Snapshot Lifecycle And History Holds": "History is
//!   retained according to the minimum active HistoryHold, in-flight recovery floor, and
//!   configured diagnostic floor"). The floor never rises above `tip - history_retention_versions`
//!   nor above any HistoryHold's read version ([`crate::ops::snapshot::maintain_history_floor`]).
//!   `0` keeps only what holds require. Garbage collection claims a zero-reference revision only
//!   once the floor has passed the version its last reference went ([`crate::ops::gc`]), so a
//!   larger value keeps removed and replaced bytes around for that many more commits; reads at
//!   an older version (`read_at`) work down to the floor.
//!
//! While no row is stored, readers use the caller's default (the
//! [`crate::ops::snapshot::SnapshotPolicy`] the handle was opened with, itself defaulting to
//! 1024); once set, the stored value wins for every process that opens the store. A change is one
//! [`crate::command::MetadataCommand`] (request-id replayable, in the RecoveryOutbox chain) that
//! predicates the previous row, so concurrent setters serialize.

use sha2::{Digest, Sha256};

use crate::codec::setting::{decode_value, encode_value, setting_key};
use crate::codec::CommandResult;
use crate::command::{Mutation, Predicate};
use crate::error::{Error, Result};
use crate::family::Family;
use crate::ids::RequestId;
use crate::shard::MetaShard;
use crate::store::{Snapshot, TxnStore};

pub use crate::codec::setting::{AUDIT_RETENTION_DAYS, HISTORY_RETENTION_VERSIONS, SETTING_NAMES};

/// Largest accepted `audit_retention_days` (100 years).
pub const MAX_AUDIT_RETENTION_DAYS: u64 = 36_500;

/// Largest accepted `history_retention_versions` (2^48 commit versions; larger values are
/// indistinguishable from "keep everything" and are refused as likely mistakes).
pub const MAX_HISTORY_RETENTION_VERSIONS: u64 = 1 << 48;

/// One setting as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingValue {
    /// The setting name (one of [`SETTING_NAMES`]).
    pub name: &'static str,
    /// The stored value, `None` while the setting was never set.
    pub stored: Option<u64>,
    /// The value in effect: the stored one, else the default passed by the caller.
    pub effective: u64,
}

/// Outcome of [`set`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetReceipt {
    /// The value stored before (`None`: never set).
    pub previous: Option<u64>,
    /// The value now stored.
    pub value: u64,
    /// Commit version of the command (the original one on replay; the read version when the
    /// value was already stored and nothing was written).
    pub commit_version: u64,
    /// True when nothing was written (the value was already stored).
    pub unchanged: bool,
}

fn known(name: &str) -> Result<&'static str> {
    SETTING_NAMES
        .iter()
        .copied()
        .find(|n| *n == name)
        .ok_or_else(|| {
            Error::invalid(format!(
                "unknown setting `{name}` (known: {})",
                SETTING_NAMES.join(", ")
            ))
        })
}

fn validate(name: &str, value: u64) -> Result<()> {
    if name == AUDIT_RETENTION_DAYS && value > MAX_AUDIT_RETENTION_DAYS {
        return Err(Error::invalid(format!(
            "{AUDIT_RETENTION_DAYS} must be at most {MAX_AUDIT_RETENTION_DAYS}"
        )));
    }
    if name == HISTORY_RETENTION_VERSIONS && value > MAX_HISTORY_RETENTION_VERSIONS {
        return Err(Error::invalid(format!(
            "{HISTORY_RETENTION_VERSIONS} must be at most {MAX_HISTORY_RETENTION_VERSIONS}"
        )));
    }
    Ok(())
}

/// The stored value of `name` at a snapshot (`None` while never set; see
/// [`crate::shard::history_floor::stored_setting`]).
pub use crate::shard::history_floor::stored_setting as stored_at;

/// Reads setting `name` at the current version; `default` is the value in effect while it was
/// never set.
///
/// Errors: as [`stored_at`].
pub fn get(shard: &MetaShard, name: &str, default: u64) -> Result<SettingValue> {
    let name = known(name)?;
    let stored = stored_at(&shard.inner.store.snapshot(), name)?;
    Ok(SettingValue {
        name,
        stored,
        effective: stored.unwrap_or(default),
    })
}

pub use crate::shard::history_floor::history_retention_versions;

/// Stores `value` for setting `name` in one metadata command (predicating the previous row, so
/// a concurrent change makes it re-plan). Setting the value already stored writes nothing.
///
/// Errors: [`Error::InvalidArgument`] (unknown name, value out of range);
/// [`Error::RequestReplayMismatch`] when `request_id` was used for another command;
/// [`Error::Fenced`]; codec and storage errors.
pub fn set(shard: &MetaShard, request_id: RequestId, name: &str, value: u64) -> Result<SetReceipt> {
    let name = known(name)?;
    validate(name, value)?;
    let key = setting_key(name)?;
    let digest: [u8; 32] = {
        let mut h = Sha256::new();
        h.update(b"nokv.setting.set.v1\0");
        h.update((name.len() as u32).to_be_bytes());
        h.update(name.as_bytes());
        h.update(value.to_be_bytes());
        h.finalize().into()
    };
    super::run_step(shard, |snap| {
        if let Some(out) =
            crate::command::executor::replay_lookup(snap, &shard.root_id(), &request_id, &digest)?
        {
            return Ok(super::Step::Done(SetReceipt {
                previous: None,
                value,
                commit_version: out.commit_version,
                unchanged: false,
            }));
        }
        let current = snap.get(Family::System, &key)?;
        let previous = current.as_deref().map(decode_value).transpose()?;
        if previous == Some(value) {
            return Ok(super::Step::Done(SetReceipt {
                previous,
                value,
                commit_version: snap.version(),
                unchanged: true,
            }));
        }
        let mut cmd = shard.command_header(
            request_id,
            digest,
            snap.version(),
            CommandResult::Applied { value },
        );
        cmd.predicates.push(match current {
            Some(b) => Predicate::equals(Family::System, key.clone(), b),
            None => Predicate::absent(Family::System, key.clone()),
        });
        cmd.mutations.push(Mutation::put(
            Family::System,
            key.clone(),
            encode_value(value),
        ));
        let receipt = SetReceipt {
            previous,
            value,
            commit_version: snap.version().saturating_add(1),
            unchanged: false,
        };
        Ok(super::Step::Command(Box::new(cmd), receipt))
    })
}

/// Every known setting with its stored and effective value; `default_of(name)` gives the default
/// in effect while a setting was never set.
///
/// Errors: as [`stored_at`].
pub fn list(shard: &MetaShard, default_of: impl Fn(&str) -> u64) -> Result<Vec<SettingValue>> {
    let snap = shard.inner.store.snapshot();
    SETTING_NAMES
        .iter()
        .map(|name| {
            let stored = stored_at(&snap, name)?;
            Ok(SettingValue {
                name,
                stored,
                effective: stored.unwrap_or_else(|| default_of(name)),
            })
        })
        .collect()
}
