//! Behaviour tests for the ART: model equivalence against `BTreeMap`, node kind transitions,
//! snapshot isolation, delimiter skipping cost, and scale.

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;

use super::child::Child;
use super::node::common_prefix_len;
use super::{Art, ListItem, NodeStats, Summarize, Summary, Verdict};

/// Test values summarise themselves so the per-node aggregates get exercised by every test:
/// integers are "dead" (tombstone-like) when divisible by 4 and stamp their own value.
macro_rules! summarize_ints {
    ($($t:ty),*) => {$(
        impl Summarize for $t {
            fn is_live(&self) -> bool {
                *self % 4 != 0
            }
            fn stamp(&self) -> u64 {
                *self as u64
            }
        }
    )*};
}
summarize_ints!(u8, u32, u64, usize, i32);

impl Summarize for Vec<u8> {
    fn is_live(&self) -> bool {
        !self.is_empty()
    }
    fn stamp(&self) -> u64 {
        self.len() as u64
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Checks every structural invariant of the tree and panics with a description if one fails:
/// node kinds hold a child count within their range, every inner node has two or more entries,
/// leaf keys agree with the path (prefixes and edge bytes) that leads to them, terminal keys end
/// exactly at their node, the stored length matches the number of leaves, and every inner node's
/// summary counts exactly the live and dead leaves below it with `max_stamp` an upper bound.
fn assert_invariants<V: Summarize>(art: &Art<V>) {
    let mut leaves = 0usize;
    let mut stack: Vec<(&Child<V>, Vec<u8>)> = Vec::new();
    if let Some(root) = &art.root {
        stack.push((root, Vec::new()));
    }
    while let Some((node, path)) = stack.pop() {
        let Some(h) = node.header() else {
            if let Child::Leaf(l) = node {
                assert!(l.key.as_slice().starts_with(&path), "leaf key off its path");
                leaves += 1;
            }
            continue;
        };
        let count = node.count();
        let (lo, hi) = match node {
            Child::N4(_) => (0, 4),
            Child::N16(_) => (super::SHRINK_16_TO_4 + 1, 16),
            Child::N48(_) => (super::SHRINK_48_TO_16 + 1, 48),
            Child::N256(_) => (super::SHRINK_256_TO_48 + 1, 256),
            Child::Leaf(_) => unreachable!(),
        };
        assert!(
            (lo..=hi).contains(&count),
            "node kind holds {count} children"
        );
        let entries = count + usize::from(h.terminal.is_some());
        assert!(entries >= 2, "inner node with {entries} entries");
        let mut sum = h
            .terminal
            .as_ref()
            .map(|t| t.value.summary())
            .unwrap_or_default();
        let mut from = 0u16;
        while let Some((b, c)) = node.next_from(from) {
            sum = sum.merge(c.summary());
            from = u16::from(b) + 1;
        }
        assert_eq!(
            (h.summary.live, h.summary.dead),
            (sum.live, sum.dead),
            "summary counts disagree with the children"
        );
        assert!(
            h.summary.max_stamp >= sum.max_stamp,
            "max_stamp below a child's"
        );
        let mut full = path.clone();
        full.extend_from_slice(h.prefix.as_slice());
        if let Some(t) = &h.terminal {
            assert_eq!(t.key.as_slice(), &full[..], "terminal key mismatch");
            leaves += 1;
        }
        let mut from = 0u16;
        while let Some((b, c)) = node.next_from(from) {
            let mut p = full.clone();
            p.push(b);
            stack.push((c, p));
            from = u16::from(b) + 1;
        }
    }
    assert_eq!(leaves, art.len(), "len disagrees with leaf count");
}

fn collect<V: Clone>(it: impl Iterator<Item = (impl AsRef<[u8]>, V)>) -> Vec<(Vec<u8>, V)> {
    it.map(|(k, v)| (k.as_ref().to_vec(), v)).collect()
}

fn art_entries(art: &Art<u32>) -> Vec<(Vec<u8>, u32)> {
    collect(art.iter().map(|(k, v)| (k, *v)))
}

fn model_entries(model: &BTreeMap<Vec<u8>, u32>) -> Vec<(Vec<u8>, u32)> {
    collect(model.iter().map(|(k, v)| (k, *v)))
}

type Model = BTreeMap<Vec<u8>, u32>;

/// Owned form of a listing, so art and model results compare directly.
#[derive(Debug, PartialEq, Eq, Clone)]
enum Item {
    Key(Vec<u8>, u32),
    Prefix(Vec<u8>),
}

fn owned(items: Vec<ListItem<'_, u32>>) -> Vec<Item> {
    items
        .into_iter()
        .map(|i| match i {
            ListItem::Key(k, v) => Item::Key(k.to_vec(), *v),
            ListItem::CommonPrefix(p) => Item::Prefix(p),
        })
        .collect()
}

/// Reference listing computed by scanning the model from `prefix`.
fn model_list(
    model: &BTreeMap<Vec<u8>, u32>,
    prefix: &[u8],
    start_after: Option<&[u8]>,
    delimiter: Option<u8>,
    limit: usize,
) -> Vec<Item> {
    let mut out = Vec::new();
    let mut last_group: Option<Vec<u8>> = None;
    for (k, v) in model.range(prefix.to_vec()..) {
        if out.len() >= limit || !k.starts_with(prefix) {
            break;
        }
        let group = delimiter
            .and_then(|d| k[prefix.len()..].iter().position(|&b| b == d))
            .map(|i| k[..prefix.len() + i + 1].to_vec());
        match group {
            Some(g) => {
                if last_group.as_ref() == Some(&g) {
                    continue;
                }
                last_group = Some(g.clone());
                if start_after.is_none_or(|sa| &g[..] > sa) {
                    out.push(Item::Prefix(g));
                }
            }
            None => {
                if start_after.is_none_or(|sa| &k[..] > sa) {
                    out.push(Item::Key(k.clone(), *v));
                }
            }
        }
    }
    out
}

fn lower_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Compares every read API of `art` against `model`.
fn assert_matches_model(art: &Art<u32>, model: &BTreeMap<Vec<u8>, u32>, q: &Query) {
    assert_eq!(art.len(), model.len());
    assert_eq!(art_entries(art), model_entries(model));
    let bound = lower_bound(&q.bound);
    let got = collect(art.range_from(bound).map(|(k, v)| (k, *v)));
    let want = collect(
        model
            .range::<[u8], _>((bound, Bound::Unbounded))
            .map(|(k, v)| (k, *v)),
    );
    assert_eq!(got, want, "range_from {:?}", q.bound);
    let got = collect(art.prefix_iter(&q.prefix).map(|(k, v)| (k, *v)));
    let want = collect(
        model
            .iter()
            .filter(|(k, _)| k.starts_with(&q.prefix))
            .map(|(k, v)| (k, *v)),
    );
    assert_eq!(got, want, "prefix_iter {:?}", q.prefix);
    let got = owned(art.list(&q.prefix, q.start_after.as_deref(), q.delimiter, q.limit));
    let want = model_list(
        model,
        &q.prefix,
        q.start_after.as_deref(),
        q.delimiter,
        q.limit,
    );
    assert_eq!(got, want, "list {q:?}");
    assert_filtered_reads_match_model(art, model, q);
    assert_invariants(art);
}

/// Stamp threshold used by the filtered-read checks (values are drawn from all of u32).
const STAMP_LIMIT: u64 = u32::MAX as u64 / 2;

/// Checks `last_below`, `list_iter_filtered` and `any_in_prefix` against the model.
fn assert_filtered_reads_match_model(art: &Art<u32>, model: &Model, q: &Query) {
    // Predecessor search.
    if let Bound::Included(b) | Bound::Excluded(b) = &q.bound {
        let got = art.last_below(b).map(|(k, v)| (k.to_vec(), *v));
        let want = model
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(&b[..])))
            .next_back()
            .map(|(k, v)| (k.clone(), *v));
        assert_eq!(got, want, "last_below {b:?}");
    }
    // A filtered listing equals the listing of the entries the filter keeps (leaves are judged
    // exactly; whole subtrees are skipped only when nothing in them is kept).
    let skip = |s: &Summary| s.live == 0 && s.max_stamp <= STAMP_LIMIT;
    let kept: Model = model
        .iter()
        .filter(|(_, v)| v.is_live() || u64::from(**v) > STAMP_LIMIT)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let got = owned(
        art.list_iter_filtered(&q.prefix, q.start_after.as_deref(), q.delimiter, &skip)
            .take(q.limit)
            .collect(),
    );
    let want = model_list(
        &kept,
        &q.prefix,
        q.start_after.as_deref(),
        q.delimiter,
        q.limit,
    );
    assert_eq!(got, want, "list_iter_filtered {q:?}");
    let got = collect(
        art.range_from_filtered(lower_bound(&q.bound), &skip)
            .map(|(k, v)| (k, *v)),
    );
    let want = collect(
        kept.range::<[u8], _>((lower_bound(&q.bound), Bound::Unbounded))
            .map(|(k, v)| (k, *v)),
    );
    assert_eq!(got, want, "range_from_filtered {:?}", q.bound);
    // Existence under a prefix: stable leaves (stamp <= limit) count when live; newer leaves
    // are asked about (here: odd values count).
    let classify = |s: &Summary| match (s.max_stamp <= STAMP_LIMIT, s.live > 0) {
        (true, true) => Verdict::Hit,
        (true, false) => Verdict::Skip,
        (false, _) => Verdict::Open,
    };
    let mut asked = 0usize;
    let got = art
        .any_in_prefix::<()>(&q.prefix, &classify, &mut |k, v| {
            assert!(k.starts_with(&q.prefix));
            asked += 1;
            Ok(v % 2 == 1)
        })
        .unwrap_or(false);
    let want = model.iter().any(|(k, v)| {
        k.starts_with(&q.prefix)
            && if u64::from(*v) <= STAMP_LIMIT {
                v.is_live()
            } else {
                v % 2 == 1
            }
    });
    assert_eq!(got, want, "any_in_prefix {:?}", q.prefix);
    let newer = model
        .iter()
        .filter(|(k, v)| k.starts_with(&q.prefix) && u64::from(**v) > STAMP_LIMIT)
        .count();
    assert!(asked <= newer, "asked about a leaf the summaries settle");
}

/// Small deterministic PRNG (xorshift64*) for the scale tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

// ---------------------------------------------------------------------------------------------
// Model-based property test

const COMPONENTS: [&str; 5] = ["a", "ab", "b", "run-1", "run-10"];

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    let path = (
        prop::collection::vec(prop::sample::select(COMPONENTS.to_vec()), 0..4),
        prop::sample::select(vec![b'/', 0u8]),
        any::<bool>(),
    )
        .prop_map(|(parts, sep, trailing)| {
            let mut k = parts
                .join(std::str::from_utf8(&[sep]).unwrap_or("/"))
                .into_bytes();
            if trailing {
                k.push(sep);
            }
            k
        });
    let raw = prop::collection::vec(
        prop_oneof![Just(0u8), Just(0xffu8), Just(b'a'), Just(b'/'), any::<u8>()],
        0..5,
    );
    prop_oneof![3 => path, 1 => raw]
}

#[derive(Debug, Clone)]
struct Query {
    bound: Bound<Vec<u8>>,
    prefix: Vec<u8>,
    start_after: Option<Vec<u8>>,
    delimiter: Option<u8>,
    limit: usize,
}

fn query_strategy() -> impl Strategy<Value = Query> {
    let bound = prop_oneof![
        key_strategy().prop_map(Bound::Included),
        key_strategy().prop_map(Bound::Excluded),
        Just(Bound::Unbounded),
    ];
    let prefix = prop_oneof![
        Just(Vec::new()),
        Just(b"a".to_vec()),
        Just(b"a/".to_vec()),
        Just(b"run-1".to_vec()),
        key_strategy(),
    ];
    (
        bound,
        prefix,
        prop::option::of(key_strategy()),
        prop::option::of(prop_oneof![Just(b'/'), Just(0u8), Just(b'-'), Just(0xffu8)]),
        prop_oneof![Just(usize::MAX), 0usize..6],
    )
        .prop_map(|(bound, prefix, start_after, delimiter, limit)| Query {
            bound,
            prefix,
            start_after,
            delimiter,
            limit,
        })
}

#[derive(Debug, Clone)]
enum Op {
    Insert(Vec<u8>, u32),
    Remove(Vec<u8>),
    Get(Vec<u8>),
    Snapshot,
    Check(Query),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (key_strategy(), any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => key_strategy().prop_map(Op::Remove),
        2 => key_strategy().prop_map(Op::Get),
        1 => Just(Op::Snapshot),
        2 => query_strategy().prop_map(Op::Check),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn art_behaves_like_btreemap_with_isolated_snapshots(
        ops in prop::collection::vec(op_strategy(), 1..160),
        final_query in query_strategy(),
    ) {
        let mut art: Art<u32> = Art::new();
        let mut model: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        let mut snapshots: Vec<(Art<u32>, Model)> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(k, v) => prop_assert_eq!(art.insert(&k, v), model.insert(k, v)),
                Op::Remove(k) => prop_assert_eq!(art.remove(&k), model.remove(&k)),
                Op::Get(k) => prop_assert_eq!(art.get(&k), model.get(&k)),
                Op::Snapshot => snapshots.push((art.clone(), model.clone())),
                Op::Check(q) => assert_matches_model(&art, &model, &q),
            }
            prop_assert_eq!(art.len(), model.len());
        }
        assert_matches_model(&art, &model, &final_query);
        for (snap, snap_model) in &snapshots {
            assert_matches_model(snap, snap_model, &final_query);
        }
        // Dropping the live tree must leave every snapshot intact.
        drop(art);
        for (snap, snap_model) in &snapshots {
            prop_assert_eq!(art_entries(snap), model_entries(snap_model));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Basics and edge keys

#[test]
fn empty_tree_has_no_entries() {
    let art: Art<u32> = Art::new();
    assert!(art.is_empty());
    assert_eq!(art.get(b""), None);
    assert_eq!(art.iter().count(), 0);
    assert_eq!(art.range_from(Bound::Included(b"a")).count(), 0);
    assert_eq!(art.prefix_iter(b"").count(), 0);
    assert!(art.list(b"", None, Some(b'/'), 10).is_empty());
    assert_eq!(art.node_stats(), NodeStats::default());
    assert_eq!(art.heap_bytes(), 0);
}

#[test]
fn insert_returns_previous_value_and_remove_returns_stored_value() {
    let mut art = Art::new();
    assert_eq!(art.insert(b"k", 1), None);
    assert_eq!(art.insert(b"k", 2), Some(1));
    assert_eq!(art.len(), 1);
    assert_eq!(art.get(b"k"), Some(&2));
    assert_eq!(art.remove(b"missing"), None);
    assert_eq!(art.remove(b"k"), Some(2));
    assert_eq!(art.remove(b"k"), None);
    assert!(art.is_empty());
}

#[test]
fn empty_key_is_stored_like_any_other_key() {
    let mut art = Art::new();
    art.insert(b"", 0);
    assert_eq!(art.get(b""), Some(&0));
    art.insert(b"a", 1);
    art.insert(b"b", 2);
    assert_eq!(art.get(b""), Some(&0));
    assert_eq!(art.node_stats().terminals, 1);
    assert_eq!(
        art_entries(&art),
        vec![(b"".to_vec(), 0), (b"a".to_vec(), 1), (b"b".to_vec(), 2)]
    );
    assert_eq!(art.remove(b""), Some(0));
    assert_eq!(art.get(b""), None);
    assert_eq!(art.len(), 2);
    assert_invariants(&art);
}

#[test]
fn keys_that_are_prefixes_of_other_keys_use_terminal_slots() {
    let mut art = Art::new();
    let keys: [&[u8]; 6] = [b"abc", b"a", b"ab", b"abcd", b"", b"abd"];
    for (i, k) in keys.iter().enumerate() {
        art.insert(k, i as u32);
        assert_invariants(&art);
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(art.get(k), Some(&(i as u32)));
    }
    assert_eq!(art.get(b"abcde"), None);
    assert_eq!(art.get(b"ac"), None);
    let order: Vec<Vec<u8>> = art.iter().map(|(k, _)| k.to_vec()).collect();
    let mut sorted: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
    sorted.sort();
    assert_eq!(order, sorted);
    // Remove the shorter keys first: terminals empty out and nodes collapse into leaves.
    for k in [&b"a"[..], b"", b"ab", b"abc"] {
        assert!(art.remove(k).is_some());
        assert_invariants(&art);
    }
    assert_eq!(
        art_entries(&art),
        vec![(b"abcd".to_vec(), 3), (b"abd".to_vec(), 5)]
    );
}

#[test]
fn bytes_0x00_and_0xff_sort_and_compare_as_plain_bytes() {
    let mut art = Art::new();
    let keys: [&[u8]; 8] = [
        b"\xff",
        b"\x00",
        b"\x00\x00",
        b"\xff\xff",
        b"a\x00b",
        b"a\xffb",
        b"a",
        b"\x00\xff",
    ];
    for (i, k) in keys.iter().enumerate() {
        art.insert(k, i as u32);
    }
    let mut sorted: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
    sorted.sort();
    let got: Vec<Vec<u8>> = art.iter().map(|(k, _)| k.to_vec()).collect();
    assert_eq!(got, sorted);
    let after: Vec<Vec<u8>> = art
        .range_from(Bound::Excluded(b"\xff"))
        .map(|(k, _)| k.to_vec())
        .collect();
    assert_eq!(after, vec![b"\xff\xff".to_vec()]);
    assert_eq!(
        owned(art.list(b"", None, Some(0xff), 100)),
        vec![
            Item::Key(b"\x00".to_vec(), 1),
            Item::Key(b"\x00\x00".to_vec(), 2),
            Item::Prefix(b"\x00\xff".to_vec()),
            Item::Key(b"a".to_vec(), 6),
            Item::Key(b"a\x00b".to_vec(), 4),
            Item::Prefix(b"a\xff".to_vec()),
            Item::Prefix(b"\xff".to_vec()),
        ]
    );
    assert_invariants(&art);
}

#[test]
fn long_keys_with_long_shared_prefixes_and_large_values_round_trip() {
    let mut art: Art<Vec<u8>> = Art::new();
    let base = vec![b'x'; 4096];
    let mut keys = Vec::new();
    for i in 0..64u32 {
        let mut k = base.clone();
        // Diverge at different depths, some deep inside the shared 4 KiB prefix.
        let at = (i as usize * 61) % 4000;
        k[at] = b'y';
        k.extend_from_slice(&i.to_be_bytes());
        keys.push(k);
    }
    keys.push(base.clone());
    let mut max_key = vec![7u8; 64 * 1024];
    max_key[0] = b'x';
    keys.push(max_key);
    for (i, k) in keys.iter().enumerate() {
        art.insert(k, vec![i as u8; 64 * 1024]);
    }
    assert_eq!(art.len(), keys.len());
    for (i, k) in keys.iter().enumerate() {
        let v = art.get(k).map(|v| (v.len(), v[0]));
        assert_eq!(v, Some((64 * 1024, i as u8)));
    }
    let mut sorted = keys.clone();
    sorted.sort();
    let got: Vec<Vec<u8>> = art.iter().map(|(k, _)| k.to_vec()).collect();
    assert_eq!(got, sorted);
    assert_invariants(&art);
    let snap = art.clone();
    for k in &keys {
        assert!(art.remove(k).is_some());
    }
    assert!(art.is_empty());
    assert_eq!(snap.len(), keys.len());
    assert_invariants(&snap);
}

#[test]
fn deeply_nested_keys_do_not_recurse_on_the_stack() {
    // 3000 keys "a", "aa", "aaa", ... form a 3000-deep chain of inner nodes. Every operation and
    // the drop run on a 256 KiB thread stack, which recursion over the depth would overflow.
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let mut art = Art::new();
            for n in 1..=3000usize {
                art.insert(&vec![b'a'; n], n);
            }
            let snap = art.clone();
            let stats = art.node_stats();
            assert!(stats.max_depth >= 3000, "depth {}", stats.max_depth);
            assert_eq!(art.get(&[b'a'; 3000]), Some(&3000));
            assert_eq!(art.iter().count(), 3000);
            assert_eq!(art.remove(&[b'a'; 1500]), Some(1500));
            assert_eq!(art.list(b"", None, Some(b'a'), 10).len(), 1);
            drop(art);
            assert_eq!(snap.len(), 3000);
            drop(snap);
            true
        });
    assert!(matches!(handle.map(|h| h.join()), Ok(Ok(true))));
}

// ---------------------------------------------------------------------------------------------
// Node kinds

fn expected_kind_growing(children: usize) -> NodeStats {
    let mut s = NodeStats {
        leaves: children,
        ..NodeStats::default()
    };
    match children {
        0 | 1 => {}
        2..=4 => s.node4 = 1,
        5..=16 => s.node16 = 1,
        17..=48 => s.node48 = 1,
        _ => s.node256 = 1,
    }
    s.max_depth = match children {
        0 => 0,
        1 => 1,
        _ => 2,
    };
    s
}

#[test]
fn nodes_grow_4_16_48_256_and_shrink_back_with_hysteresis() {
    let mut art = Art::new();
    let key = |b: u8| vec![b'p', b'/', b];
    for b in 0..=255u8 {
        art.insert(&key(b), u32::from(b));
        let n = usize::from(b) + 1;
        assert_eq!(
            art.node_stats(),
            expected_kind_growing(n),
            "after {n} inserts"
        );
    }
    assert_invariants(&art);
    // Shrinking uses lower thresholds than growing.
    for b in (0..=255u8).rev() {
        assert_eq!(art.remove(&key(b)), Some(u32::from(b)));
        let n = usize::from(b);
        let stats = art.node_stats();
        let kinds = (stats.node4, stats.node16, stats.node48, stats.node256);
        let want = match n {
            0 | 1 => (0, 0, 0, 0),
            2..=3 => (1, 0, 0, 0),
            4..=12 => (0, 1, 0, 0),
            13..=37 => (0, 0, 1, 0),
            _ => (0, 0, 0, 1),
        };
        assert_eq!(kinds, want, "after removal down to {n}");
        assert_eq!(stats.leaves, n);
        assert_invariants(&art);
    }
    assert!(art.is_empty());
}

#[test]
fn removing_down_to_one_child_merges_prefixes() {
    let mut art = Art::new();
    art.insert(b"shared/a/one", 1);
    art.insert(b"shared/a/two", 2);
    art.insert(b"shared/b", 3);
    assert_eq!(art.node_stats().node4, 2);
    art.remove(b"shared/b");
    let stats = art.node_stats();
    assert_eq!((stats.node4, stats.leaves, stats.max_depth), (1, 2, 2));
    assert_eq!(art.get(b"shared/a/one"), Some(&1));
    assert_eq!(art.get(b"shared/a/two"), Some(&2));
    assert_eq!(art.get(b"shared/b"), None);
    assert_invariants(&art);
}

#[test]
fn heap_bytes_grows_with_content_and_counts_long_keys() {
    let mut art = Art::new();
    art.insert(b"short", 1u64);
    let one = art.heap_bytes();
    assert!(one > 0);
    art.insert(&[b'z'; 1000], 2);
    assert!(art.heap_bytes() >= one + 1000);
}

// ---------------------------------------------------------------------------------------------
// Snapshots

#[test]
fn clone_is_a_snapshot_unaffected_by_later_writes() {
    let mut art = Art::new();
    for i in 0..1000u32 {
        art.insert(format!("dir/{i:04}").as_bytes(), i);
    }
    let snap = art.clone();
    let before = art_entries(&snap);
    for i in 0..1000u32 {
        if i % 3 == 0 {
            art.remove(format!("dir/{i:04}").as_bytes());
        } else {
            art.insert(format!("dir/{i:04}").as_bytes(), i + 1);
        }
        art.insert(format!("dir/{i:04}/sub").as_bytes(), i);
    }
    assert_eq!(art_entries(&snap), before);
    assert_eq!(snap.get(b"dir/0003"), Some(&3));
    assert_eq!(art.get(b"dir/0003"), None);
    assert_eq!(art.get(b"dir/0004"), Some(&5));
    assert_invariants(&snap);
    assert_invariants(&art);
}

#[test]
fn writes_to_a_clone_do_not_leak_into_the_original() {
    let mut art = Art::new();
    art.insert(b"a/1", 1);
    art.insert(b"a/2", 2);
    let mut fork = art.clone();
    fork.insert(b"a/1", 10);
    fork.insert(b"a/3", 3);
    fork.remove(b"a/2");
    assert_eq!(
        art_entries(&art),
        vec![(b"a/1".to_vec(), 1), (b"a/2".to_vec(), 2)]
    );
    assert_eq!(
        art_entries(&fork),
        vec![(b"a/1".to_vec(), 10), (b"a/3".to_vec(), 3)]
    );
}

#[test]
fn snapshot_can_be_read_from_another_thread_while_writer_continues() {
    let mut art = Art::new();
    for i in 0..10_000u32 {
        art.insert(format!("k/{i:05}").as_bytes(), i);
    }
    let snap = art.clone();
    let reader = std::thread::spawn(move || {
        (0..10_000u32).all(|i| snap.get(format!("k/{i:05}").as_bytes()) == Some(&i))
    });
    for i in 0..10_000u32 {
        art.remove(format!("k/{i:05}").as_bytes());
    }
    assert!(art.is_empty());
    assert!(matches!(reader.join(), Ok(true)));
}

// ---------------------------------------------------------------------------------------------
// Listing

fn sample_tree() -> Art<u32> {
    let mut art = Art::new();
    for (i, k) in [
        "a", "a/", "a/b", "a/b/c", "a/b/d", "a/c", "a/d/e", "a/d/f/g", "a0", "b/x",
    ]
    .iter()
    .enumerate()
    {
        art.insert(k.as_bytes(), i as u32);
    }
    art
}

#[test]
fn list_rolls_groups_into_common_prefixes() {
    let art = sample_tree();
    assert_eq!(
        owned(art.list(b"a/", None, Some(b'/'), 100)),
        vec![
            Item::Key(b"a/".to_vec(), 1),
            Item::Key(b"a/b".to_vec(), 2),
            Item::Prefix(b"a/b/".to_vec()),
            Item::Key(b"a/c".to_vec(), 5),
            Item::Prefix(b"a/d/".to_vec()),
        ]
    );
    assert_eq!(
        owned(art.list(b"", None, Some(b'/'), 100)),
        vec![
            Item::Key(b"a".to_vec(), 0),
            Item::Prefix(b"a/".to_vec()),
            Item::Key(b"a0".to_vec(), 8),
            Item::Prefix(b"b/".to_vec()),
        ]
    );
}

#[test]
fn list_without_delimiter_returns_every_key_under_prefix() {
    let art = sample_tree();
    let got: Vec<Item> = owned(art.list(b"a/d", None, None, 100));
    assert_eq!(
        got,
        vec![
            Item::Key(b"a/d/e".to_vec(), 6),
            Item::Key(b"a/d/f/g".to_vec(), 7)
        ]
    );
}

#[test]
fn list_continuation_after_common_prefix_skips_that_group() {
    let art = sample_tree();
    let page1 = owned(art.list(b"a/", None, Some(b'/'), 3));
    assert_eq!(page1.len(), 3);
    assert_eq!(page1[2], Item::Prefix(b"a/b/".to_vec()));
    let page2 = owned(art.list(b"a/", Some(b"a/b/"), Some(b'/'), 3));
    assert_eq!(
        page2,
        vec![
            Item::Key(b"a/c".to_vec(), 5),
            Item::Prefix(b"a/d/".to_vec())
        ]
    );
    // start_after inside a group: the group's common prefix sorts before it and is not repeated.
    let page3 = owned(art.list(b"a/", Some(b"a/b/c"), Some(b'/'), 10));
    assert_eq!(
        page3,
        vec![
            Item::Key(b"a/c".to_vec(), 5),
            Item::Prefix(b"a/d/".to_vec())
        ]
    );
    // start_after before the prefix starts at the prefix.
    assert_eq!(
        owned(art.list(b"a/", Some(b"0"), Some(b'/'), 1)),
        vec![Item::Key(b"a/".to_vec(), 1)]
    );
    // limit 0 emits nothing.
    assert!(art.list(b"a/", None, Some(b'/'), 0).is_empty());
}

#[test]
fn list_iter_is_lazy_and_matches_list() {
    let art = sample_tree();
    let lazy: Vec<Item> = owned(art.list_iter(b"", None, Some(b'/')).take(2).collect());
    assert_eq!(lazy, owned(art.list(b"", None, Some(b'/'), 2)));
}

#[test]
fn delimiter_listing_skips_subtrees_instead_of_scanning_them() {
    let mut art = Art::new();
    for n in 0..100_000u32 {
        let key = format!("d/{}/{:05}/x/{}", n % 8, n, n % 3);
        art.insert(key.as_bytes(), n);
    }
    assert_eq!(art.len(), 100_000);
    let depth = art.node_stats().max_depth;
    let mut it = art.list_iter(b"d/", None, Some(b'/'));
    let items: Vec<Item> = owned(it.by_ref().collect());
    let want: Vec<Item> = (0..8)
        .map(|g| Item::Prefix(format!("d/{g}/").into_bytes()))
        .collect();
    assert_eq!(items, want);
    let visited = it.nodes_visited();
    assert!(
        visited <= 8 * depth + depth,
        "visited {visited} nodes for 8 groups at depth {depth}"
    );
    assert!(visited < 200, "visited {visited}");

    // One level down: 12,500 groups, work proportional to the groups emitted.
    let mut it = art.list_iter(b"d/3/", None, Some(b'/'));
    let count = it.by_ref().count();
    assert_eq!(count, 12_500);
    assert!(
        it.nodes_visited() <= 4 * count,
        "visited {}",
        it.nodes_visited()
    );

    // Paging by continuation token.
    let page = owned(art.list(b"d/", Some(b"d/3/"), Some(b'/'), 2));
    assert_eq!(
        page,
        vec![
            Item::Prefix(b"d/4/".to_vec()),
            Item::Prefix(b"d/5/".to_vec())
        ]
    );
}

#[test]
fn range_from_seeks_with_included_and_excluded_bounds() {
    let art = sample_tree();
    let keys = |b: Bound<&[u8]>| -> Vec<Vec<u8>> {
        art.range_from(b).map(|(k, _)| k.to_vec()).take(3).collect()
    };
    assert_eq!(
        keys(Bound::Included(b"a/b")),
        vec![b"a/b".to_vec(), b"a/b/c".to_vec(), b"a/b/d".to_vec()]
    );
    assert_eq!(
        keys(Bound::Excluded(b"a/b")),
        vec![b"a/b/c".to_vec(), b"a/b/d".to_vec(), b"a/c".to_vec()]
    );
    assert_eq!(
        keys(Bound::Included(b"a/bz")),
        vec![b"a/c".to_vec(), b"a/d/e".to_vec(), b"a/d/f/g".to_vec()]
    );
    assert_eq!(keys(Bound::Excluded(b"b/x")), Vec::<Vec<u8>>::new());
    assert_eq!(
        keys(Bound::Included(b"")),
        vec![b"a".to_vec(), b"a/".to_vec(), b"a/b".to_vec()]
    );
    let mut it = art.range_from(Bound::Included(b"a/d/f"));
    assert_eq!(
        it.next().map(|(k, _)| k.to_vec()),
        Some(b"a/d/f/g".to_vec())
    );
    assert!(it.nodes_visited() < 8);
}

// ---------------------------------------------------------------------------------------------
// Scale

#[test]
fn three_hundred_thousand_sequential_keys_are_stored_ordered_and_removable() {
    let key = |i: u32| format!("sync/{i:09}");
    let mut art: Art<u8> = Art::new();
    for i in 0..300_000u32 {
        assert_eq!(
            art.insert(key(i).as_bytes(), (i % 251) as u8),
            None,
            "insert {i}"
        );
    }
    assert_eq!(art.len(), 300_000);
    for i in 0..300_000u32 {
        assert_eq!(
            art.get(key(i).as_bytes()),
            Some(&((i % 251) as u8)),
            "get {i}"
        );
    }
    let mut expected = 0u32;
    for (k, _) in art.iter() {
        assert_eq!(k, key(expected).as_bytes());
        expected += 1;
    }
    assert_eq!(expected, 300_000);
    assert_eq!(art.node_stats().leaves, 300_000);
    for i in (0..300_000u32).step_by(2) {
        assert!(art.remove(key(i).as_bytes()).is_some(), "remove {i}");
    }
    assert_eq!(art.len(), 150_000);
    assert_eq!(art.get(key(262_144).as_bytes()), None);
    assert_eq!(
        art.get(key(262_143).as_bytes()),
        Some(&((262_143u32 % 251) as u8))
    );
    assert_invariants(&art);
    for i in (1..300_000u32).step_by(2) {
        assert!(art.remove(key(i).as_bytes()).is_some(), "remove {i}");
    }
    assert!(art.is_empty());
    assert_eq!(art.node_stats(), NodeStats::default());
}

#[test]
fn three_hundred_thousand_random_keys_are_stored_ordered_and_removable() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut keys: Vec<[u8; 24]> = (0..300_000)
        .map(|_| {
            let mut k = [0u8; 24];
            for chunk in k.chunks_mut(8) {
                chunk.copy_from_slice(&rng.next().to_le_bytes());
            }
            k
        })
        .collect();
    let mut art = Art::new();
    for (i, k) in keys.iter().enumerate() {
        art.insert(k, i as u32);
    }
    assert_eq!(art.len(), keys.len());
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(art.get(k), Some(&(i as u32)));
    }
    let snap = art.clone();
    keys.sort();
    let got: Vec<&[u8]> = art.iter().map(|(k, _)| k).collect();
    assert!(got.iter().zip(&keys).all(|(a, b)| *a == &b[..]));
    assert_eq!(got.len(), keys.len());
    assert_invariants(&art);
    for k in &keys {
        assert!(art.remove(k).is_some());
    }
    assert!(art.is_empty());
    assert_eq!(snap.len(), keys.len());
    assert_eq!(snap.iter().count(), keys.len());
}

#[test]
fn art_is_send_and_sync_for_send_sync_values() {
    fn assert_send_sync<T: Send + Sync>(_: &T) -> bool {
        true
    }
    let art: Art<u32> = Art::new();
    assert!(assert_send_sync(&art));
    assert!(assert_send_sync(&art.iter()));
}

#[test]
fn common_prefix_len_counts_matching_leading_bytes() {
    assert_eq!(common_prefix_len(b"abc", b"abd"), 2);
    assert_eq!(common_prefix_len(b"", b"abd"), 0);
    assert_eq!(common_prefix_len(b"ab", b"ab"), 2);
}

// ---------------------------------------------------------------------------------------------
// Timing (run by hand: `cargo test --release -- --ignored --nocapture timing`)

#[test]
#[ignore = "timing report, not a correctness test"]
fn timing_one_million_path_shaped_keys() {
    use std::time::Instant;
    let n = 1_000_000u32;
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            format!(
                "ws/{:03}/runs/run-{:05}/artifacts/file-{:04}.json",
                i % 97,
                i / 1000,
                i % 1000
            )
            .into_bytes()
        })
        .collect();
    let mut art: Art<u64> = Art::new();
    let rss_before = resident_bytes();
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        art.insert(k, i as u64);
    }
    let insert = t.elapsed();
    let rss_after = resident_bytes();
    let t = Instant::now();
    let mut found = 0usize;
    for k in &keys {
        found += usize::from(art.get(k).is_some());
    }
    let get = t.elapsed();
    let t = Instant::now();
    let mut rng = Rng(42);
    for _ in 0..n {
        let k = &keys[(rng.next() % u64::from(n)) as usize];
        found += usize::from(art.get(k).is_some());
    }
    let get_random = t.elapsed();
    let t = Instant::now();
    let iterated = art.iter().count();
    let iter = t.elapsed();
    let snap = art.clone();
    let t = Instant::now();
    for (i, k) in keys.iter().enumerate().take(100_000) {
        art.insert(k, i as u64 + 1);
    }
    let cow = t.elapsed();
    let t = Instant::now();
    let listed = art.list(b"ws/042/runs/", None, Some(b'/'), 10_000).len();
    let list = t.elapsed();
    let stats = art.node_stats();
    let heap = snap.heap_bytes();
    let key_bytes: usize = keys.iter().map(Vec::len).sum();
    println!(
        "n={n} insert {:.0} ns/op, get (insertion order) {:.0} ns/op, get (random order) {:.0} ns/op, iter {:.1} ns/key, \
         insert-after-snapshot {:.0} ns/op, list {listed} groups in {:?}",
        insert.as_nanos() as f64 / f64::from(n),
        get.as_nanos() as f64 / f64::from(n),
        get_random.as_nanos() as f64 / f64::from(n),
        iter.as_nanos() as f64 / iterated as f64,
        cow.as_nanos() as f64 / 100_000.0,
        list,
    );
    println!(
        "heap {} bytes = {:.1} bytes/key (avg key {:.1} bytes, value 8 bytes); {stats:?}",
        heap,
        heap as f64 / f64::from(n),
        key_bytes as f64 / f64::from(n),
    );
    if let (Some(a), Some(b)) = (rss_before, rss_after) {
        println!(
            "resident set grew {} bytes = {:.1} bytes/key (includes allocator overhead)",
            b.saturating_sub(a),
            b.saturating_sub(a) as f64 / f64::from(n)
        );
    }
    assert_eq!(found, 2 * keys.len());
    // Baseline on the same machine: std BTreeMap, same keys, random order.
    let btree: BTreeMap<&[u8], u64> = keys.iter().map(|k| (&k[..], 0)).collect();
    let t = Instant::now();
    let mut rng = Rng(42);
    let mut hits = 0usize;
    for _ in 0..n {
        let k = &keys[(rng.next() % u64::from(n)) as usize];
        hits += usize::from(btree.contains_key(&k[..]));
    }
    println!(
        "baseline BTreeMap get (random order) {:.0} ns/op",
        t.elapsed().as_nanos() as f64 / f64::from(n)
    );
    assert_eq!(hits, keys.len());
    drop(btree);
    drop((art, snap, keys));

    // Short keys (stored inline in the leaf) with 1-byte values.
    let mut short: Art<u8> = Art::new();
    let t = Instant::now();
    for i in 0..n {
        short.insert(format!("sync/{i:09}").as_bytes(), 1);
    }
    let insert = t.elapsed();
    println!(
        "sync/NNNNNNNNN x{n}: insert {:.0} ns/op, heap {:.1} bytes/key; {:?}",
        insert.as_nanos() as f64 / f64::from(n),
        short.heap_bytes() as f64 / f64::from(n),
        short.node_stats()
    );
}

/// Resident set size from /proc (Linux), for the timing report only.
fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Wide fan-out keys drive nodes through every kind (grow and shrink) while snapshots share
    /// them, so copy-on-write of Node48/Node256 and their conversions are covered.
    #[test]
    fn wide_fanout_grow_shrink_matches_btreemap_under_snapshots(
        ops in prop::collection::vec(
            (any::<bool>(), prop::sample::select(vec![&b""[..], b"p", b"p/q"]), any::<u8>(),
             prop::option::of(any::<u8>())),
            1..600,
        ),
    ) {
        let mut art: Art<u32> = Art::new();
        let mut model: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        let mut snapshots = Vec::new();
        for (i, (insert, base, b1, b2)) in ops.into_iter().enumerate() {
            let mut k = base.to_vec();
            k.push(b1);
            k.extend(b2);
            if insert {
                prop_assert_eq!(art.insert(&k, i as u32), model.insert(k, i as u32));
            } else {
                prop_assert_eq!(art.remove(&k), model.remove(&k));
            }
            if i % 97 == 0 {
                snapshots.push((art.clone(), model.clone()));
            }
        }
        assert_invariants(&art);
        prop_assert_eq!(art_entries(&art), model_entries(&model));
        for (snap, snap_model) in &snapshots {
            assert_invariants(snap);
            prop_assert_eq!(art_entries(snap), model_entries(snap_model));
        }
    }
}

#[test]
fn summaries_let_a_filtered_listing_skip_a_tombstone_only_group_in_constant_work() {
    // 20,000 dead keys (values divisible by 4) under "dead/", a few live ones around them.
    let mut art: Art<u32> = Art::new();
    for i in 0..20_000u32 {
        art.insert(format!("dead/{i:06}").as_bytes(), i * 4);
    }
    art.insert(b"a/live", 1);
    art.insert(b"z/live", 2);
    assert_eq!(art.summary().dead, 20_000);
    assert_eq!(art.summary().live, 2);
    let skip = |s: &Summary| s.live == 0;
    let mut it = art.list_iter_filtered(b"", None, Some(b'/'), &skip);
    let got: Vec<Item> = owned(it.by_ref().collect());
    assert_eq!(
        got,
        vec![Item::Prefix(b"a/".to_vec()), Item::Prefix(b"z/".to_vec())]
    );
    assert!(
        it.nodes_visited() < 20,
        "visited {} nodes",
        it.nodes_visited()
    );
    // Existence check on the dead group settles at its root.
    let mut asked = 0;
    let classify = |s: &Summary| {
        if s.live > 0 {
            Verdict::Hit
        } else {
            Verdict::Skip
        }
    };
    let found = art
        .any_in_prefix::<()>(b"dead/", &classify, &mut |_, _| {
            asked += 1;
            Ok(true)
        })
        .unwrap_or(true);
    assert!(!found);
    assert_eq!(asked, 0);
    // Turning one key live again makes the group visible, and the counts follow.
    art.insert(b"dead/000123", 5);
    assert_eq!(art.summary().live, 3);
    let got = owned(
        art.list_iter_filtered(b"", None, Some(b'/'), &skip)
            .collect(),
    );
    assert_eq!(got.len(), 3);
    assert_invariants(&art);
}

#[test]
fn last_below_finds_predecessors_across_terminals_and_node_kinds() {
    let mut art: Art<u32> = Art::new();
    assert_eq!(art.last_below(b"x"), None);
    for (i, k) in [&b"a"[..], b"ab", b"abc", b"b", b"b\x00", b"c"]
        .iter()
        .enumerate()
    {
        art.insert(k, i as u32 + 1);
    }
    for b in 0..=255u8 {
        art.insert(&[b'm', b], u32::from(b) + 100);
    }
    let below = |b: &[u8]| art.last_below(b).map(|(k, _)| k.to_vec());
    assert_eq!(below(b""), None);
    assert_eq!(below(b"a"), None);
    assert_eq!(below(b"ab"), Some(b"a".to_vec()));
    assert_eq!(below(b"abb"), Some(b"ab".to_vec()));
    assert_eq!(below(b"abd"), Some(b"abc".to_vec()));
    assert_eq!(below(b"b"), Some(b"abc".to_vec()));
    assert_eq!(below(b"b\x00"), Some(b"b".to_vec()));
    assert_eq!(below(b"b\x01"), Some(b"b\x00".to_vec()));
    assert_eq!(below(b"m"), Some(b"c".to_vec()));
    assert_eq!(below(b"m\x80"), Some(vec![b'm', 0x7f]));
    assert_eq!(below(b"n"), Some(vec![b'm', 0xff]));
    assert_eq!(below(&[0xff; 8]), Some(vec![b'm', 0xff]));
}
