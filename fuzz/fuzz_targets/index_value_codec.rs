//! Fuzz the versioned, order-preserving secondary-index value codec (docs/metadata-format.md,
//! `meta::index::value_codec`):
//! * arbitrary bytes never panic the decoder; an accepted encoding is canonical (re-encodes to
//!   the same bytes) and `decode_prefix` agrees with it;
//! * two values built from the input round-trip, and the byte order of their encodings equals
//!   the documented value order; `order_prefix` is a prefix of the encoding;
//! * NaN and ±∞ are rejected.
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta::index::value_codec::{IndexValue, Timestamp};

/// Builds one value from the front of `data`, returning it and the unused rest.
fn value(data: &[u8]) -> Option<(IndexValue, &[u8])> {
    let (&sel, rest) = data.split_first()?;
    let word = |rest: &[u8]| -> Option<(u64, usize)> {
        let n = rest.len().min(8);
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&rest[..n]);
        Some((u64::from_be_bytes(a), n))
    };
    Some(match sel % 9 {
        0 => (IndexValue::Null, rest),
        1 => (
            IndexValue::Bool(rest.first().is_some_and(|b| b & 1 == 1)),
            rest.get(1..).unwrap_or(&[]),
        ),
        2 => {
            let (w, n) = word(rest)?;
            (IndexValue::Int(w as i64), &rest[n..])
        }
        3 => {
            let (w, n) = word(rest)?;
            (IndexValue::UInt(w), &rest[n..])
        }
        4 | 5 => {
            let (w, n) = word(rest)?;
            let f = f64::from_bits(w);
            match IndexValue::float(f) {
                Ok(v) => {
                    assert!(f.is_finite(), "non-finite float {f} accepted");
                    (v, &rest[n..])
                }
                Err(_) => {
                    assert!(!f.is_finite(), "finite float {f} rejected");
                    return None;
                }
            }
        }
        6 => {
            let (w, n) = word(rest)?;
            let nanos = rest
                .get(n..n + 4)
                .map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
            let used = (n + 4).min(rest.len());
            let ts = Timestamp::new(w as i64, nanos % 1_000_000_000).ok()?;
            (IndexValue::Timestamp(ts), &rest[used..])
        }
        7 => {
            let len = usize::from(*rest.first()?) % 24;
            let body = rest.get(1..1 + len).unwrap_or(rest.get(1..).unwrap_or(&[]));
            let used = (1 + body.len()).min(rest.len());
            (
                IndexValue::String(String::from_utf8_lossy(body).into_owned()),
                &rest[used..],
            )
        }
        _ => {
            let len = usize::from(*rest.first()?) % 24;
            let body = rest.get(1..1 + len).unwrap_or(rest.get(1..).unwrap_or(&[]));
            let used = (1 + body.len()).min(rest.len());
            (IndexValue::Bytes(body.to_vec()), &rest[used..])
        }
    })
}

fuzz_target!(|data: &[u8]| {
    // 1. Raw decoding.
    if let Ok(v) = IndexValue::decode(data) {
        assert_eq!(
            v.encode().expect("decoded values encode"),
            data,
            "non-canonical accept"
        );
    }
    if let Ok((v, used)) = IndexValue::decode_prefix(data) {
        assert_eq!(v.encode().expect("decoded values encode"), &data[..used]);
    }
    // 2. Structured pair.
    let Some((a, rest)) = value(data) else { return };
    let Some((b, _)) = value(rest) else { return };
    let (ea, eb) = (a.encode().unwrap(), b.encode().unwrap());
    assert_eq!(IndexValue::decode(&ea).unwrap(), a);
    assert_eq!(IndexValue::decode(&eb).unwrap(), b);
    assert_eq!(ea.cmp(&eb), a.cmp(&b), "{a:?} vs {b:?}");
    assert!(ea.starts_with(&a.order_prefix().unwrap()));
    if ea != eb {
        assert!(
            !ea.starts_with(&eb) && !eb.starts_with(&ea),
            "an encoding is a prefix of another"
        );
    }
    // An index key continues after the value: decode_prefix must stop exactly at its end.
    let mut cont = ea.clone();
    cont.extend_from_slice(&eb);
    let (v, used) = IndexValue::decode_prefix(&cont).unwrap();
    assert_eq!((v, used), (a, ea.len()));
});
