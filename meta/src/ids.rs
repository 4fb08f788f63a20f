//! Fixed-width storage identities (docs/metadata-format.md, "Ids, Names, And Keys"), the workbench-id rule, and
//! the snapshot-alias / tag-name rule.
//!
//! | id                         | durable key form           | text form                     |
//! |----------------------------|----------------------------|-------------------------------|
//! | [`RootId`], [`LogicalShardId`], [`WorkspaceIncarnationId`], [`ArtifactRevisionId`], [`OperationId`], [`RequestId`] | 16 raw bytes | 32 lowercase hex |
//! | [`SnapshotId`]             | u64 big-endian (8 bytes)   | decimal (the Workbench facade id) |
//! | [`CommitId`]               | 32 raw bytes (SHA-256)     | 64 lowercase hex              |
//! | `object_index`             | u64 big-endian             | exactly 16 lowercase hex ([`object_index_hex`]) |
//!
//! Hex forms carry no prefix and no punctuation. Fresh 16-byte ids and snapshot ids come from the
//! operating system CSPRNG (`getrandom`); a [`CommitId`] is never random (it is the SHA-256
//! commit identity). Uniqueness of a fresh id is still enforced by the creating command's
//! "absent" predicate, so an id is never reused.

use crate::error::{Error, Result};

/// Maximum length of an external workbench id, in bytes (docs/metadata-format.md).
pub const MAX_WORKBENCH_ID_BYTES: usize = 128;
/// Maximum length of a snapshot alias or tag name, in bytes (docs/metadata-format.md).
pub const MAX_NAME_BYTES: usize = 128;

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

            /// 32 lowercase hex characters, no prefix or punctuation (docs/metadata-format.md object-key form).
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
    /// Globally unique identity of one Agent root (docs/metadata-format.md, 16 bytes).
    RootId,
    "root id"
);
id16!(
    /// Globally unique identity of the logical shard that owns a root (docs/metadata-format.md, 16 bytes).
    LogicalShardId,
    "logical shard id"
);
id16!(
    /// Never-reused identity of one incarnation of a workbench name (docs/metadata-format.md, 16 bytes).
    WorkspaceIncarnationId,
    "workspace incarnation id"
);
id16!(
    /// Identity of one immutable artifact revision, unique within its root (docs/metadata-format.md, 16 bytes).
    ArtifactRevisionId,
    "artifact revision id"
);
id16!(
    /// Identity of one durable operation, unique within its root (docs/metadata-format.md, 16 bytes).
    OperationId,
    "operation id"
);
id16!(
    /// Caller-chosen identity of one metadata command, the CommandDedupe key (16 bytes).
    RequestId,
    "request id"
);

/// Identity of one snapshot: unsigned 64-bit, unique within its root, and exactly the numeric
/// Workbench facade `snapshot_id` (docs/metadata-format.md). Durable keys carry it as 8 bytes big-endian.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct SnapshotId(pub u64);

impl SnapshotId {
    /// Width of the durable form in bytes.
    pub const LEN: usize = 8;
    /// Exclusive upper bound of ids minted by [`SnapshotId::random`]: 2^53, so every minted id is
    /// an exactly representable JSON number in any client.
    pub const RANDOM_BOUND: u64 = 1 << 53;

    /// A fresh id from the OS CSPRNG, uniformly in `1..2^53` (never 0).
    ///
    /// Errors: [`Error::Codec`] with family `"ids"` when the OS entropy source is unavailable.
    pub fn random() -> Result<Self> {
        loop {
            let mut b = [0u8; 8];
            getrandom::fill(&mut b)
                .map_err(|e| Error::codec("ids", format!("entropy source unavailable: {e}")))?;
            let v = u64::from_be_bytes(b) & (Self::RANDOM_BOUND - 1);
            if v != 0 {
                return Ok(SnapshotId(v));
            }
        }
    }

    /// The 8-byte big-endian durable form.
    pub const fn to_be_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// Reads the 8-byte big-endian durable form.
    pub const fn from_be_bytes(b: [u8; 8]) -> Self {
        SnapshotId(u64::from_be_bytes(b))
    }

    /// The numeric value (the Workbench facade id).
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Root-global commit identity: the 32-byte SHA-256 Workbench commit identity (docs/metadata-format.md,
/// "Commit Closure"). Durable keys carry the raw 32 bytes; API and object-manifest boundaries use
/// 64 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitId(pub [u8; 32]);

impl CommitId {
    /// Width of the id in bytes.
    pub const LEN: usize = 32;

    /// Wraps raw bytes (a SHA-256 digest).
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        CommitId(bytes)
    }

    /// The raw 32 bytes (the durable key form).
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// 64 lowercase hex characters, no prefix.
    pub fn to_hex(&self) -> String {
        to_hex(&self.0)
    }

    /// Parses exactly 64 lowercase hex characters. Errors: [`Error::InvalidArgument`].
    pub fn from_hex(s: &str) -> Result<Self> {
        from_hex::<32>(s).map(CommitId).ok_or_else(|| {
            Error::invalid(format!(
                "commit id must be 64 lowercase hex characters, got {s:?}"
            ))
        })
    }
}

impl std::fmt::Display for CommitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl std::fmt::Debug for CommitId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CommitId({})", self.to_hex())
    }
}

/// The object-key form of an `object_index`: exactly 16 lowercase hex characters (docs/metadata-format.md),
/// e.g. `7` → `"0000000000000007"`.
pub fn object_index_hex(object_index: u64) -> String {
    to_hex(&object_index.to_be_bytes())
}

/// Parses the 16-lowercase-hex object-key form of an `object_index`.
///
/// Errors: [`Error::InvalidArgument`] for any other length, uppercase or non-hex characters.
pub fn parse_object_index_hex(s: &str) -> Result<u64> {
    from_hex::<8>(s).map(u64::from_be_bytes).ok_or_else(|| {
        Error::invalid(format!(
            "object index must be 16 lowercase hex characters, got {s:?}"
        ))
    })
}

/// The shared rule of snapshot aliases and tag names (docs/metadata-format.md): case-sensitive UTF-8 (a `&str`
/// already is), no NUL, 1..=[`MAX_NAME_BYTES`] bytes. `what` names the kind in the message.
fn check_name(what: &str, name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{what} is {} bytes; at most {MAX_NAME_BYTES} allowed",
            name.len()
        ));
    }
    if name.contains('\0') {
        return Err(format!("{what} must not contain NUL"));
    }
    Ok(())
}

/// Validates a snapshot alias (docs/metadata-format.md): case-sensitive UTF-8 without NUL, 1..=128 bytes.
///
/// Errors: [`Error::InvalidArgument`] naming the rule that failed.
pub fn validate_snapshot_alias(alias: &str) -> Result<()> {
    check_name("snapshot alias", alias).map_err(Error::InvalidArgument)
}

/// Validates a tag name (docs/metadata-format.md): case-sensitive UTF-8 without NUL, 1..=128 bytes.
///
/// Errors: [`Error::InvalidArgument`] naming the rule that failed.
pub fn validate_tag_name(tag: &str) -> Result<()> {
    check_name("tag name", tag).map_err(Error::InvalidArgument)
}

macro_rules! short_name {
    ($(#[$doc:meta])* $name:ident, $label:literal, $validate:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps a name. Errors: [`Error::InvalidArgument`].
            pub fn new(name: impl Into<String>) -> Result<Self> {
                let name = name.into();
                $validate(&name)?;
                Ok($name(name))
            }

            /// Decodes the stored bytes of a name (after its u16 length), attributing failures to
            /// `family`. Errors: [`Error::Codec`] for invalid UTF-8 or a broken rule.
            pub fn from_stored(family: &'static str, bytes: &[u8]) -> Result<Self> {
                let s = std::str::from_utf8(bytes).map_err(|_| {
                    Error::codec(family, concat!($label, " is not UTF-8"))
                })?;
                check_name($label, s).map_err(|r| Error::codec(family, r))?;
                Ok($name(s.to_owned()))
            }

            /// The name.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

short_name!(
    /// A validated snapshot alias (docs/metadata-format.md: UTF-8, no NUL, 1..=128 bytes; stored with a u16
    /// big-endian length).
    AliasName,
    "snapshot alias",
    validate_snapshot_alias
);
short_name!(
    /// A validated tag name (docs/metadata-format.md: UTF-8, no NUL, 1..=128 bytes; stored with a u16 big-endian
    /// length).
    TagName,
    "tag name",
    validate_tag_name
);

/// Validates an external workbench id (docs/metadata-format.md): first byte an ASCII letter or digit, then only
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
    fn commit_id_hex_is_64_lowercase_characters() {
        let id = CommitId::from_bytes([0x0f; 32]);
        assert_eq!(id.to_hex(), "0f".repeat(32));
        assert_eq!(CommitId::from_hex(&id.to_hex()).unwrap(), id);
        assert!(CommitId::from_hex(&"0F".repeat(32)).is_err());
        assert!(CommitId::from_hex(&"0f".repeat(16)).is_err());
    }

    #[test]
    fn snapshot_ids_are_nonzero_json_safe_and_big_endian() {
        for _ in 0..64 {
            let s = SnapshotId::random().unwrap();
            assert!(s.get() > 0 && s.get() < SnapshotId::RANDOM_BOUND);
        }
        assert_eq!(SnapshotId(258).to_be_bytes(), [0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(
            SnapshotId::from_be_bytes([0, 0, 0, 0, 0, 0, 1, 2]),
            SnapshotId(258)
        );
        assert_eq!(SnapshotId(258).to_string(), "258");
    }

    #[test]
    fn object_index_hex_is_exactly_16_lowercase_characters() {
        assert_eq!(object_index_hex(0), "0000000000000000");
        assert_eq!(object_index_hex(0xab), "00000000000000ab");
        assert_eq!(object_index_hex(u64::MAX), "ffffffffffffffff");
        assert_eq!(parse_object_index_hex("00000000000000ab").unwrap(), 0xab);
        for bad in [
            "ab",
            "00000000000000AB",
            "000000000000000g",
            "00000000000000000",
        ] {
            assert!(parse_object_index_hex(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn alias_and_tag_names_follow_the_seed_rule() {
        for ok in ["a", "Release 1.0", "caf\u{e9}", "\u{1}", &"x".repeat(128)] {
            assert!(validate_snapshot_alias(ok).is_ok(), "{ok:?}");
            assert!(TagName::new(ok).is_ok(), "{ok:?}");
        }
        for bad in ["", "a\0b", &"x".repeat(129), &"\u{e9}".repeat(65)] {
            assert!(
                matches!(validate_snapshot_alias(bad), Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
            assert!(matches!(
                validate_tag_name(bad),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert_ne!(AliasName::new("A").unwrap(), AliasName::new("a").unwrap());
        assert!(matches!(
            AliasName::from_stored("snapshot_alias", &[0xff]),
            Err(Error::Codec { .. })
        ));
        assert!(matches!(
            TagName::from_stored("tag", b""),
            Err(Error::Codec { .. })
        ));
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
