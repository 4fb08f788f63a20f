//! Unit tests of the query planner and executor.

use super::*;
use crate::index::query::ranges::join;
use crate::index::query::ranges::normalize_ranges;
use crate::index::query::ranges::prefix_successor;
use crate::index::query::ranges::range_of;
use crate::index::query::ranges::KeyRange;
use crate::index::FieldId;
use crate::index::IndexValue;
use crate::Error;

fn s(v: &str) -> IndexValue {
    IndexValue::String(v.into())
}

fn pred(field: &str, op: Op, operands: Vec<IndexValue>) -> Predicate {
    Predicate {
        field: FieldId::new(field).unwrap(),
        op,
        operands,
    }
}

#[test]
fn operators_follow_the_documented_semantics() {
    let num = IndexValue::float(4076.5).unwrap();
    let gt = pred("m", Op::Gt, vec![IndexValue::Int(4000)]);
    assert!(gt.matches(Some(&num)));
    assert!(!gt.matches(Some(&IndexValue::Int(4000))));
    assert!(!gt.matches(Some(&s("5000"))), "ranges stay in their domain");
    assert!(!gt.matches(None));
    assert!(pred("m", Op::Gte, vec![IndexValue::UInt(4000)]).matches(Some(&IndexValue::Int(4000))));
    assert!(pred("m", Op::Lte, vec![IndexValue::float(4000.0).unwrap()])
        .matches(Some(&IndexValue::Int(4000))));
    assert!(pred("m", Op::Lt, vec![IndexValue::Int(0)]).matches(Some(&IndexValue::Int(-1))));
    assert!(
        pred("m", Op::Eq, vec![IndexValue::Int(5)]).matches(Some(&IndexValue::float(5.0).unwrap()))
    );
    let in_ = pred("s", Op::In, vec![s("Adelie"), s("Gentoo")]);
    assert!(in_.matches(Some(&s("Gentoo"))) && !in_.matches(Some(&s("Chinstrap"))));
    let ne = pred("s", Op::Ne, vec![s("Gentoo")]);
    assert!(ne.matches(Some(&s("Adelie"))) && !ne.matches(Some(&s("Gentoo"))));
    assert!(!ne.matches(None), "ne needs a present value");
    assert!(pred("s", Op::Prefix, vec![s("Gen")]).matches(Some(&s("Gentoo"))));
    assert!(pred("s", Op::Suffix, vec![s("too")]).matches(Some(&s("Gentoo"))));
    assert!(pred("s", Op::Contains, vec![s("nto")]).matches(Some(&s("Gentoo"))));
    assert!(!pred("s", Op::Contains, vec![s("NTO")]).matches(Some(&s("Gentoo"))));
    assert!(!pred("s", Op::Prefix, vec![s("1")]).matches(Some(&IndexValue::Int(12))));
    assert!(pred("s", Op::Exists, vec![]).matches(Some(&IndexValue::Null)));
    assert!(pred("s", Op::NotExists, vec![]).matches(None));
    assert!(!pred("s", Op::NotExists, vec![]).matches(Some(&IndexValue::Null)));
}

#[test]
fn predicate_shapes_are_validated() {
    for bad in [
        pred("f", Op::Exists, vec![IndexValue::Int(1)]),
        pred("f", Op::Eq, vec![]),
        pred("f", Op::Prefix, vec![IndexValue::Int(1)]),
        pred("f", Op::Gt, vec![IndexValue::Null]),
        pred("f", Op::Eq, vec![s(&"x".repeat(5000))]),
        pred("f", Op::In, vec![IndexValue::Int(1); MAX_OPERANDS + 1]),
    ] {
        assert!(
            matches!(bad.validate(), Err(Error::InvalidArgument(_))),
            "{bad:?}"
        );
    }
    assert!(pred("f", Op::NotExists, vec![]).validate().is_ok());
}

#[test]
fn ranges_are_sorted_and_merged() {
    let r = |a: &[u8], b: &[u8]| KeyRange {
        lower: a.to_vec(),
        upper: Some(b.to_vec()),
    };
    let merged = normalize_ranges(vec![
        r(b"c", b"d"),
        r(b"a", b"b2"),
        r(b"b", b"c"),
        r(b"x", b"x"),
    ]);
    // Overlaps merge; touching ranges stay apart (they share no key); empty ones vanish.
    assert_eq!(merged, vec![r(b"a", b"c"), r(b"c", b"d")]);
    assert_eq!(prefix_successor(&[1, 0xff, 0xff]), Some(vec![2]));
    assert_eq!(prefix_successor(&[0xff]), None);
}

#[test]
fn range_bounds_enclose_exactly_the_matching_values() {
    let fp = b"F".to_vec();
    let key = |v: &IndexValue| join(&fp, &v.encode().unwrap());
    let values = [
        IndexValue::Null,
        IndexValue::Bool(true),
        IndexValue::Int(-5),
        IndexValue::Int(3999),
        IndexValue::Int(4000),
        IndexValue::UInt(4000),
        IndexValue::float(4000.0).unwrap(),
        IndexValue::float(4000.5).unwrap(),
        IndexValue::UInt(u64::MAX),
        s("4001"),
    ];
    for op in [Op::Gt, Op::Gte, Op::Lt, Op::Lte] {
        let r = range_of(&fp, op, &IndexValue::Int(4000)).unwrap();
        let p = pred("f", op, vec![IndexValue::Int(4000)]);
        for v in &values {
            // A full key continues after the value with incarnation and path bytes.
            for tail in [[0x00u8; 20], [0xff; 20]] {
                let mut k = key(v);
                k.extend_from_slice(&tail);
                let inside = k > r.lower && r.upper.as_ref().is_none_or(|u| k < *u);
                assert_eq!(inside, p.matches(Some(v)), "{op:?} {v:?}");
            }
        }
    }
}

#[test]
fn search_digest_ignores_limit_and_resume_only() {
    let base = SearchRequest {
        scope: QueryScope::default(),
        predicates: vec![pred("m", Op::Gt, vec![IndexValue::Int(1)])],
        fields: None,
        sort: vec![],
        facets: vec![],
        limit: 10,
        resume: None,
    };
    let mut other = base.clone();
    other.limit = 3;
    other.resume = Some(Resume {
        read_version: 9,
        offset: 3,
    });
    assert_eq!(base.digest(), other.digest());
    let mut sorted = base.clone();
    sorted.sort.push(SortKey {
        field: FieldId::new("m").unwrap(),
        direction: Direction::Desc,
    });
    assert_ne!(base.digest(), sorted.digest());
    let mut scoped = base.clone();
    scoped.scope.workbench_id = Some("wb".into());
    assert_ne!(base.digest(), scoped.digest());
}
