//! The set of images that make up a store: file names, the choice of images at open, and the
//! merge policy.
//!
//! An image file `image-<first>-<last>.holt` (20-digit LSNs) holds the effect of the WAL
//! records `first..=last`. A store's state is a **tiling**: images covering `1..=L` without gap
//! or overlap (the oldest, starting at LSN 1, is the **base**), plus the WAL after `L`. Images
//! are only ever created by writing the in-memory delta (`first` = the previous image's
//! `last + 1`) or by merging a run of consecutive images of the current tiling into one, so any
//! two image files are either nested or disjoint; a merge's inputs are deleted only after the
//! merged image is durable. At open, [`open_tiling`] walks from LSN 1 taking, at each step, the
//! image that starts there and reaches furthest — a merged image over the inputs a crash left
//! behind — and falls back to the next candidate when one fails its checks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::vfs::WalFs;

use super::file::Image;

/// `image-<20-digit first LSN>-<20-digit last LSN>.holt`.
pub(crate) fn file_name(first: u64, last: u64) -> String {
    format!("image-{first:020}-{last:020}.holt")
}

/// The name an image is written under before it is renamed into place.
pub(crate) fn tmp_name(first: u64, last: u64) -> String {
    format!("image-{first:020}-{last:020}.tmp")
}

/// `(first, last, installed)` of an image file name.
fn parse_name(name: &str) -> Option<(u64, u64, bool)> {
    let rest = name.strip_prefix("image-")?;
    let (body, done) = if let Some(b) = rest.strip_suffix(".holt") {
        (b, true)
    } else {
        (rest.strip_suffix(".tmp")?, false)
    };
    let (a, b) = body.split_once('-')?;
    let digits = |s: &str| s.len() == 20 && s.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    let (first, last) = (a.parse().ok()?, b.parse().ok()?);
    (first >= 1 && first <= last).then_some((first, last, done))
}

/// Image files found in a store directory.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// Installed images `(first, last, path)`, sorted by `first` then `last`.
    pub(crate) images: Vec<(u64, u64, PathBuf)>,
    /// Leftover `.tmp` files of interrupted writes.
    pub(crate) stale_tmp: Vec<PathBuf>,
}

/// Lists the image files in `dir` through `fs`. Errors: `Io` (`read_dir`).
pub(crate) fn list(fs: &dyn WalFs, dir: &Path) -> Result<Listing> {
    let mut out = Listing::default();
    for path in fs.list(dir).map_err(|e| Error::io("read_dir", dir, e))? {
        let Some(parsed) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_name)
        else {
            continue;
        };
        match parsed {
            (first, last, true) => out.images.push((first, last, path)),
            (_, _, false) => out.stale_tmp.push(path),
        }
    }
    out.images.sort();
    Ok(out)
}

/// The images chosen at open, newest first, and the first error met while choosing (reported
/// if the WAL cannot cover what the chosen images leave out).
pub(crate) struct Tiling {
    pub(crate) images: Vec<Arc<Image>>,
    pub(crate) failure: Option<Error>,
}

/// Chooses and opens the tiling (see the module docs). Never fails as a whole: images that do
/// not open are skipped in favour of the next candidate, and the walk stops where no candidate
/// opens.
pub(crate) fn open_tiling(listing: &Listing) -> Tiling {
    let mut images = Vec::new();
    let mut failure = None;
    let mut next = 1u64;
    loop {
        let mut candidates: Vec<&(u64, u64, PathBuf)> = listing
            .images
            .iter()
            .filter(|(f, _, _)| *f == next)
            .collect();
        candidates.sort_by_key(|c| std::cmp::Reverse(c.1));
        let mut opened = None;
        for (_, last, path) in candidates {
            match Image::open(path) {
                Ok(img) => {
                    opened = Some((*last, img));
                    break;
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        match opened {
            Some((last, img)) => {
                images.push(Arc::new(img));
                next = last + 1;
            }
            None => break,
        }
    }
    images.reverse();
    Tiling { images, failure }
}

/// Runs of the same size tier are merged this many at a time.
pub(crate) const TIER_FANOUT: usize = 3;
/// The runs above the base are merged into a new base once their bytes reach the base's divided
/// by this.
pub(crate) const BASE_RATIO: u64 = 2;
/// More runs above the base than this are merged into a new base regardless of size.
pub(crate) const MAX_RUNS: usize = 12;

/// Size tier of a run of `bytes`: 0 up to `unit`, then one more per factor [`TIER_FANOUT`].
fn tier(bytes: u64, unit: u64) -> u32 {
    let mut t = 0;
    let mut cap = unit.max(1);
    while bytes > cap {
        cap = cap.saturating_mul(TIER_FANOUT as u64);
        t += 1;
    }
    t
}

/// The merge due for images of the given sizes (newest first; the last is the base), as the
/// number of newest images to merge into one (the count of all: a new base), or `None`.
///
/// Rules, in order: (1) the runs above the base together reach half the base, or there are
/// more than [`MAX_RUNS`] of them: merge everything into a new base; (2) the newest
/// [`TIER_FANOUT`] runs or more share a size tier (`unit` bytes, ×3 per tier): merge them.
pub(crate) fn plan_merge(bytes: &[u64], unit: u64) -> Option<usize> {
    let n = bytes.len();
    if n < 2 {
        return None;
    }
    let base = bytes[n - 1];
    let runs: u64 = bytes[..n - 1].iter().sum();
    if runs.saturating_mul(BASE_RATIO) >= base || n - 1 > MAX_RUNS {
        return Some(n);
    }
    let t0 = tier(bytes[0], unit);
    let same = bytes[..n - 1]
        .iter()
        .take_while(|&&b| tier(b, unit) == t0)
        .count();
    (same >= TIER_FANOUT).then_some(same)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_round_trip_and_foreign_names_are_ignored() {
        assert_eq!(
            file_name(1, 42),
            "image-00000000000000000001-00000000000000000042.holt"
        );
        assert_eq!(parse_name(&file_name(7, 9)), Some((7, 9, true)));
        assert_eq!(parse_name(&tmp_name(7, 9)), Some((7, 9, false)));
        assert_eq!(parse_name("image-1-2.holt"), None);
        assert_eq!(parse_name(&file_name(9, 7)), None);
        assert_eq!(parse_name(&file_name(0, 7)), None);
        assert_eq!(parse_name("checkpoint-00000000000000000001.ckpt"), None);
    }

    /// Simulates the policy: `flushes` delta images of `unit` bytes each (no overwrites, so a
    /// merge writes the sum of its inputs). Returns (bytes written by flushes and merges per
    /// byte ingested, most images at any time).
    fn simulate(flushes: usize, unit: u64) -> (f64, usize) {
        let mut runs: Vec<u64> = Vec::new(); // newest first
        let mut written = 0u64;
        let mut most = 0;
        for _ in 0..flushes {
            runs.insert(0, unit);
            written += unit;
            while let Some(k) = plan_merge(&runs, unit) {
                let merged: u64 = runs[..k].iter().sum();
                written += merged;
                runs.drain(..k);
                runs.insert(0, merged);
            }
            most = most.max(runs.len());
        }
        (written as f64 / (flushes as u64 * unit) as f64, most)
    }

    #[test]
    fn merge_policy_bounds_write_amplification_and_the_number_of_images() {
        for (flushes, max_amp, max_images) in [(16, 3.5, 4), (256, 6.0, 9), (4096, 9.0, 13)] {
            let (amp, most) = simulate(flushes, 1 << 20);
            eprintln!("{flushes} flushes: {amp:.2} bytes written per byte ingested, at most {most} images");
            assert!(
                amp <= max_amp,
                "{flushes} flushes: write amplification {amp:.2}"
            );
            assert!(most <= max_images, "{flushes} flushes: {most} images");
        }
    }

    #[test]
    fn runs_of_one_tier_merge_three_at_a_time_and_a_large_pile_merges_into_the_base() {
        let mb = 1 << 20;
        assert_eq!(plan_merge(&[mb, mb, 100 * mb], mb), None);
        assert_eq!(plan_merge(&[mb, mb, mb, 100 * mb], mb), Some(3));
        assert_eq!(
            plan_merge(&[mb, 3 * mb, 3 * mb, 3 * mb, 100 * mb], mb),
            None
        );
        assert_eq!(plan_merge(&[30 * mb, 30 * mb, 100 * mb], mb), Some(3));
        assert_eq!(plan_merge(&[mb], mb), None);
    }
}
