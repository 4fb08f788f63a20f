use super::*;

fn enc(v: &IndexValue) -> Vec<u8> {
    v.encode().unwrap()
}

#[test]
fn nan_and_infinities_are_rejected_with_a_typed_error() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        assert!(matches!(
            IndexValue::float(bad),
            Err(Error::InvalidArgument(_))
        ));
    }
}

#[test]
fn numbers_share_one_domain_ordered_by_exact_value() {
    let ordered = [
        IndexValue::float(-1e300).unwrap(),
        IndexValue::Int(i64::MIN),
        IndexValue::Int(-4001),
        IndexValue::float(-4000.5).unwrap(),
        IndexValue::Int(-1),
        IndexValue::float(-f64::from_bits(1)).unwrap(),
        IndexValue::Int(0),
        IndexValue::UInt(0),
        IndexValue::float(-0.0).unwrap(),
        IndexValue::float(f64::from_bits(1)).unwrap(),
        IndexValue::float(0.5).unwrap(),
        IndexValue::Int(4000),
        IndexValue::UInt(4000),
        IndexValue::float(4000.0).unwrap(),
        IndexValue::float(4000.5).unwrap(),
        IndexValue::UInt(4001),
        IndexValue::Int(i64::MAX),
        IndexValue::UInt(1 << 63),
        IndexValue::UInt(u64::MAX - 1),
        IndexValue::UInt(u64::MAX),
        IndexValue::float(18446744073709551616.0).unwrap(),
        IndexValue::float(f64::MAX).unwrap(),
    ];
    for w in ordered.windows(2) {
        assert!(w[0] < w[1], "{:?} < {:?}", w[0], w[1]);
        assert!(enc(&w[0]) < enc(&w[1]), "bytes {:?} < {:?}", w[0], w[1]);
    }
    for v in &ordered {
        assert_eq!(&IndexValue::decode(&enc(v)).unwrap(), v);
    }
}

#[test]
fn equal_values_of_different_types_share_the_order_prefix() {
    let a = IndexValue::Int(4000).order_prefix().unwrap();
    assert_eq!(a, IndexValue::UInt(4000).order_prefix().unwrap());
    assert_eq!(
        a,
        IndexValue::float(4000.0).unwrap().order_prefix().unwrap()
    );
    assert!(enc(&IndexValue::float(4000.0).unwrap()).starts_with(&a));
    assert!(!enc(&IndexValue::float(4000.5).unwrap()).starts_with(&a));
}

#[test]
fn variable_values_are_prefix_free() {
    let a = enc(&IndexValue::String("a".into()));
    let a0 = enc(&IndexValue::String("a\0".into()));
    let ab = enc(&IndexValue::String("ab".into()));
    assert!(a < a0 && a0 < ab);
    assert!(!a0.starts_with(&a) && !ab.starts_with(&a));
    assert_eq!(a0, vec![1, 0x50, b'a', 0, 0xff, 0, 1]);
}

#[test]
fn malformed_encodings_fail_closed() {
    let cases: &[&[u8]] = &[
        &[],
        &[2, 0x10],
        &[1],
        &[1, 0x11],
        &[1, 0x20, 2],
        &[1, 0x31, 4],
        &[1, 0x50, b'a'],
        &[1, 0x50, b'a', 0, 2],
        &[1, 0x50, 0xff, 0, 1],
        &[1, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x9a, 0xca, 0x00],
        // significand without its top bit
        &[1, 0x32, 0x04, 0x32, 0x40, 0, 0, 0, 0, 0, 0, 0, 1],
        // integer subtype with a fractional bit pattern (0.5)
        &[1, 0x32, 0x04, 0x31, 0x80, 0, 0, 0, 0, 0, 0, 0, 1],
    ];
    for c in cases {
        assert!(
            matches!(IndexValue::decode(c), Err(Error::Codec { .. })),
            "{c:02x?}"
        );
    }
    let mut trailing = enc(&IndexValue::Null);
    trailing.push(0);
    assert!(IndexValue::decode(&trailing).is_err());
    assert_eq!(
        IndexValue::decode_prefix(&trailing).unwrap(),
        (IndexValue::Null, 2)
    );
}

#[test]
fn oversized_variable_values_are_refused() {
    let big = IndexValue::Bytes(vec![1; MAX_VARIABLE_VALUE_BYTES + 1]);
    assert!(matches!(big.encode(), Err(Error::InvalidArgument(_))));
    assert!(IndexValue::Bytes(vec![0; MAX_VARIABLE_VALUE_BYTES])
        .encode()
        .is_ok());
}

#[test]
fn rfc3339_parses_offsets_fractions_and_round_trips_in_utc() {
    let t = Timestamp::parse_rfc3339("2024-02-29T12:34:56.5+01:30").unwrap();
    assert_eq!((t.seconds(), t.nanos()), (1_709_204_696, 500_000_000));
    assert_eq!(t.to_rfc3339(), "2024-02-29T11:04:56.5Z");
    let epoch = Timestamp::parse_rfc3339("1970-01-01T00:00:00Z").unwrap();
    assert_eq!((epoch.seconds(), epoch.nanos()), (0, 0));
    let before = Timestamp::parse_rfc3339("1969-12-31 23:59:59.000000001z").unwrap();
    assert_eq!((before.seconds(), before.nanos()), (-1, 1));
    assert_eq!(before.to_rfc3339(), "1969-12-31T23:59:59.000000001Z");
    for s in [
        -62_135_596_800i64,
        -1,
        0,
        951_782_400,
        4_102_444_800,
        253_402_300_799,
    ] {
        let t = Timestamp::new(s, 0).unwrap();
        assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t), "{s}");
    }
    assert!(Timestamp::new(253_402_300_800, 0)
        .unwrap()
        .to_rfc3339()
        .starts_with("+10000-01-01"));
}

#[test]
fn rfc3339_rejects_everything_else() {
    for bad in [
        "",
        "2024-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2024-13-01T00:00:00Z",
        "2024-01-01T24:00:00Z",
        "2024-01-01T00:00:60Z",
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00.Z",
        "2024-01-01T00:00:00.1234567890Z",
        "2024-01-01T00:00:00+0100",
        "2024-01-01T00:00:00Zx",
        "24-01-01T00:00:00Z",
        "Gentoo",
    ] {
        assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad:?}");
    }
}

#[test]
fn value_order_ignores_the_numeric_subtype_and_variants_cover_it() {
    assert!(IndexValue::Int(5).value_eq(&IndexValue::float(5.0).unwrap()));
    assert!(IndexValue::UInt(5).value_eq(&IndexValue::Int(5)));
    assert_eq!(
        IndexValue::Int(5).value_cmp(&IndexValue::float(5.5).unwrap()),
        Ordering::Less
    );
    assert_eq!(
        IndexValue::Int(5).value_variants(),
        vec![
            IndexValue::Int(5),
            IndexValue::UInt(5),
            IndexValue::float(5.0).unwrap()
        ]
    );
    assert_eq!(
        IndexValue::Int(-3).value_variants(),
        vec![IndexValue::Int(-3), IndexValue::float(-3.0).unwrap()]
    );
    assert_eq!(
        IndexValue::float(0.5).unwrap().value_variants(),
        vec![IndexValue::float(0.5).unwrap()]
    );
    // u64::MAX has no exact f64; 2^64 has no integer.
    assert_eq!(IndexValue::UInt(u64::MAX).value_variants().len(), 1);
    assert_eq!(
        IndexValue::float(18446744073709551616.0)
            .unwrap()
            .value_variants()
            .len(),
        1
    );
    // i64::MAX rounds up to 2^63 as f64, which is not equal to it.
    assert!(!IndexValue::Int(i64::MAX)
        .value_variants()
        .iter()
        .any(|v| matches!(v, IndexValue::Float(_))));
    for v in IndexValue::Int(4000).value_variants() {
        assert!(v.value_eq(&IndexValue::Int(4000)));
        assert!(enc(&v).starts_with(&IndexValue::Int(4000).order_prefix().unwrap()));
    }
}

#[test]
fn domain_bounds_enclose_exactly_their_domain() {
    let samples = [
        IndexValue::Null,
        IndexValue::Bool(true),
        IndexValue::Int(i64::MIN),
        IndexValue::Int(0),
        IndexValue::UInt(u64::MAX),
        IndexValue::Timestamp(Timestamp::new(-5, 0).unwrap()),
        IndexValue::String(String::new()),
        IndexValue::String("\u{10ffff}".into()),
        IndexValue::Bytes(vec![0xff; 3]),
    ];
    for v in &samples {
        for d in [
            ValueDomain::Null,
            ValueDomain::Bool,
            ValueDomain::Number,
            ValueDomain::Timestamp,
            ValueDomain::String,
            ValueDomain::Bytes,
        ] {
            let (lo, hi) = domain_key_bounds(d);
            let e = enc(v);
            let inside = e.as_slice() >= &lo[..] && e.as_slice() < &hi[..];
            assert_eq!(inside, v.domain() == d, "{v:?} in {d:?}");
        }
    }
}

#[test]
fn string_prefix_bound_is_a_prefix_of_exactly_the_matching_strings() {
    let p = string_prefix_bound("a\0b").unwrap();
    assert!(enc(&IndexValue::String("a\0b".into())).starts_with(&p));
    assert!(enc(&IndexValue::String("a\0bc".into())).starts_with(&p));
    assert!(!enc(&IndexValue::String("a\0".into())).starts_with(&p));
    assert!(!enc(&IndexValue::String("a".into())).starts_with(&p));
    assert!(!enc(&IndexValue::Bytes(b"a\0b".to_vec())).starts_with(&p));
    assert!(string_prefix_bound(&"x".repeat(MAX_VARIABLE_VALUE_BYTES + 1)).is_err());
}

#[test]
fn timestamps_from_millis_floor_toward_negative_infinity() {
    let t = Timestamp::from_unix_millis(-1);
    assert_eq!((t.seconds(), t.nanos()), (-1, 999_000_000));
    assert!(Timestamp::new(0, 1_000_000_000).is_err());
}
