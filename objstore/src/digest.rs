//! SHA-256 digest URIs — the one digest-URI helper of the project.
//!
//! Format (docs/metadata-format.md, `tree_digest_uri = "sha256:" + lowercase_hex(member_digest)`): the ASCII
//! prefix `sha256:` followed by exactly 64 lowercase hexadecimal characters (32 digest bytes).
//! Every block's ArtifactManifest `digest_uri`, and every `body_digest_uri` /
//! `manifest_digest_uri`, uses this form.

use sha2::{Digest, Sha256};

use crate::error::Error;

/// The scheme prefix of every digest URI.
pub const SHA256_PREFIX: &str = "sha256:";

/// Length in characters of a complete digest URI (`7 + 64`).
pub const SHA256_URI_LEN: usize = SHA256_PREFIX.len() + 64;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hexadecimal encoding of `bytes`, two characters per byte, no prefix or separators.
pub fn hex_lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    out
}

/// Decodes one lowercase hex digit; uppercase and anything else is `None`.
pub(crate) fn lower_hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Decodes exactly `2 * N` lowercase hex characters into `N` bytes; `None` on any other input.
pub(crate) fn decode_lower_hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let raw = s.as_bytes();
    if raw.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (slot, pair) in out.iter_mut().zip(raw.chunks_exact(2)) {
        *slot = (lower_hex_value(pair[0])? << 4) | lower_hex_value(pair[1])?;
    }
    Some(out)
}

/// Formats a raw 32-byte SHA-256 digest as a digest URI.
pub fn sha256_uri_from_bytes(digest: &[u8; 32]) -> String {
    let mut out = String::with_capacity(SHA256_URI_LEN);
    out.push_str(SHA256_PREFIX);
    out.push_str(&hex_lower(digest));
    out
}

/// SHA-256 of `bytes` as a digest URI: `"sha256:"` + 64 lowercase hex characters.
pub fn sha256_uri(bytes: &[u8]) -> String {
    let mut s = Sha256Stream::new();
    s.update(bytes);
    s.finish()
}

/// Parses a digest URI strictly: the `sha256:` prefix (lowercase) followed by exactly 64
/// lowercase hex characters, nothing else. Returns the 32 digest bytes.
///
/// Errors: [`Error::InvalidDigest`] for any other string (uppercase hex, wrong length, other
/// scheme, whitespace).
pub fn parse_sha256_uri(uri: &str) -> Result<[u8; 32], Error> {
    uri.strip_prefix(SHA256_PREFIX)
        .and_then(decode_lower_hex::<32>)
        .ok_or_else(|| Error::InvalidDigest {
            value: uri.to_owned(),
        })
}

/// Incremental SHA-256 over a byte stream (e.g. a block being uploaded in pieces).
///
/// `update` any number of times, then `finish` for the digest URI or `finish_bytes` for the raw
/// 32 bytes. The result equals [`sha256_uri`] over the concatenation of all updates.
#[derive(Clone, Default)]
pub struct Sha256Stream {
    hasher: Sha256,
    len: u64,
}

impl Sha256Stream {
    /// A fresh stream over zero bytes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `bytes` to the hashed stream.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        // u64 byte counter; saturates rather than wraps (unreachable in practice).
        self.len = self
            .len
            .saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
    }

    /// Number of bytes hashed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `true` when no bytes have been hashed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Consumes the stream and returns the raw 32-byte SHA-256 digest.
    pub fn finish_bytes(self) -> [u8; 32] {
        self.hasher.finalize().into()
    }

    /// Consumes the stream and returns the digest URI (`"sha256:"` + 64 lowercase hex).
    pub fn finish(self) -> String {
        sha256_uri_from_bytes(&self.finish_bytes())
    }
}

impl std::fmt::Debug for Sha256Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sha256Stream")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ABC: &str = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn sha256_uri_matches_known_vectors() {
        assert_eq!(sha256_uri(b"abc"), ABC);
        assert_eq!(sha256_uri(b""), EMPTY);
        assert_eq!(sha256_uri(b"abc").len(), SHA256_URI_LEN);
    }

    #[test]
    fn stream_in_pieces_equals_one_shot() {
        let mut s = Sha256Stream::new();
        assert!(s.is_empty());
        s.update(b"a");
        s.update(b"");
        s.update(b"bc");
        assert_eq!(s.len(), 3);
        let raw = s.clone().finish_bytes();
        assert_eq!(s.finish(), ABC);
        assert_eq!(sha256_uri_from_bytes(&raw), ABC);
    }

    #[test]
    fn parse_round_trips_known_vector() {
        let raw = parse_sha256_uri(ABC).expect("valid uri");
        assert_eq!(raw[0], 0xba);
        assert_eq!(raw[31], 0xad);
        assert_eq!(sha256_uri_from_bytes(&raw), ABC);
    }

    #[test]
    fn parse_rejects_non_canonical_uris() {
        let upper = ABC.replace("ba78", "BA78");
        let bad = [
            "",
            "sha256:",
            &ABC[..ABC.len() - 1],
            &format!("{ABC}0"),
            &upper,
            &ABC.replace("sha256:", "SHA256:"),
            &ABC.replace("sha256:", "sha512:"),
            &ABC.replace("sha256:", ""),
            &format!(" {ABC}"),
            &ABC.replacen('b', "g", 1),
        ];
        for value in bad {
            match parse_sha256_uri(value) {
                Err(Error::InvalidDigest { value: v }) => assert_eq!(v, value),
                other => panic!("{value:?} accepted or wrong error: {other:?}"),
            }
        }
    }

    #[test]
    fn hex_lower_encodes_every_nibble() {
        assert_eq!(
            hex_lower(&[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]),
            "0123456789abcdef"
        );
        assert_eq!(hex_lower(&[]), "");
        assert_eq!(decode_lower_hex::<2>("00ff"), Some([0x00, 0xff]));
        assert_eq!(decode_lower_hex::<2>("00FF"), None);
        assert_eq!(decode_lower_hex::<2>("00f"), None);
    }

    proptest! {
        #[test]
        fn stream_split_anywhere_equals_one_shot(data in proptest::collection::vec(any::<u8>(), 0..512), cut in 0usize..512) {
            let cut = cut.min(data.len());
            let mut s = Sha256Stream::new();
            s.update(&data[..cut]);
            s.update(&data[cut..]);
            let uri = s.finish();
            prop_assert_eq!(&uri, &sha256_uri(&data));
            let raw = parse_sha256_uri(&uri).expect("own output parses");
            prop_assert_eq!(sha256_uri_from_bytes(&raw), uri);
        }

        #[test]
        fn parse_never_panics(s in ".{0,80}") {
            let _ = parse_sha256_uri(&s);
        }
    }
}
