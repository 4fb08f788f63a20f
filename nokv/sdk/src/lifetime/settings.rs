//! `Client::config_get | config_set | config_list` (see [`meta::ops::settings`]).

use meta::ops::settings::{self as ops, SetReceipt, SettingValue};
use meta::RequestId;

use crate::client::Client;
use crate::error::{Error, Result};

/// `audit_retention_days` while never set: 90 days.
pub const DEFAULT_AUDIT_RETENTION_DAYS: u64 = 90;

impl Client {
    fn setting_default(&self, name: &str) -> u64 {
        match name {
            ops::HISTORY_RETENTION_VERSIONS => self.snapshot_policy().history_retention_versions,
            ops::AUDIT_RETENTION_DAYS => DEFAULT_AUDIT_RETENTION_DAYS,
            _ => 0,
        }
    }

    /// The durable setting `name` (`history_retention_versions`, `audit_retention_days`): its stored value and
    /// the value in effect (the client's [`crate::client::ClientOptions::snapshot_policy`] default while
    /// never set).
    ///
    /// Errors: [`Error::InvalidArgument`] for an unknown name.
    pub fn config_get(&self, name: &str) -> Result<SettingValue> {
        ops::get(self.meta(), name, self.setting_default(name)).map_err(invalid)
    }

    /// Every durable setting.
    ///
    /// Errors: `Error::Meta` for storage failures.
    pub fn config_list(&self) -> Result<Vec<SettingValue>> {
        Ok(ops::list(self.meta(), |n| self.setting_default(n))?)
    }

    /// Stores `value` (a decimal u64) for setting `name` in one metadata command; it wins over
    /// the client option in every process that opens the store from then on. The history floor
    /// is raised right away when the new retention allows it (a smaller value lets GC collect
    /// sooner; it never lowers the floor back: history already pruned stays pruned).
    ///
    /// Errors: [`Error::InvalidArgument`] for an unknown name, a value that is not a decimal u64
    /// or is out of range.
    pub fn config_set(&self, name: &str, value: &str) -> Result<SetReceipt> {
        let parsed: u64 = value.trim().parse().map_err(|_| {
            Error::InvalidArgument(format!(
                "`{value}` is not a setting value (a decimal integer ≥ 0)"
            ))
        })?;
        let receipt = ops::set(self.meta(), RequestId::random()?, name, parsed).map_err(invalid)?;
        if name == ops::HISTORY_RETENTION_VERSIONS {
            meta::ops::snapshot::maintain_history_floor(self.meta(), self.snapshot_policy())?;
        }
        Ok(receipt)
    }
}

fn invalid(e: meta::Error) -> Error {
    match e {
        meta::Error::InvalidArgument(m) => Error::InvalidArgument(m),
        other => other.into(),
    }
}
