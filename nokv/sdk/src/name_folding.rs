//! How a local destination compares file names, and which workbench paths it would merge
//! (docs/design.md, "Materialize onto a folding file system").
//!
//! Workbench paths are exact: `Report.txt` and `report.txt` are two files, and so are the NFC and
//! NFD spellings of `café`. Many local file systems are not: vfat, exFAT and NTFS (and macOS's
//! APFS and HFS+ by default) fold letter case, and macOS also treats the NFC and NFD spellings of
//! a name as one. Writing two such paths there silently leaves one file with the last body.
//!
//! [`probe`] asks the destination itself instead of guessing from the platform: in the
//! directory the files would go to (or its nearest existing ancestor) it creates a uniquely
//! named empty probe file whose name has both letter cases, and checks whether the case-swapped
//! name resolves to it; then one whose name holds an NFC `é`, and checks whether the NFD spelling
//! resolves. Each probe is removed at once. A probe the file system refuses to create (vfat
//! refuses many non-ASCII names) tells nothing about that folding, which is then assumed off:
//! the names it would affect cannot be written there either. [`first_collision`] then keys every
//! path the way the destination compares names and returns the first two paths with one key —
//! for two files, or for a file and a directory holding another file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use unicode_normalization::UnicodeNormalization;

use crate::error::{Error, Result};

/// How a destination compares names (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NameFolding {
    /// Names that differ only in letter case are one name.
    pub case: bool,
    /// The NFC and NFD spellings of a name are one name.
    pub unicode: bool,
}

impl NameFolding {
    /// No folding: every distinct path is a distinct local file.
    pub const EXACT: NameFolding = NameFolding {
        case: false,
        unicode: false,
    };

    /// `"case"`, `"unicode"`, `"case and unicode"`, or `"nothing"`.
    pub fn describe(self) -> &'static str {
        match (self.case, self.unicode) {
            (true, true) => "case and unicode",
            (true, false) => "case",
            (false, true) => "unicode",
            (false, false) => "nothing",
        }
    }

    /// The name `path` has for a destination that folds like `self`: NFC when it normalizes
    /// Unicode, then lower case (Unicode lowercase mapping) when it folds case, then NFC again
    /// when it does both (so an NFD spelling and its NFC form agree after lowering).
    pub fn key(self, path: &str) -> String {
        let base: String = if self.unicode {
            path.nfc().collect()
        } else {
            path.to_string()
        };
        if self.case {
            let lowered = base.to_lowercase();
            if self.unicode {
                lowered.nfc().collect()
            } else {
                lowered
            }
        } else {
            base
        }
    }
}

/// The nearest directory of `dest` that exists (`dest` itself when it does).
fn existing_dir(dest: &Path) -> PathBuf {
    let mut at = Some(dest);
    while let Some(p) = at {
        if p.is_dir() {
            return p.to_path_buf();
        }
        at = p.parent().filter(|p| !p.as_os_str().is_empty());
    }
    PathBuf::from(".")
}

/// A random suffix for probe names (hex).
fn probe_suffix() -> Result<String> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| Error::InvalidArgument(format!("no randomness: {e}")))?;
    Ok(objstore::hex_lower(&b))
}

/// Creates `dir/created`, checks whether `dir/lookup` resolves to it, removes it. `None` when
/// the file system refuses to create the name.
fn resolves(dir: &Path, created: &str, lookup: &str) -> Result<Option<bool>> {
    let made = dir.join(created);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&made)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !dir_writable(dir) => {
            return Err(Error::LocalIo {
                op: "create",
                path: made,
                source: e,
            })
        }
        // The name itself is refused (invalid for this file system): nothing to learn.
        Err(_) => return Ok(None),
    }
    let found = std::fs::symlink_metadata(dir.join(lookup)).is_ok();
    std::fs::remove_file(&made).map_err(|source| Error::LocalIo {
        op: "remove probe",
        path: made,
        source,
    })?;
    Ok(Some(found))
}

/// Whether a plain ASCII name can be created in `dir` (tells a refused name from a directory
/// the caller may not write to).
fn dir_writable(dir: &Path) -> bool {
    let Ok(suffix) = probe_suffix() else {
        return false;
    };
    let p = dir.join(format!(".nokv-probe-{suffix}"));
    let ok = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .is_ok();
    if ok {
        let _ = std::fs::remove_file(&p);
    }
    ok
}

/// Probes how the file system holding `dest` (or, when `dest` does not exist yet, its nearest
/// existing ancestor) compares names (see the module docs). Leaves nothing behind.
///
/// Errors: [`Error::LocalIo`] when the directory cannot be written (or a probe cannot be
/// removed).
pub fn probe(dest: &Path) -> Result<NameFolding> {
    let dir = existing_dir(dest);
    let suffix = probe_suffix()?;
    // Both cases in one name: `.nokv-probe-<hex>-Aa` against `.nokv-probe-<hex>-aA`.
    let case = resolves(
        &dir,
        &format!(".nokv-probe-{suffix}-Aa"),
        &format!(".nokv-probe-{suffix}-aA"),
    )?
    .unwrap_or(false);
    // `é` as one code point (NFC) against `e` + combining acute (NFD).
    let unicode = resolves(
        &dir,
        &format!(".nokv-probe-{suffix}-\u{e9}"),
        &format!(".nokv-probe-{suffix}-e\u{301}"),
    )?
    .unwrap_or(false);
    Ok(NameFolding { case, unicode })
}

/// The first two of `paths` (workbench-relative, `/`-separated, in listing order) that a
/// destination folding like `folding` would hold as one file — or as a file and a directory of
/// the same name; `None` when every path keeps its own name. O(total path bytes).
pub fn first_collision<'a>(
    folding: NameFolding,
    paths: impl IntoIterator<Item = &'a str>,
) -> Option<(String, String)> {
    if folding == NameFolding::EXACT {
        return None;
    }
    // Folded key of every file, and of every directory some file lies under (with one path
    // that makes it a directory).
    let mut files: HashMap<String, &str> = HashMap::new();
    let mut dirs: HashMap<String, &str> = HashMap::new();
    for path in paths {
        let key = folding.key(path);
        if let Some(other) = files.get(&key) {
            return Some(((*other).to_string(), path.to_string()));
        }
        if let Some(other) = dirs.get(&key) {
            return Some(((*other).to_string(), path.to_string()));
        }
        // Its directories: a file with the same folded name as one of them is a collision,
        // and so are two directories spelled differently (`Dir/a`, `dir/b` merge into one
        // directory, which keeps both files apart — allowed).
        for (i, c) in path.char_indices() {
            if c == '/' {
                let dkey = folding.key(path.get(..i).unwrap_or_default());
                if let Some(other) = files.get(&dkey) {
                    return Some(((*other).to_string(), path.to_string()));
                }
                dirs.entry(dkey).or_insert(path);
            }
        }
        files.insert(key, path);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const CASE: NameFolding = NameFolding {
        case: true,
        unicode: false,
    };
    const UNICODE: NameFolding = NameFolding {
        case: false,
        unicode: true,
    };

    #[test]
    fn two_files_differing_only_in_case_collide_on_a_case_folding_destination() {
        let paths = ["outputs/Report.txt", "outputs/b.txt", "outputs/report.txt"];
        assert_eq!(
            first_collision(CASE, paths),
            Some(("outputs/Report.txt".into(), "outputs/report.txt".into()))
        );
        assert_eq!(first_collision(NameFolding::EXACT, paths), None);
        assert_eq!(first_collision(UNICODE, paths), None);
    }

    #[test]
    fn nfc_and_nfd_spellings_collide_on_a_normalizing_destination() {
        let nfc = "input/caf\u{e9}.csv";
        let nfd = "input/cafe\u{301}.csv";
        assert_eq!(
            first_collision(UNICODE, [nfc, nfd]),
            Some((nfc.to_string(), nfd.to_string()))
        );
        assert_eq!(first_collision(CASE, [nfc, nfd]), None);
        // Case folding of an NFD spelling agrees with its NFC form.
        let both = NameFolding {
            case: true,
            unicode: true,
        };
        assert_eq!(
            first_collision(both, ["input/CAF\u{c9}.csv", nfd]),
            Some(("input/CAF\u{c9}.csv".to_string(), nfd.to_string()))
        );
    }

    #[test]
    fn a_file_and_a_directory_of_the_same_folded_name_collide() {
        assert_eq!(
            first_collision(CASE, ["outputs/Plots", "outputs/plots/a.png"]),
            Some(("outputs/Plots".into(), "outputs/plots/a.png".into()))
        );
        assert_eq!(
            first_collision(CASE, ["outputs/plots/a.png", "outputs/Plots"]),
            Some(("outputs/plots/a.png".into(), "outputs/Plots".into()))
        );
    }

    #[test]
    fn directories_spelled_differently_keep_distinct_files_apart() {
        assert_eq!(
            first_collision(CASE, ["outputs/Dir/a", "outputs/dir/b"]),
            None
        );
        assert_eq!(
            first_collision(CASE, ["outputs/Dir/a", "outputs/dir/A"]),
            Some(("outputs/Dir/a".into(), "outputs/dir/A".into()))
        );
    }

    #[test]
    fn probing_a_case_sensitive_directory_finds_no_folding_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("not-yet");
        let folding = probe(&dest).unwrap();
        // The temporary directory of the test machine (ext4, tmpfs, overlayfs) is exact.
        assert_eq!(folding, NameFolding::EXACT);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(!dest.exists());
    }
}
