//! Fixed-width storage identities (seed 000, "Ids, Names, And Keys") and the workbench-id rule.
//!
//! Every id here is 16 raw bytes. Durable keys carry the raw bytes; object keys and logs use the
//! 32-character lowercase hex form ([`RootId::to_hex`] etc.). Fresh ids come from the operating
//! system CSPRNG (`getrandom`).

use crate::error::{Error, Result};

/// Maximum length of an external workbench id, in bytes (seed 000).
pub const MAX_WORKBENCH_ID_BYTES: usize = 128;

fn hex_nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Lowercase hex of arbitrary bytes (two characters per byte).
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
    out
}

/// Parses exactly `N` bytes of lowercase hex (`2*N` characters). Uppercase is rejected so the
/// textual form stays canonical.
pub(crate) fn from_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, slot) in out.iter_mut().enumerate() {
        let hi = hex_nibble(b[2 * i])?;
        let lo = hex_nibble(b[2 * i + 1])?;
        *slot = (hi << 4) | lo;
    }
    Some(out)
}

macro_rules! id16 {
    ($(#[$doc:meta])* $name:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub [u8; 16]);

        impl $name {
            /// Width of the id in bytes.
            pub const LEN: usize = 16;

            /// A fresh id from the OS CSPRNG.
            ///
            /// Errors: [`Error::Codec`] with family `"ids"` when the OS entropy source is
            /// unavailable.
            pub fn random() -> Result<Self> {
                let mut b = [0u8; 16];
                getrandom::fill(&mut b)
                    .map_err(|e| Error::codec("ids", format!("entropy source unavailable: {e}")))?;
                Ok($name(b))
            }

            /// Wraps raw bytes.
            pub const fn from_bytes(bytes: [u8; 16]) -> Self {
                $name(bytes)
            }

            /// The raw 16 bytes (the durable key form).
            pub const fn as_bytes(&self) -> &[u8; 16] {
                &self.0
            }

            /// 32 lowercase hex characters, no prefix or punctuation (seed 000 object-key form).
            pub fn to_hex(&self) -> String {
                to_hex(&self.0)
            }

            /// Parses 32 lowercase hex characters. Errors: [`Error::InvalidArgument`].
            pub fn from_hex(s: &str) -> Result<Self> {
                from_hex::<16>(s).map($name).ok_or_else(|| {
                    Error::invalid(format!(
                        "{} must be 32 lowercase hex characters, got {:?}",
                        $label, s
                    ))
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.to_hex())
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.to_hex())
            }
        }
    };
}

id16!(
    /// Globally unique identity of one Agent root (seed 000, 16 bytes).
    RootId,
    "root id"
);
id16!(
    /// Globally unique identity of the logical shard that owns a root (seed 000, 16 bytes).
    LogicalShardId,
    "logical shard id"
);
id16!(
    /// Never-reused identity of one incarnation of a workbench name (seed 000, 16 bytes).
    WorkspaceIncarnationId,
    "workspace incarnation id"
);
id16!(
    /// Identity of one immutable artifact revision, unique within its root (seed 000, 16 bytes).
    ArtifactRevisionId,
    "artifact revision id"
);
id16!(
    /// Identity of one durable operation, unique within its root (seed 000, 16 bytes).
    OperationId,
    "operation id"
);
id16!(
    /// Caller-chosen identity of one metadata command, the CommandDedupe key (16 bytes).
    RequestId,
    "request id"
);

/// Validates an external workbench id (seed 000): first byte an ASCII letter or digit, then only
/// ASCII letters, digits, `_` and `-`, 1..=128 bytes, case-sensitive.
///
/// Errors: [`Error::InvalidArgument`] naming the rule that failed.
pub fn validate_workbench_id(id: &str) -> Result<()> {
    let b = id.as_bytes();
    let Some(first) = b.first() else {
        return Err(Error::invalid("workbench id must not be empty"));
    };
    if b.len() > MAX_WORKBENCH_ID_BYTES {
        return Err(Error::invalid(format!(
            "workbench id is {} bytes; at most {MAX_WORKBENCH_ID_BYTES} allowed",
            b.len()
        )));
    }
    if !first.is_ascii_alphanumeric() {
        return Err(Error::invalid(
            "workbench id must start with an ASCII letter or digit",
        ));
    }
    if let Some(bad) = b
        .iter()
        .find(|c| !(c.is_ascii_alphanumeric() || **c == b'_' || **c == b'-'))
    {
        return Err(Error::invalid(format!(
            "workbench id may contain only ASCII letters, digits, '_' and '-' (found byte 0x{bad:02x})"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_is_lowercase() {
        let id = ArtifactRevisionId::from_bytes([0xab; 16]);
        assert_eq!(id.to_hex(), "ab".repeat(16));
        assert_eq!(ArtifactRevisionId::from_hex(&id.to_hex()).unwrap(), id);
        assert_eq!(format!("{id}"), id.to_hex());
        assert!(ArtifactRevisionId::from_hex(&"AB".repeat(16)).is_err());
        assert!(ArtifactRevisionId::from_hex("abc").is_err());
        assert!(ArtifactRevisionId::from_hex(&"zz".repeat(16)).is_err());
    }

    #[test]
    fn random_ids_differ() {
        let a = RootId::random().unwrap();
        let b = RootId::random().unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn workbench_id_rules_are_enforced() {
        for ok in ["a", "A9", "9lives", "run_01-b", &"x".repeat(128)] {
            assert!(validate_workbench_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "_a", "-a", "a b", "a/b", "é", "a.b", &"x".repeat(129)] {
            assert!(
                matches!(validate_workbench_id(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }
}
