//! Object keys: the revision-owned block layout and the key grammar every provider accepts.
//!
//! Block layout (docs/design.md, "Immutable Bodies And Publication"; docs/metadata-format.md "Artifact Revisions And
//! Strong References"):
//!
//! ```text
//! nokv/artifacts/{logical_shard_id}/{root_id}/{artifact_revision_id}/blocks/{object_index}
//! ```
//!
//! Ids are 16-byte values written as exactly 32 lowercase hex characters with no prefix;
//! `object_index` is a `u64` written as exactly 16 lowercase hex characters (docs/metadata-format.md: "No UUID
//! punctuation, variable-width numeric field, or process address is permitted").

use crate::digest::{decode_lower_hex, hex_lower};
use crate::error::Error;

/// Maximum object-key length in bytes accepted by [`validate_key`] (matches the S3 limit).
pub const MAX_KEY_LEN: usize = 1024;

/// Name prefix reserved for providers' in-flight temporary files. No key segment may start
/// with it, so a temp file left behind by a crash can never be addressed as an object.
pub const TEMP_PREFIX: &str = ".tmp-";

/// First two segments of every block key.
pub const ARTIFACTS_PREFIX: &str = "nokv/artifacts/";

/// A parsed revision-owned block key (see the module docs for the text form).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockKey {
    /// Logical shard that owns the root (docs/metadata-format.md, RootPlacement.logical_shard_id).
    pub logical_shard_id: [u8; 16],
    /// The root (workspace namespace) id.
    pub root_id: [u8; 16],
    /// The ArtifactRevision that physically owns the block.
    pub artifact_revision_id: [u8; 16],
    /// The owner revision's local physical object index (docs/metadata-format.md, ArtifactManifest
    /// `physical_object_index`).
    pub object_index: u64,
}

impl BlockKey {
    /// The object key string of this block; identical to [`block_key`].
    pub fn to_key(&self) -> String {
        block_key(
            &self.logical_shard_id,
            &self.root_id,
            &self.artifact_revision_id,
            self.object_index,
        )
    }
}

impl std::fmt::Display for BlockKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_key())
    }
}

/// The object key of one block:
/// `nokv/artifacts/{shard hex32}/{root hex32}/{revision hex32}/blocks/{object_index hex16}`.
///
/// Always passes [`validate_key`] and round-trips through [`parse_block_key`].
pub fn block_key(
    logical_shard_id: &[u8; 16],
    root_id: &[u8; 16],
    artifact_revision_id: &[u8; 16],
    object_index: u64,
) -> String {
    let mut key = revision_prefix(logical_shard_id, root_id, artifact_revision_id);
    key.push_str("blocks/");
    key.push_str(&hex_lower(&object_index.to_be_bytes()));
    key
}

/// The key prefix shared by every object of one revision, with trailing slash:
/// `nokv/artifacts/{shard hex32}/{root hex32}/{revision hex32}/`. For diagnostics and tests
/// (`ObjectStore::list`); ownership is never discovered by listing (docs/metadata-format.md).
pub fn revision_prefix(
    logical_shard_id: &[u8; 16],
    root_id: &[u8; 16],
    artifact_revision_id: &[u8; 16],
) -> String {
    let mut key = String::with_capacity(ARTIFACTS_PREFIX.len() + 3 * 33 + "blocks/".len() + 16);
    key.push_str(ARTIFACTS_PREFIX);
    for id in [logical_shard_id, root_id, artifact_revision_id] {
        key.push_str(&hex_lower(id));
        key.push('/');
    }
    key
}

fn invalid(key: &str, reason: &'static str) -> Error {
    Error::InvalidKey {
        key: key.to_owned(),
        reason,
    }
}

/// Parses a block key strictly: exactly the seven segments of the layout, lowercase hex ids of
/// exactly 32 characters and an object index of exactly 16 characters.
///
/// Errors: [`Error::InvalidKey`] for anything else (uppercase, short/long fields, extra or
/// missing segments, trailing slash, wrong literal segments).
pub fn parse_block_key(key: &str) -> Result<BlockKey, Error> {
    let mut parts = key.split('/');
    let mut next = || {
        parts
            .next()
            .ok_or_else(|| invalid(key, "too few segments for a block key"))
    };
    if next()? != "nokv" || next()? != "artifacts" {
        return Err(invalid(key, "block key must start with nokv/artifacts/"));
    }
    let id =
        |s: &str, what: &'static str| decode_lower_hex::<16>(s).ok_or_else(|| invalid(key, what));
    let logical_shard_id = id(
        next()?,
        "logical_shard_id must be 32 lowercase hex characters",
    )?;
    let root_id = id(next()?, "root_id must be 32 lowercase hex characters")?;
    let artifact_revision_id = id(
        next()?,
        "artifact_revision_id must be 32 lowercase hex characters",
    )?;
    if next()? != "blocks" {
        return Err(invalid(
            key,
            "expected the blocks segment after the revision id",
        ));
    }
    let index = decode_lower_hex::<8>(next()?)
        .ok_or_else(|| invalid(key, "object_index must be 16 lowercase hex characters"))?;
    if parts.next().is_some() {
        return Err(invalid(key, "extra segments after object_index"));
    }
    Ok(BlockKey {
        logical_shard_id,
        root_id,
        artifact_revision_id,
        object_index: u64::from_be_bytes(index),
    })
}

/// Checks that `key` is an object key every provider accepts, before any filesystem or network
/// access:
///
/// - non-empty and at most [`MAX_KEY_LEN`] bytes;
/// - only ASCII `a-z`, `0-9`, `/`, `_`, `.`, `-` (no uppercase, backslash, NUL, space, ...);
/// - no leading `/`; no empty segment (`a//b`, trailing `/`); no `.` or `..` segment;
/// - no segment starting with [`TEMP_PREFIX`] (reserved for providers' temp files).
///
/// A key that passes can never name a path outside a provider's root.
///
/// Errors: [`Error::InvalidKey`] naming the broken rule.
pub fn validate_key(key: &str) -> Result<(), Error> {
    if key.is_empty() {
        return Err(invalid(key, "key is empty"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(invalid(key, "key is longer than 1024 bytes"));
    }
    check_chars(key)?;
    if key.starts_with('/') {
        return Err(invalid(key, "key starts with '/'"));
    }
    for segment in key.split('/') {
        check_segment(key, segment)?;
    }
    Ok(())
}

fn check_chars(key: &str) -> Result<(), Error> {
    let ok = key
        .bytes()
        .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'/' | b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(invalid(key, "key may contain only ASCII a-z 0-9 / _ . -"))
    }
}

fn check_segment(key: &str, segment: &str) -> Result<(), Error> {
    match segment {
        "" => Err(invalid(key, "key has an empty segment")),
        "." | ".." => Err(invalid(key, "key has a '.' or '..' segment")),
        s if s.starts_with(TEMP_PREFIX) => {
            Err(invalid(key, "segment uses the reserved .tmp- prefix"))
        }
        _ => Ok(()),
    }
}

/// Validates a `list` prefix and returns the directory part that can be walked: the prefix up
/// to and excluding its last `/` (`""` for the root). Returns `Ok(None)` when no valid key can
/// start with the prefix (e.g. `a//`, `../`), so the listing is empty.
///
/// Errors: [`Error::InvalidKey`] for characters outside the key alphabet, a leading `/`, or
/// more than [`MAX_KEY_LEN`] bytes.
pub(crate) fn list_dir_part(prefix: &str) -> Result<Option<&str>, Error> {
    if prefix.len() > MAX_KEY_LEN {
        return Err(invalid(prefix, "prefix is longer than 1024 bytes"));
    }
    check_chars(prefix)?;
    if prefix.starts_with('/') {
        return Err(invalid(prefix, "prefix starts with '/'"));
    }
    let dir = match prefix.rfind('/') {
        Some(i) => &prefix[..i],
        None => return Ok(Some("")),
    };
    if dir.split('/').all(|s| check_segment(dir, s).is_ok()) {
        Ok(Some(dir))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SHARD: [u8; 16] = [0x11; 16];
    const ROOT: [u8; 16] = [0x22; 16];
    const REV: [u8; 16] = [0xab; 16];

    fn example() -> String {
        format!(
            "nokv/artifacts/{}/{}/{}/blocks/0000000000000003",
            "11".repeat(16),
            "22".repeat(16),
            "ab".repeat(16)
        )
    }

    #[test]
    fn block_key_has_exact_seed_layout() {
        assert_eq!(block_key(&SHARD, &ROOT, &REV, 3), example());
        assert!(block_key(&SHARD, &ROOT, &REV, u64::MAX).ends_with("/blocks/ffffffffffffffff"));
        assert_eq!(
            block_key(&SHARD, &ROOT, &REV, 0x0123_4567_89ab_cdef)
                .rsplit('/')
                .next(),
            Some("0123456789abcdef")
        );
    }

    #[test]
    fn revision_prefix_is_block_key_prefix_with_trailing_slash() {
        let prefix = revision_prefix(&SHARD, &ROOT, &REV);
        assert_eq!(
            prefix,
            format!(
                "nokv/artifacts/{}/{}/{}/",
                "11".repeat(16),
                "22".repeat(16),
                "ab".repeat(16)
            )
        );
        assert!(block_key(&SHARD, &ROOT, &REV, 7).starts_with(&prefix));
    }

    #[test]
    fn parse_block_key_round_trips_example() {
        let parsed = parse_block_key(&example()).expect("example parses");
        assert_eq!(
            parsed,
            BlockKey {
                logical_shard_id: SHARD,
                root_id: ROOT,
                artifact_revision_id: REV,
                object_index: 3
            }
        );
        assert_eq!(parsed.to_key(), example());
        assert_eq!(parsed.to_string(), example());
    }

    #[test]
    fn parse_block_key_rejects_non_canonical_forms() {
        let good = example();
        let bad = vec![
            good.to_uppercase(),
            good.replace("abab", "ABab"),
            good.replace("0000000000000003", "3"),
            good.replace("0000000000000003", "00000000000000003"),
            good.replace("0000000000000003", "000000000000000G"),
            good.replacen(&"11".repeat(16), &"11".repeat(15), 1),
            format!("{good}/extra"),
            format!("{good}/"),
            format!("/{good}"),
            format!("x/{good}"),
            good.replace("/blocks/", "/block/"),
            good.replace("nokv/artifacts/", "nokv/artifact/"),
            revision_prefix(&SHARD, &ROOT, &REV),
            good.replace("/blocks/", "/blocks//"),
            String::new(),
        ];
        for key in bad {
            match parse_block_key(&key) {
                Err(Error::InvalidKey { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key:?} accepted or wrong error: {other:?}"),
            }
        }
    }

    #[test]
    fn validate_key_accepts_plain_keys() {
        for key in ["a", "a/b/c", "x.y_z-0/9", "a/..b", "a/.hidden", &example()] {
            assert!(validate_key(key).is_ok(), "{key:?} rejected");
        }
        assert!(validate_key(&"a".repeat(MAX_KEY_LEN)).is_ok());
    }

    #[test]
    fn validate_key_rejects_hostile_keys() {
        let long = "a".repeat(MAX_KEY_LEN + 1);
        let hostile = [
            "",
            "../x",
            "/abs",
            "a//b",
            "a/./b",
            "a/../b",
            ".",
            "..",
            "a/",
            "a\\b",
            "a\0b",
            "A",
            "a/B",
            "a b",
            "a\nb",
            "é",
            "a/.tmp-0011",
            ".tmp-x",
            &long,
        ];
        for key in hostile {
            match validate_key(key) {
                Err(Error::InvalidKey { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key:?} accepted or wrong error: {other:?}"),
            }
        }
    }

    #[test]
    fn list_prefix_dir_part_is_safe() {
        assert_eq!(list_dir_part("").ok(), Some(Some("")));
        assert_eq!(list_dir_part("nok").ok(), Some(Some("")));
        assert_eq!(list_dir_part("a/b/c").ok(), Some(Some("a/b")));
        assert_eq!(list_dir_part("a/b/").ok(), Some(Some("a/b")));
        assert_eq!(list_dir_part("../").ok(), Some(None));
        assert_eq!(list_dir_part("a//").ok(), Some(None));
        assert!(list_dir_part("/a").is_err());
        assert!(list_dir_part("A").is_err());
    }

    proptest! {
        #[test]
        fn any_block_key_is_valid_and_round_trips(
            shard in any::<[u8; 16]>(), root in any::<[u8; 16]>(), rev in any::<[u8; 16]>(), index in any::<u64>()
        ) {
            let key = block_key(&shard, &root, &rev, index);
            prop_assert!(validate_key(&key).is_ok());
            let parsed = parse_block_key(&key).expect("own output parses");
            prop_assert_eq!(parsed, BlockKey { logical_shard_id: shard, root_id: root, artifact_revision_id: rev, object_index: index });
        }

        #[test]
        fn validated_keys_never_escape(key in "[a-z./_-]{0,24}") {
            if validate_key(&key).is_ok() {
                prop_assert!(!key.starts_with('/'));
                prop_assert!(key.split('/').all(|s| !s.is_empty() && s != "." && s != ".."));
            }
            let _ = parse_block_key(&key);
        }
    }
}
