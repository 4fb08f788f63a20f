//! Property test: random batches over three trees checked against a BTreeMap model at every
//! version, including `view_at` at random retained versions, delimiter ranges, history floors,
//! flushes and checkpoints in the middle of the sequence (so reads merge the in-memory delta
//! with one or several images) and reopen.

use std::collections::BTreeMap;

use holt::{Batch, Db, Durability, Entry, Error, Expect, Options, RangeSpec, Tree};
use proptest::prelude::*;

const KEYS: &[&[u8]] = &[
    b"", b"a", b"a/", b"a/b", b"a/b/c", b"ab", b"b", b"b/c", b"\x00", b"\xff", b"\xff/",
];
const PREFIXES: &[&[u8]] = &[b"", b"a", b"a/", b"b", b"\xff"];
/// (name, tag, versioned)
const TREES: &[(&str, u8, bool)] = &[
    ("alpha", 0x01, true),
    ("beta", 0x02, false),
    ("gamma", 0x17, true),
];

type Snapshot = [BTreeMap<Vec<u8>, Vec<u8>>; 3];

#[derive(Clone, Debug)]
enum Op {
    Put(usize, usize, usize),
    Delete(usize, usize),
    Expect(usize, usize, u8),
}

#[derive(Clone, Debug)]
enum Action {
    Commit {
        ops: Vec<Op>,
        expect_version: Option<bool>,
    },
    Reopen,
    Floor(u8),
    Checkpoint,
    /// Writes the delta as a new image above the others (several images build up).
    Flush,
    Check {
        ver_pct: u8,
        tree: usize,
        prefix: usize,
        after: Option<usize>,
        delim: bool,
        limit: Option<usize>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..KEYS.len(), 0..3usize).prop_map(|(t, k, v)| Op::Put(t, k, v)),
        2 => (0..3usize, 0..KEYS.len()).prop_map(|(t, k)| Op::Delete(t, k)),
        1 => (0..3usize, 0..KEYS.len(), 0..5u8).prop_map(|(t, k, e)| Op::Expect(t, k, e)),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        8 => (prop::collection::vec(op(), 0..6), prop::option::of(any::<bool>()))
            .prop_map(|(ops, expect_version)| Action::Commit { ops, expect_version }),
        1 => Just(Action::Reopen),
        1 => any::<u8>().prop_map(Action::Floor),
        1 => Just(Action::Checkpoint),
        2 => Just(Action::Flush),
        3 => (
            any::<u8>(),
            0..3usize,
            0..PREFIXES.len(),
            prop::option::of(0..KEYS.len()),
            any::<bool>(),
            prop::option::of(0..5usize)
        )
            .prop_map(|(ver_pct, tree, prefix, after, delim, limit)| Action::Check {
                ver_pct, tree, prefix, after, delim, limit
            }),
    ]
}

fn value(v: usize) -> Vec<u8> {
    vec![b'v'; v]
}

fn expect_of(e: u8) -> Expect {
    match e {
        0 => Expect::Absent,
        1 => Expect::Present,
        n => Expect::Equals(value(usize::from(n) - 2)),
    }
}

fn model_range(map: &BTreeMap<Vec<u8>, Vec<u8>>, spec: &RangeSpec) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for (k, v) in map {
        if !k.starts_with(&spec.prefix) {
            continue;
        }
        let split = spec
            .delimiter
            .and_then(|d| k[spec.prefix.len()..].iter().position(|&b| b == d));
        let e = match split {
            Some(i) => Entry::CommonPrefix(k[..spec.prefix.len() + i + 1].to_vec()),
            None => Entry::Key {
                key: k.clone(),
                value: v.clone(),
            },
        };
        if out.last() == Some(&e) {
            continue;
        }
        out.push(e);
    }
    out.retain(|e| {
        let bytes = match e {
            Entry::Key { key, .. } => key,
            Entry::CommonPrefix(p) => p,
        };
        spec.start_after.as_ref().is_none_or(|sa| bytes > sa)
    });
    out.truncate(spec.limit.unwrap_or(usize::MAX));
    out
}

struct Harness {
    dir: tempfile::TempDir,
    db: Option<Db>,
    trees: Vec<Tree>,
    model: Vec<Snapshot>,
    floor: u64,
}

fn options() -> Options {
    Options {
        durability: Durability::Buffered,
        checkpoint_wal_bytes: 1500,
        ..Options::default()
    }
}

impl Harness {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options()).unwrap();
        let trees = TREES
            .iter()
            .map(|(n, t, v)| db.create_tree(n, *t, *v).unwrap())
            .collect();
        Harness {
            dir,
            db: Some(db),
            trees,
            model: vec![Default::default()],
            floor: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }

    fn reopen(&mut self) {
        self.db = None;
        let db = Db::open(self.dir.path(), options()).unwrap();
        self.trees = TREES.iter().map(|(n, _, _)| db.tree(n).unwrap()).collect();
        self.db = Some(db);
    }

    fn current(&self) -> &Snapshot {
        self.model.last().unwrap()
    }

    fn commit(&mut self, ops: &[Op], expect_version: Option<bool>) -> Result<(), TestCaseError> {
        let cur_version = (self.model.len() - 1) as u64;
        let mut batch = Batch::new();
        let ev = expect_version.map(|ok| if ok { cur_version } else { cur_version + 1 });
        if let Some(v) = ev {
            batch.expect_version(v);
        }
        for op in ops {
            match op {
                Op::Put(t, k, v) => batch.put(&self.trees[*t], KEYS[*k], value(*v)),
                Op::Delete(t, k) => batch.delete(&self.trees[*t], KEYS[*k]),
                Op::Expect(t, k, e) => batch.expect(&self.trees[*t], KEYS[*k], expect_of(*e)),
            }
        }
        let res = self.db().commit(batch);
        if ops.is_empty() && ev.is_none() {
            prop_assert!(matches!(res, Err(Error::InvalidArgument(_))));
            return Ok(());
        }
        if ev.is_some_and(|v| v != cur_version) {
            prop_assert!(matches!(res, Err(Error::VersionMismatch { .. })), "{res:?}");
            return Ok(());
        }
        let cur = self.current();
        let failing = ops.iter().find(|op| match op {
            Op::Expect(t, k, e) => !match (expect_of(*e), cur[*t].get(KEYS[*k])) {
                (Expect::Absent, None) | (Expect::Present, Some(_)) => true,
                (Expect::Equals(want), Some(have)) => &want == have,
                _ => false,
            },
            _ => false,
        });
        if failing.is_some() {
            prop_assert!(matches!(res, Err(Error::PredicateFailed { .. })), "{res:?}");
            return Ok(());
        }
        let mut next = cur.clone();
        for op in ops {
            match op {
                Op::Put(t, k, v) => {
                    next[*t].insert(KEYS[*k].to_vec(), value(*v));
                }
                Op::Delete(t, k) => {
                    next[*t].remove(KEYS[*k]);
                }
                Op::Expect(..) => {}
            }
        }
        self.model.push(next);
        prop_assert_eq!(res.unwrap(), cur_version + 1);
        Ok(())
    }

    fn check(&self, ver_pct: u8, tree: usize, spec: &RangeSpec) -> Result<(), TestCaseError> {
        let db = self.db();
        let version = (self.model.len() - 1) as u64;
        prop_assert_eq!(db.version(), version);
        prop_assert_eq!(db.history_floor(), self.floor);
        // Latest state, every tree, full scan and point reads.
        for (i, t) in self.trees.iter().enumerate() {
            let got: Vec<Entry> = t
                .range(&RangeSpec::all())
                .unwrap()
                .map(|e| e.unwrap())
                .collect();
            prop_assert_eq!(got, model_range(&self.current()[i], &RangeSpec::all()));
        }
        // A random retained version.
        let span = version - self.floor;
        let v = self.floor + span * u64::from(ver_pct) / 255;
        let view = db.view_at(v).unwrap();
        let (_, _, versioned) = TREES[tree];
        let snap = if versioned {
            &self.model[v as usize][tree]
        } else {
            &self.current()[tree]
        };
        for k in KEYS {
            prop_assert_eq!(
                view.get(&self.trees[tree], k).unwrap(),
                snap.get(*k).cloned(),
                "key {:?} at {}",
                k,
                v
            );
        }
        let got: Vec<Entry> = view
            .range(&self.trees[tree], spec)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        prop_assert_eq!(
            &got,
            &model_range(snap, spec),
            "spec {:?} at version {}",
            spec,
            v
        );
        // The allocation-free callback scan yields exactly the same entries.
        let mut by_callback = Vec::new();
        view.for_each_in_range(&self.trees[tree], spec, |e| {
            by_callback.push(e.to_entry());
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        prop_assert_eq!(&by_callback, &got, "for_each_in_range {:?} at {}", spec, v);
        if self.floor > 0 {
            let pruned = matches!(db.view_at(self.floor - 1), Err(Error::HistoryPruned { .. }));
            prop_assert!(pruned);
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_batches_match_a_btreemap_model_at_every_retained_version(
        actions in prop::collection::vec(action(), 1..40)
    ) {
        let mut h = Harness::new();
        for a in &actions {
            match a {
                Action::Commit { ops, expect_version } => h.commit(ops, *expect_version)?,
                Action::Reopen => h.reopen(),
                Action::Floor(pct) => {
                    let version = (h.model.len() - 1) as u64;
                    let f = version * u64::from(*pct) / 255;
                    h.db().set_history_floor(f).unwrap();
                    h.floor = h.floor.max(f);
                }
                Action::Checkpoint => h.db().checkpoint().unwrap(),
                Action::Flush => h.db().flush().unwrap(),
                Action::Check { ver_pct, tree, prefix, after, delim, limit } => {
                    let spec = RangeSpec {
                        prefix: PREFIXES[*prefix].to_vec(),
                        start_after: after.map(|i| KEYS[i].to_vec()),
                        delimiter: delim.then_some(b'/'),
                        limit: *limit,
                    };
                    h.check(*ver_pct, *tree, &spec)?;
                }
            }
        }
        h.reopen();
        h.check(128, 0, &RangeSpec::all().delimiter(b'/'))?;
        h.check(0, 2, &RangeSpec::all())?;
    }
}
