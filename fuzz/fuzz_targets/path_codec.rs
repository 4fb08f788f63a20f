//! Fuzz the one shared path normalizer and the ordered path codec (docs/metadata-format.md):
//! * arbitrary input never panics; accepted paths round-trip through `ordered_key`;
//! * for two accepted paths, byte order of their keys equals the component order of docs/metadata-format.md
//!   (first differing component byte-wise; a path sorts after its own descendants);
//! * no exact key is a strict prefix of another;
//! * arbitrary key bytes that decode are canonical: they re-encode to exactly the same bytes
//!   (see README "Regressions": this currently fails for an encoded `/` inside a component).
#![no_main]

use libfuzzer_sys::fuzz_target;
use meta::path::{decode_ordered_key, normalize, ordered_key};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = decode_ordered_key(data) {
        assert_eq!(
            ordered_key(&p),
            data,
            "non-canonical path key accepted as {p:?}"
        );
    }
    let (left, right) = match data.iter().position(|&b| b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let (Ok(a), Ok(b)) = (std::str::from_utf8(left), std::str::from_utf8(right)) else {
        return;
    };
    let pa = normalize(a);
    let pb = normalize(b);
    if let Ok(p) = &pa {
        let key = ordered_key(p);
        assert_eq!(
            decode_ordered_key(&key).expect("round trip").as_str(),
            p.as_str()
        );
    }
    if let (Ok(p), Ok(q)) = (pa, pb) {
        let (kp, kq) = (ordered_key(&p), ordered_key(&q));
        let cp: Vec<&str> = p.components().collect();
        let cq: Vec<&str> = q.components().collect();
        let expected = match cp.iter().zip(&cq).find(|(x, y)| x != y) {
            Some((x, y)) => x.as_bytes().cmp(y.as_bytes()),
            None => cq.len().cmp(&cp.len()), // a descendant sorts before its ancestor
        };
        assert_eq!(kp.cmp(&kq), expected, "{p:?} vs {q:?}");
        if kp != kq {
            assert!(!kq.starts_with(&kp) && !kp.starts_with(&kq));
        }
    }
});
