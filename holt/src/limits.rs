//! Size limits of keys and values, checked at commit.

use crate::error::{Error, Result};

/// Maximum key length in bytes (64 KiB). Empty keys are allowed.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// Maximum value length in bytes (16 MiB).
pub const MAX_VALUE_LEN: usize = 16 * 1024 * 1024;

/// `Err(InvalidArgument)` for a key longer than [`MAX_KEY_LEN`].
pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    check_len("key", key.len(), MAX_KEY_LEN)
}

/// `Err(InvalidArgument)` for a value longer than [`MAX_VALUE_LEN`].
pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    check_len("value", value.len(), MAX_VALUE_LEN)
}

fn check_len(what: &str, len: usize, max: usize) -> Result<()> {
    if len > max {
        return Err(Error::InvalidArgument(format!(
            "{what} of {len} bytes exceeds the {max}-byte limit"
        )));
    }
    Ok(())
}
