//! Image tests: every read of a built image agrees with a `BTreeMap` model (point reads,
//! predecessor search, listings with prefix / `start_after` / delimiter, summary-driven subtree
//! queries), large records span blocks, and a flipped byte in every structure of the file fails
//! the open or the read that touches it with `Error::Corrupt` naming the file and block.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use crate::art::{Summary, Verdict};
use crate::error::Error;
use crate::vfs::sim::Rng;
use crate::vfs::OsFs;

use super::format::{BLOCK, FOOTER_LEN};
use super::may_contain;
use super::node::Leaf;
use super::{
    any_in_prefix, get, last_below, BlockSink, Image, ImgItem, ImgList, Meta, TreeEntry,
    TrieBuilder,
};

/// key → (value, version); `None` is a tombstone.
type Model = BTreeMap<Vec<u8>, (Option<Vec<u8>>, u64)>;

const TAG: u8 = 5;

/// Writes `model` as tree `TAG` (versions and summaries kept when `versions`) to `dir/t.img`.
fn build(dir: &Path, model: &Model, versions: bool) -> PathBuf {
    let path = dir.join("t.img");
    let _ = std::fs::remove_file(&path);
    let mut progress = |_| Ok(());
    let mut sink = BlockSink::create(&OsFs, &path, &mut progress).unwrap();
    let mut b = TrieBuilder::new(versions, true);
    for (k, (v, ver)) in model {
        b.push(&mut sink, k, v.as_deref(), *ver).unwrap();
    }
    let root = b.finish(&mut sink, TAG).unwrap();
    let meta = Meta {
        first_lsn: 1,
        last_lsn: 9,
        version: 9,
        floor: 0,
        trees: vec![TreeEntry {
            tag: TAG,
            versioned: versions,
            name: "t".into(),
        }],
        roots: root.into_iter().collect(),
    };
    sink.finish(&meta).unwrap();
    path
}

fn random_key(r: &mut Rng) -> Vec<u8> {
    match r.below(10) {
        // Path-shaped keys with shared directories.
        0..=5 => format!(
            "t{}/d{:02}/r{}/f{:03}",
            r.below(3),
            r.below(12),
            r.below(3),
            r.below(40)
        )
        .into_bytes(),
        // Short keys, prefixes of each other, odd bytes.
        6 | 7 => {
            let alphabet = [b'a', b'b', b'/', 0x00, 0xff];
            (0..r.below(4))
                .map(|_| alphabet[r.below(5) as usize])
                .collect()
        }
        // Long keys (large records past one block).
        8 => {
            let mut k = b"long/".to_vec();
            k.extend(std::iter::repeat_n(b'x', 4000 + r.below(6000) as usize));
            k.push(b'0' + r.below(3) as u8);
            k
        }
        _ => r.next().to_be_bytes()[..(1 + r.below(8) as usize)].to_vec(),
    }
}

fn random_model(seed: u64, n: usize, tombstones: bool) -> Model {
    let mut r = Rng::new(seed);
    let mut m = Model::new();
    for i in 0..n {
        let k = random_key(&mut r);
        let v = if tombstones && r.one_in(5) {
            None
        } else if r.one_in(40) {
            Some(vec![b'V'; 5000 + r.below(9000) as usize])
        } else {
            Some(format!("v{i}").into_bytes())
        };
        m.insert(k, (v, 1 + r.below(1000)));
    }
    m
}

fn model_list(
    m: &Model,
    prefix: &[u8],
    after: Option<&[u8]>,
    delim: Option<u8>,
) -> Vec<(Vec<u8>, bool)> {
    let mut out: Vec<(Vec<u8>, bool)> = Vec::new();
    for k in m.keys() {
        if !k.starts_with(prefix) {
            continue;
        }
        let split = delim.and_then(|d| k[prefix.len()..].iter().position(|&b| b == d));
        let item = match split {
            Some(i) => (k[..prefix.len() + i + 1].to_vec(), true),
            None => (k.clone(), false),
        };
        if out.last() == Some(&item) {
            continue;
        }
        out.push(item);
    }
    out.retain(|(b, _)| after.is_none_or(|a| b.as_slice() > a));
    out
}

fn list(
    img: &Image,
    prefix: &[u8],
    after: Option<&[u8]>,
    delim: Option<u8>,
) -> Vec<(Vec<u8>, bool)> {
    let Some(root) = img.root(TAG) else {
        return Vec::new();
    };
    let mut c = ImgList::new(img, root.off, prefix, after, delim, None).unwrap();
    let mut out = Vec::new();
    c.advance().unwrap();
    while let Some(item) = c.current() {
        out.push(match item {
            ImgItem::Key(k, _) => (k.to_vec(), false),
            ImgItem::Group(p) => (p.to_vec(), true),
        });
        c.advance().unwrap();
    }
    out
}

fn check_against_model(img: &Image, m: &Model, r: &mut Rng, versions: bool) {
    let root = img.root(TAG).map(|r| r.off);
    let keys: Vec<&Vec<u8>> = m.keys().collect();
    // Point reads of every key and of neighbours that are absent.
    for (k, (v, ver)) in m {
        let got = get(img, root.unwrap(), k).unwrap().expect("present key");
        assert_eq!(got.value, v.as_deref(), "value of {k:?}");
        assert_eq!(got.version, if versions { *ver } else { 0 });
        for probe in [
            [k.as_slice(), b"\x00"].concat(),
            k.get(..k.len().saturating_sub(1))
                .unwrap_or_default()
                .to_vec(),
        ] {
            let want = m.get(&probe).map(|(v, _)| v.clone());
            let got = get(img, root.unwrap(), &probe)
                .unwrap()
                .map(|l: Leaf<'_>| l.value.map(<[u8]>::to_vec));
            assert_eq!(got, want, "probe {probe:?}");
        }
    }
    // The bloom filter holds every key and rejects most others.
    if let Some(root) = img.root(TAG) {
        assert!(root.bloom.is_some());
        for k in m.keys() {
            assert!(may_contain(img, &root, k).unwrap(), "bloom lost {k:?}");
        }
        let absent: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| format!("absent/{i}").into_bytes())
            .collect();
        let hits = absent
            .iter()
            .filter(|k| may_contain(img, &root, k).unwrap())
            .count();
        if m.len() >= 60 {
            assert!(hits < 100, "{hits} false positives of 2000");
        }
    }
    // Full ordered iteration.
    let all: Vec<(Vec<u8>, bool)> = m.keys().map(|k| (k.clone(), false)).collect();
    assert_eq!(list(img, b"", None, None), all);
    // Listings with random prefixes, continuation points and delimiters.
    for _ in 0..300 {
        let pick = |r: &mut Rng| -> Vec<u8> {
            if keys.is_empty() || r.one_in(4) {
                random_key(r)
            } else {
                let k = keys[r.below(keys.len() as u64) as usize];
                k[..r.below(k.len() as u64 + 1) as usize].to_vec()
            }
        };
        let prefix = if r.one_in(3) { Vec::new() } else { pick(r) };
        let after = (r.one_in(2)).then(|| pick(r));
        let delim = r.one_in(2).then_some(b'/');
        assert_eq!(
            list(img, &prefix, after.as_deref(), delim),
            model_list(m, &prefix, after.as_deref(), delim),
            "prefix {prefix:?} after {after:?} delim {delim:?}"
        );
        // Predecessor search.
        let bound = pick(r);
        let want = m
            .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(bound.as_slice())))
            .next_back()
            .map(|(k, (v, _))| (k.clone(), v.clone()));
        let got = root.and_then(|root| {
            last_below(img, root, &bound)
                .unwrap()
                .map(|(k, l)| (k, l.value.map(<[u8]>::to_vec)))
        });
        assert_eq!(got, want, "last_below {bound:?}");
        // "Is there a live key under this prefix?" through summaries (versioned images) or
        // leaf checks.
        let live_under = m
            .iter()
            .any(|(k, (v, _))| k.starts_with(&prefix) && v.is_some());
        let classify = |s: &Summary| {
            if s.live > 0 {
                Verdict::Hit
            } else {
                Verdict::Skip
            }
        };
        let got = root.is_some_and(|root| {
            any_in_prefix(img, root, &prefix, &classify, &mut |_, l| {
                Ok(l.value.is_some())
            })
            .unwrap()
        });
        assert_eq!(got, live_under, "any_in_prefix {prefix:?}");
    }
}

#[test]
fn built_images_answer_every_read_like_the_model() {
    for (seed, n, versions) in [
        (1, 0, false),
        (2, 1, false),
        (3, 2, true),
        (4, 60, false),
        (5, 700, true),
        (6, 3000, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let m = random_model(seed, n, versions);
        let path = build(dir.path(), &m, versions);
        let img = Image::open(&path).unwrap();
        assert_eq!(img.root(TAG).is_some(), !m.is_empty());
        if let Some(root) = img.root(TAG) {
            let live = m.values().filter(|(v, _)| v.is_some()).count() as u64;
            assert_eq!(root.summary.live, live);
            assert_eq!(root.summary.dead, m.len() as u64 - live);
        }
        let mut r = Rng::new(seed ^ 0xabc);
        check_against_model(&img, &m, &mut r, versions);
    }
}

#[test]
fn dense_and_wide_nodes_use_both_node_forms() {
    // 256 children at one node (bitmap form), 16 (sorted form), terminal keys at every level.
    let mut m = Model::new();
    for b in 0..=255u8 {
        m.insert(vec![b'w', b], (Some(vec![b]), 1));
        m.insert(vec![b'w', b, b'z'], (Some(vec![b, b]), 2));
    }
    for b in 0..16u8 {
        m.insert(vec![b's', b], (Some(vec![b]), 3));
    }
    m.insert(b"w".to_vec(), (Some(b"root-terminal".to_vec()), 4));
    m.insert(Vec::new(), (Some(b"empty key".to_vec()), 5));
    let dir = tempfile::tempdir().unwrap();
    let img = Image::open(&build(dir.path(), &m, true)).unwrap();
    let mut r = Rng::new(9);
    check_against_model(&img, &m, &mut r, true);
}

/// Flips one byte at `off` of `path`.
fn flip(path: &Path, off: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[off as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

fn corrupt_block(e: &Error, path: &Path) -> String {
    match e {
        Error::Corrupt { file, reason, .. } => {
            assert_eq!(file, path, "the error names the file");
            reason.clone()
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// One key per leaf stream block: the file has node blocks, leaf blocks, the meta record, the
/// CRC table, its directory and the footer.
fn corruptible(dir: &Path) -> (PathBuf, Model) {
    let mut m = Model::new();
    for i in 0..400u32 {
        m.insert(
            format!("k/{i:05}").into_bytes(),
            (Some(vec![b'x'; 200]), u64::from(i)),
        );
    }
    (build(dir, &m, true), m)
}

#[test]
fn a_flipped_byte_in_a_leaf_block_fails_the_read_that_touches_it() {
    let dir = tempfile::tempdir().unwrap();
    let (path, m) = corruptible(dir.path());
    let root = Image::open(&path).unwrap().root(TAG).unwrap().off;
    let first = m.keys().next().unwrap();
    // Leaves are written in key order: the first run of value bytes is the first key's.
    let bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(200).position(|w| w == [b'x'; 200]).unwrap() as u64;
    let block = at / BLOCK as u64;
    flip(&path, at + 10);
    let img = Image::open(&path).unwrap();
    let err = get(&img, root, first).unwrap_err();
    let reason = corrupt_block(&err, &path);
    assert_eq!(reason, format!("image block {block} CRC mismatch"));
    // Keys in other blocks still read.
    let last = m.keys().next_back().unwrap();
    assert!(get(&img, root, last).unwrap().is_some());
}

#[test]
fn a_flipped_byte_in_a_node_block_fails_lookups_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new();
    for i in 0..20_000u32 {
        m.insert(
            format!("k/{i:05}").into_bytes(),
            (Some(vec![b'y'; 8]), u64::from(i)),
        );
    }
    let path = build(dir.path(), &m, true);
    let img = Image::open(&path).unwrap();
    let root = img.root(TAG).unwrap().off;
    // The node holding the keys under "k/000" was written early: a node block apart from the
    // meta record's.
    let (node, _) = super::read::prefix_root(&img, root, b"k/000")
        .unwrap()
        .unwrap();
    let meta_off = {
        let bytes = std::fs::read(&path).unwrap();
        let foot = &bytes[bytes.len() - FOOTER_LEN..];
        u64::from_le_bytes(foot[24..32].try_into().unwrap())
    };
    let block = node / BLOCK as u64;
    assert_ne!(block, meta_off / BLOCK as u64);
    assert_ne!(block, root / BLOCK as u64);
    drop(img);
    flip(&path, node + 1);
    let img = Image::open(&path).unwrap();
    let err = get(&img, root, b"k/00007").unwrap_err();
    assert_eq!(
        corrupt_block(&err, &path),
        format!("image block {block} CRC mismatch")
    );
    // A listing through it fails the same way; keys elsewhere still read.
    let mut c = ImgList::new(&img, root, b"k/0", None, None, None).unwrap();
    assert!(c.advance().is_err());
    assert!(get(&img, root, b"k/19999").unwrap().is_some());
}

#[test]
fn a_flipped_byte_in_the_meta_record_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = corruptible(dir.path());
    let meta_off = {
        let bytes = std::fs::read(&path).unwrap();
        let foot = &bytes[bytes.len() - FOOTER_LEN..];
        u64::from_le_bytes(foot[24..32].try_into().unwrap())
    };
    flip(&path, meta_off + 3);
    let err = Image::open(&path).unwrap_err();
    let block = meta_off / BLOCK as u64;
    assert_eq!(
        corrupt_block(&err, &path),
        format!("image block {block} CRC mismatch")
    );
}

#[test]
fn a_flipped_byte_in_the_crc_table_fails_reads_of_the_blocks_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let (path, m) = corruptible(dir.path());
    let (table_off, root) = {
        let img = Image::open(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let foot = &bytes[bytes.len() - FOOTER_LEN..];
        let nblocks = u64::from_le_bytes(foot[16..24].try_into().unwrap());
        (nblocks * BLOCK as u64, img.root(TAG).unwrap().off)
    };
    // Damage the CRC of the root's block: the table page no longer matches the directory.
    flip(&path, table_off + (root / BLOCK as u64) * 4);
    // The meta record's block is checked at open, against the same (damaged) page.
    let err = Image::open(&path).unwrap_err();
    assert_eq!(corrupt_block(&err, &path), "CRC table page 0 CRC mismatch");
    assert!(!m.is_empty());
}

#[test]
fn a_flipped_byte_in_the_directory_or_footer_fails_the_open() {
    for from_end in [FOOTER_LEN as u64 + 2, 30, 5] {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = corruptible(dir.path());
        let len = std::fs::metadata(&path).unwrap().len();
        flip(&path, len - from_end);
        let err = Image::open(&path).unwrap_err();
        corrupt_block(&err, &path);
    }
    // A truncated file is refused too.
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = corruptible(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 100]).unwrap();
    corrupt_block(&Image::open(&path).unwrap_err(), &path);
}
