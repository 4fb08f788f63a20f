//! Fuzz the History key codec (docs/metadata-format.md: `source_family_tag | u32 len(user_key) | user_key |
//! inverted_commit_version`, `meta::codec::history`):
//! * arbitrary bytes never panic; an accepted key is canonical (re-encodes to the same bytes) and
//!   its tag names a versioned family of docs/metadata-format.md;
//! * two keys built from the input round-trip; rows of one user key sort newest first; the
//!   per-key prefix of one (family, user key) is never a prefix of another's key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta::codec::history::{key_prefix, source_family, HistoryKey};

fn build(data: &[u8]) -> Option<(HistoryKey, &[u8])> {
    let (&tag, rest) = data.split_first()?;
    let source = source_family(tag % 0x18)?;
    let (&len, rest) = rest.split_first()?;
    let len = usize::from(len % 32).min(rest.len());
    let (user_key, rest) = rest.split_at(len);
    let n = rest.len().min(8);
    let mut v = [0u8; 8];
    v[..n].copy_from_slice(&rest[..n]);
    Some((
        HistoryKey {
            source,
            user_key: user_key.to_vec(),
            commit_version: u64::from_be_bytes(v),
        },
        &rest[n..],
    ))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(k) = HistoryKey::decode(data) {
        assert_eq!(k.encode(), data, "non-canonical accept");
        assert!(k.source.versioned());
        assert_eq!(source_family(k.source.tag()), Some(k.source));
    }
    let Some((a, rest)) = build(data) else { return };
    let Some((b, _)) = build(rest) else { return };
    let (ea, eb) = (a.encode(), b.encode());
    assert_eq!(HistoryKey::decode(&ea).unwrap(), a);
    assert_eq!(HistoryKey::decode(&eb).unwrap(), b);
    let (pa, pb) = (
        key_prefix(a.source, &a.user_key),
        key_prefix(b.source, &b.user_key),
    );
    assert!(ea.starts_with(&pa));
    if (a.source, &a.user_key) == (b.source, &b.user_key) {
        // Newest first.
        assert_eq!(ea.cmp(&eb), b.commit_version.cmp(&a.commit_version));
    } else {
        assert!(!eb.starts_with(&pa), "prefix of {a:?} matches {b:?}");
        assert!(!ea.starts_with(&pb), "prefix of {b:?} matches {a:?}");
    }
});
