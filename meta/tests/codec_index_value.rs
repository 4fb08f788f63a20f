//! Properties of the secondary-index value codec (docs/metadata-format.md: versioned and order-preserving for
//! null, boolean, signed/unsigned integer, finite float, timestamp, bytes and string values):
//! byte order of encodings equals the documented value order, encodings round-trip, are
//! self-delimiting and prefix-free, and numbers share one domain ordered by exact value.

use std::cmp::Ordering;

use meta::index::{IndexValue, Timestamp};
use meta::Error;
use proptest::prelude::*;

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        (-1000i64..1000).prop_map(|i| i as f64 / 4.0),
        any::<u64>().prop_map(|b| f64::from_bits(b & 0x000f_ffff_ffff_ffff)), // subnormals
        (0u32..64).prop_map(|e| 2f64.powi(e as i32)),
        (0u32..64).prop_map(|e| -(2f64.powi(e as i32))),
    ]
}

fn int_near_powers() -> impl Strategy<Value = i64> {
    prop_oneof![
        any::<i64>(),
        (0u32..63, -2i64..=2).prop_map(|(e, d)| (1i64 << e).saturating_add(d)),
        (0u32..63, -2i64..=2).prop_map(|(e, d)| (-(1i64 << e)).saturating_add(d)),
        Just(i64::MIN),
        Just(i64::MAX),
    ]
}

fn value() -> impl Strategy<Value = IndexValue> {
    prop_oneof![
        Just(IndexValue::Null),
        any::<bool>().prop_map(IndexValue::Bool),
        int_near_powers().prop_map(IndexValue::Int),
        prop_oneof![
            any::<u64>(),
            (0u32..64).prop_map(|e| 1u64 << e),
            Just(u64::MAX)
        ]
        .prop_map(IndexValue::UInt),
        finite().prop_map(|f| IndexValue::float(f).unwrap()),
        // Integral floats collide in value with integers: exercises the tie-break.
        (-64i64..64).prop_map(|i| IndexValue::float(i as f64).unwrap()),
        (-64i64..64).prop_map(IndexValue::Int),
        (0u64..64).prop_map(IndexValue::UInt),
        (any::<i64>(), 0u32..1_000_000_000)
            .prop_map(|(s, n)| IndexValue::Timestamp(Timestamp::new(s, n).unwrap())),
        (-3i64..3, 0u32..3).prop_map(|(s, n)| IndexValue::Timestamp(Timestamp::new(s, n).unwrap())),
        "\\PC{0,6}".prop_map(IndexValue::String),
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1), Just(0xff), any::<u8>()],
            0..6
        )
        .prop_map(IndexValue::Bytes),
        proptest::collection::vec(prop_oneof![Just('\0'), Just('a'), Just('\u{1}')], 0..5)
            .prop_map(|cs| IndexValue::String(cs.into_iter().collect())),
    ]
}

/// Exact comparison of two numbers, computed independently of the codec: each i64/u64/finite
/// f64 is `±m · 2^e` with integer `m < 2^64`; left-aligning `m` in a u128 gives
/// `(bit position of the leading one + e, aligned m)`, which orders magnitudes exactly.
fn exact_cmp(a: &IndexValue, b: &IndexValue) -> Option<Ordering> {
    fn parts(v: &IndexValue) -> Option<(i8, i32, u128)> {
        let (neg, m, e): (bool, u128, i32) = match v {
            IndexValue::Int(i) => (*i < 0, u128::from(i.unsigned_abs()), 0),
            IndexValue::UInt(u) => (false, u128::from(*u), 0),
            IndexValue::Float(f) => {
                let bits = f.get().to_bits();
                let exp = ((bits >> 52) & 0x7ff) as i32;
                let frac = u128::from(bits & 0x000f_ffff_ffff_ffff);
                let (m, e) = if exp == 0 {
                    (frac, -1074)
                } else {
                    (frac | (1 << 52), exp - 1075)
                };
                (bits >> 63 == 1, m, e)
            }
            _ => return None,
        };
        if m == 0 {
            return Some((0, 0, 0));
        }
        let lz = m.leading_zeros() as i32;
        Some((if neg { -1 } else { 1 }, e + (127 - lz), m << lz))
    }
    let (sa, ea, ma) = parts(a)?;
    let (sb, eb, mb) = parts(b)?;
    if sa != sb {
        return Some(sa.cmp(&sb));
    }
    let magnitude = (ea, ma).cmp(&(eb, mb));
    Some(if sa < 0 {
        magnitude.reverse()
    } else {
        magnitude
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn encodings_round_trip(v in value()) {
        let b = v.encode().unwrap();
        prop_assert_eq!(IndexValue::decode(&b).unwrap(), v.clone());
        let mut longer = b.clone();
        longer.extend_from_slice(&[0x00, 0x01, 0xff]);
        prop_assert_eq!(IndexValue::decode_prefix(&longer).unwrap(), (v, b.len()));
    }

    #[test]
    fn byte_order_of_encodings_is_the_documented_value_order(a in value(), b in value()) {
        let (ea, eb) = (a.encode().unwrap(), b.encode().unwrap());
        prop_assert_eq!(ea.cmp(&eb), a.cmp(&b), "{:?} vs {:?}", a, b);
        if a != b {
            prop_assert!(!ea.starts_with(&eb) && !eb.starts_with(&ea), "prefix: {:?} {:?}", a, b);
        }
    }

    #[test]
    fn numbers_are_ordered_by_exact_mathematical_value(a in value(), b in value()) {
        if let Some(exact) = exact_cmp(&a, &b) {
            let (pa, pb) = (a.order_prefix().unwrap(), b.order_prefix().unwrap());
            // The order prefix (encoding without the subtype byte) orders by value alone.
            prop_assert_eq!(pa.cmp(&pb), exact, "{:?} vs {:?}", a, b);
            if exact != Ordering::Equal {
                prop_assert_eq!(a.cmp(&b), exact);
            }
        }
    }
}

#[test]
fn gt_4000_finds_ints_uints_and_floats_alike() {
    let bound = IndexValue::Int(4000).order_prefix().unwrap();
    let mut keys: Vec<(Vec<u8>, IndexValue)> = [
        IndexValue::Int(3999),
        IndexValue::float(3999.99).unwrap(),
        IndexValue::Int(4000),
        IndexValue::UInt(4000),
        IndexValue::float(4000.0).unwrap(),
        IndexValue::float(4000.25).unwrap(),
        IndexValue::UInt(4001),
        IndexValue::Int(i64::MAX),
        IndexValue::float(1e30).unwrap(),
        IndexValue::Timestamp(Timestamp::new(0, 0).unwrap()),
    ]
    .into_iter()
    .map(|v| (v.encode().unwrap(), v))
    .collect();
    keys.sort();
    // `gt 4000`: strictly after every key starting with the bound, and still a number.
    let gt: Vec<&IndexValue> = keys
        .iter()
        .filter(|(k, _)| k.as_slice() > bound.as_slice() && !k.starts_with(&bound))
        .filter(|(_, v)| {
            matches!(
                v,
                IndexValue::Int(_) | IndexValue::UInt(_) | IndexValue::Float(_)
            )
        })
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        gt,
        vec![
            &IndexValue::float(4000.25).unwrap(),
            &IndexValue::UInt(4001),
            &IndexValue::Int(i64::MAX),
            &IndexValue::float(1e30).unwrap(),
        ]
    );
    // `gte 4000` additionally finds the three equal values, in the tie order Int < UInt < Float.
    let eq: Vec<&IndexValue> = keys
        .iter()
        .filter(|(k, _)| k.starts_with(&bound))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        eq,
        vec![
            &IndexValue::Int(4000),
            &IndexValue::UInt(4000),
            &IndexValue::float(4000.0).unwrap()
        ]
    );
}

#[test]
fn cross_type_order_is_null_bool_number_timestamp_string_bytes() {
    let ordered = [
        IndexValue::Null,
        IndexValue::Bool(false),
        IndexValue::Bool(true),
        IndexValue::float(-1e308).unwrap(),
        IndexValue::UInt(u64::MAX),
        IndexValue::Timestamp(Timestamp::new(i64::MIN, 0).unwrap()),
        IndexValue::Timestamp(Timestamp::new(i64::MAX, 999_999_999).unwrap()),
        IndexValue::String(String::new()),
        IndexValue::String("\u{10ffff}".into()),
        IndexValue::Bytes(Vec::new()),
        IndexValue::Bytes(vec![0xff; 8]),
    ];
    for w in ordered.windows(2) {
        assert!(w[0] < w[1]);
        assert!(
            w[0].encode().unwrap() < w[1].encode().unwrap(),
            "{:?} < {:?}",
            w[0],
            w[1]
        );
    }
}

#[test]
fn nan_and_infinity_are_refused_and_negative_zero_is_zero() {
    for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -f64::NAN] {
        assert!(matches!(
            IndexValue::float(f),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(
        IndexValue::float(-0.0).unwrap(),
        IndexValue::float(0.0).unwrap()
    );
    assert_eq!(
        IndexValue::float(-0.0).unwrap().encode().unwrap(),
        vec![1, 0x31, 3]
    );
}

#[test]
fn unknown_codec_versions_types_and_subtypes_fail_closed() {
    let good = IndexValue::UInt(7).encode().unwrap();
    for (at, bad) in [
        (0usize, 0u8),
        (0, 2),
        (0, 0xff),
        (1, 0x00),
        (1, 0x33),
        (1, 0xff),
    ] {
        let mut b = good.clone();
        b[at] = bad;
        assert!(
            matches!(IndexValue::decode(&b), Err(Error::Codec { .. })),
            "byte {at} = {bad:#04x}"
        );
    }
    let mut b = good;
    let last = b.len() - 1;
    for sub in [0u8, 4, 0xff] {
        b[last] = sub;
        assert!(matches!(IndexValue::decode(&b), Err(Error::Codec { .. })));
    }
    // A float subtype on a body that needs more than 53 significand bits is non-canonical.
    let mut wide = IndexValue::UInt(u64::MAX).encode().unwrap();
    let last = wide.len() - 1;
    wide[last] = 3;
    assert!(matches!(
        IndexValue::decode(&wide),
        Err(Error::Codec { .. })
    ));
}
