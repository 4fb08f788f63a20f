//! Token secrets and their salted hashes (docs/server.md, "Tokens").
//!
//! A token is the text `nokv_<id>_<secret>`: `id` is 16 lowercase hex digits (8 random bytes)
//! and names the token's record, `secret` is 64 lowercase hex digits (32 random bytes). The
//! registry keeps only `HMAC-SHA256(key = salt, message = token text)` with a random 16-byte
//! salt per token, never the text. Verifying one presented token is one map lookup by `id` and
//! one HMAC whose result is compared in constant time (`hmac`'s `verify_slice`): cheap enough
//! for every request, and a leaked registry file gives no usable token.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The text every token starts with.
pub const TOKEN_PREFIX: &str = "nokv_";

/// Bytes of a token id.
const ID_BYTES: usize = 8;
/// Bytes of a token's secret part.
const SECRET_BYTES: usize = 32;
/// Bytes of a per-token salt.
pub const SALT_BYTES: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// A newly minted token: its text (shown once) and what the registry stores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MintedToken {
    /// The record id (16 hex digits), also inside `text`.
    pub id: String,
    /// The whole token, `nokv_<id>_<secret>`.
    pub text: String,
    /// The salt, 32 hex digits.
    pub salt_hex: String,
    /// `HMAC-SHA256(salt, text)`, 64 hex digits.
    pub hash_hex: String,
}

/// Why a token could not be minted: the system's random source failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the system random source failed: {0}")]
pub struct RandomError(pub String);

/// Mints a token from the system random source. Errors: [`RandomError`].
pub fn mint() -> Result<MintedToken, RandomError> {
    let mut id = [0u8; ID_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    let mut salt = [0u8; SALT_BYTES];
    for buf in [&mut id[..], &mut secret[..], &mut salt[..]] {
        getrandom::fill(buf).map_err(|e| RandomError(e.to_string()))?;
    }
    let id = hex(&id);
    let text = format!("{TOKEN_PREFIX}{id}_{}", hex(&secret));
    let hash_hex = hex(&hash(&salt, &text));
    Ok(MintedToken {
        id,
        text,
        salt_hex: hex(&salt),
        hash_hex,
    })
}

/// The record id inside a presented token text, or `None` when the text does not have the
/// token shape (then no record can match it).
pub fn token_id(text: &str) -> Option<&str> {
    let rest = text.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hex_of = |s: &str, n: usize| {
        s.len() == n * 2
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    (hex_of(id, ID_BYTES) && hex_of(secret, SECRET_BYTES)).then_some(id)
}

/// Whether `text` is the token whose record holds `salt` and `expected` (raw bytes), compared
/// in constant time.
pub fn verify(salt: &[u8], expected: &[u8], text: &str) -> bool {
    let Ok(mut mac) = HmacSha256::new_from_slice(salt) else {
        return false;
    };
    mac.update(text.as_bytes());
    mac.verify_slice(expected).is_ok()
}

/// Whether two texts are equal, in time that depends only on their lengths (token texts all
/// have one length).
pub fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `HMAC-SHA256(salt, text)`.
fn hash(salt: &[u8], text: &str) -> Vec<u8> {
    match HmacSha256::new_from_slice(salt) {
        Ok(mut mac) => {
            mac.update(text.as_bytes());
            mac.finalize().into_bytes().to_vec()
        }
        // HMAC takes keys of any length; this arm is never taken.
        Err(_) => Vec::new(),
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of lowercase or uppercase hex text; `None` for anything else.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minted_token_verifies_and_any_change_does_not() {
        let t = mint().unwrap();
        assert_eq!(token_id(&t.text), Some(t.id.as_str()));
        let salt = unhex(&t.salt_hex).unwrap();
        let hash = unhex(&t.hash_hex).unwrap();
        assert!(verify(&salt, &hash, &t.text));
        let mut other = t.text.clone();
        let last = other.pop().unwrap();
        other.push(if last == '0' { '1' } else { '0' });
        assert!(!verify(&salt, &hash, &other));
        assert!(!t.hash_hex.contains(&t.text[TOKEN_PREFIX.len()..]));
        assert_ne!(mint().unwrap().text, t.text);
    }

    #[test]
    fn texts_without_the_token_shape_have_no_id() {
        for bad in [
            "",
            "nokv_",
            "nokv_0123456789abcdef",
            "nokv_0123456789abcdeg_00",
            "plain-secret",
            "nokv_0123456789ABCDEF_0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            assert_eq!(token_id(bad), None, "{bad}");
        }
    }
}
