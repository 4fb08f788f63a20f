//! Durable store settings: System rows `setting | NAME` (reserved engine tree `system`, tag 0xF0,
//! unversioned).
//!
//! | key | value |
//! |-----|-------|
//! | `setting` \| `history_retention_versions` | u16 1, u64 versions |
//! | `setting` \| `audit_retention_days` | u16 1, u64 days |
//!
//! A setting row is absent until it is first set; readers then use the documented default of the
//! setting (see [`crate::ops::settings`]). Like the pending-operation registry rows of
//! [`super::system`], setting rows are written only by [`crate::command::MetadataCommand`]s (so
//! every change is in the RecoveryOutbox chain and has a request id); the executor accepts exactly
//! the keys [`is_setting_key`] recognizes and no other System key. Unknown setting names fail
//! closed: [`setting_key`] refuses them before any write.

use super::wire::{Dec, Enc};
use crate::error::{Error, Result};

const FAMILY: &str = "system";

/// Key prefix of every setting row.
pub const SETTING_PREFIX: &[u8] = b"setting|";
/// Value format version of a setting row.
pub const VALUE_VERSION: u16 = 1;

/// The diagnostic part of the MVCC history floor, in commit versions: the floor never rises above
/// `tip - history_retention_versions` (docs/metadata-format.md, "Snapshot Lifecycle And History Holds":
/// "configured diagnostic floor"). `0` keeps only what history holds require.
pub const HISTORY_RETENTION_VERSIONS: &str = "history_retention_versions";

/// How long the audit trail of the store's front doors keeps a record, in days
/// (docs/server.md, "Audit trail"); `0` keeps records forever. Meta stores the number only.
pub const AUDIT_RETENTION_DAYS: &str = "audit_retention_days";

/// Every setting name this build knows, sorted.
pub const SETTING_NAMES: [&str; 2] = [AUDIT_RETENTION_DAYS, HISTORY_RETENTION_VERSIONS];

/// The key of setting `name`: `"setting|" | name` (ASCII).
///
/// Errors: [`Error::InvalidArgument`] for an unknown name.
pub fn setting_key(name: &str) -> Result<Vec<u8>> {
    if !SETTING_NAMES.contains(&name) {
        return Err(Error::invalid(format!(
            "unknown setting `{name}` (known: {})",
            SETTING_NAMES.join(", ")
        )));
    }
    let mut k = SETTING_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    Ok(k)
}

/// True when `k` is the key of a known setting — besides the pending-operation registry rows,
/// the only System keys a metadata command may put or delete.
pub fn is_setting_key(k: &[u8]) -> bool {
    k.strip_prefix(SETTING_PREFIX)
        .is_some_and(|name| SETTING_NAMES.iter().any(|known| known.as_bytes() == name))
}

/// Encodes a setting value: `u16 1 | u64 value`.
pub fn encode_value(value: u64) -> Vec<u8> {
    Enc::version(VALUE_VERSION).u64(value).finish()
}

/// Decodes a setting value.
///
/// Errors: [`Error::Codec`] (family `system`) for another version, truncation or trailing bytes.
pub fn decode_value(b: &[u8]) -> Result<u64> {
    let mut d = Dec::new(FAMILY, b);
    d.expect_version(VALUE_VERSION)?;
    let v = d.u64()?;
    d.finish()?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_rows_have_golden_bytes_and_fail_closed() {
        let k = setting_key(HISTORY_RETENTION_VERSIONS).unwrap();
        assert_eq!(k, b"setting|history_retention_versions".to_vec());
        assert!(is_setting_key(&k));
        assert!(!is_setting_key(b"setting|other"));
        assert!(!is_setting_key(b"schema"));
        assert!(setting_key("other").is_err());
        let v = encode_value(1024);
        assert_eq!(v, vec![0, 1, 0, 0, 0, 0, 0, 0, 4, 0]);
        assert_eq!(decode_value(&v).unwrap(), 1024);
        assert!(decode_value(&v[..9]).is_err());
        let mut bad = v.clone();
        bad[1] = 2;
        assert!(decode_value(&bad).is_err());
        let mut long = v;
        long.push(0);
        assert!(decode_value(&long).is_err());
    }
}
