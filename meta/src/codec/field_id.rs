//! The validated index field id stored in SecondaryIndex keys (docs/metadata-format.md,
//! "SecondaryIndex").

use crate::error::{Error, Result};

/// Maximum length of a field (index) id in bytes (docs/workbench.md caps field ids at 128 bytes).
pub const MAX_FIELD_ID_BYTES: usize = 128;

/// A validated index field id: 1..=128 bytes of `[A-Za-z0-9_.-]`, case-sensitive. Stored in a
/// SecondaryIndex key as a u16 big-endian length followed by the bytes.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FieldId(String);

fn check_field_id(id: &[u8]) -> std::result::Result<(), String> {
    if id.is_empty() {
        return Err("field id must not be empty".to_owned());
    }
    if id.len() > MAX_FIELD_ID_BYTES {
        return Err(format!(
            "field id is {} bytes; at most {MAX_FIELD_ID_BYTES} allowed",
            id.len()
        ));
    }
    if let Some(bad) = id
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-')))
    {
        return Err(format!(
            "field id may contain only ASCII letters, digits, '_', '.' and '-' (found byte 0x{bad:02x})"
        ));
    }
    Ok(())
}

impl FieldId {
    /// Validates and wraps a field id. Errors: [`Error::InvalidArgument`] naming the rule.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        check_field_id(id.as_bytes()).map_err(Error::InvalidArgument)?;
        Ok(FieldId(id))
    }

    /// Decodes stored field-id bytes, attributing failures to `family`.
    /// Errors: [`Error::Codec`].
    pub fn from_stored(family: &'static str, bytes: &[u8]) -> Result<Self> {
        check_field_id(bytes).map_err(|r| Error::codec(family, r))?;
        // Every accepted byte is ASCII, so this cannot fail; map defensively anyway.
        let s = std::str::from_utf8(bytes).map_err(|_| Error::codec(family, "field id"))?;
        Ok(FieldId(s.to_owned()))
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for FieldId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_ids_accept_exactly_the_documented_alphabet() {
        for ok in ["a", "logical_size", "x.y-z_9", &"f".repeat(128)] {
            assert!(FieldId::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "é", "a\0", &"f".repeat(129)] {
            assert!(
                matches!(FieldId::new(bad), Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
        }
        assert!(matches!(
            FieldId::from_stored("secondary_index", b"a:b"),
            Err(Error::Codec { .. })
        ));
    }
}
