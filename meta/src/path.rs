//! The one shared path normalizer and ordered path codec (docs/metadata-format.md, "Ids, Names, And Keys").
//!
//! A [`NormPath`] is a validated relative path: 1..=64 components, each non-empty, not `.` or `..`,
//! without backslash or NUL, at most 4096 UTF-8 bytes in total. There is no cleanup: `a//b`, `./a`
//! and `a/` are errors, and no case folding or Unicode normalization happens.
//!
//! The canonical ordered key of `c0/c1/…/cn` is
//! `ordered(c0) 0x00 ordered(c1) 0x00 … ordered(cn) 0x01`, where `ordered` adds one to every byte.
//! Valid UTF-8 never contains 0xff, so the transform is length-preserving and order-preserving;
//! since components contain no NUL, encoded component bytes are always ≥ 0x02, leaving 0x00 as the
//! component delimiter and 0x01 as the exact-row terminator. Consequences: the `a/` subtree sorts
//! first, then exact `a`, then `a\u{1}`, then `ab`; a child prefix (`… 0x00`) of `a` never matches
//! `ab`; no exact key is a prefix of another.

use std::fmt;

/// Maximum total path length in UTF-8 bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Maximum number of path components.
pub const MAX_PATH_COMPONENTS: usize = 64;

/// Component delimiter in the ordered key.
pub const COMPONENT_DELIMITER: u8 = 0x00;
/// Exact-row terminator in the ordered key.
pub const EXACT_TERMINATOR: u8 = 0x01;

/// Why a relative path was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path is the empty string.
    #[error("path is empty")]
    Empty,
    /// The path starts with `/`.
    #[error("path must be relative")]
    Absolute,
    /// Two consecutive slashes or a trailing slash.
    #[error("path has an empty component")]
    EmptyComponent,
    /// A `.` component.
    #[error("path has a '.' component")]
    DotComponent,
    /// A `..` component.
    #[error("path has a '..' component")]
    DotDotComponent,
    /// A backslash anywhere.
    #[error("path contains a backslash")]
    Backslash,
    /// A NUL byte anywhere.
    #[error("path contains NUL")]
    Nul,
    /// More than [`MAX_PATH_BYTES`] UTF-8 bytes.
    #[error("path is {bytes} bytes; at most 4096 allowed")]
    TooLong {
        /// Actual length in bytes.
        bytes: usize,
    },
    /// More than [`MAX_PATH_COMPONENTS`] components.
    #[error("path has {count} components; at most 64 allowed")]
    TooManyComponents {
        /// Actual component count.
        count: usize,
    },
    /// An ordered key could not be decoded (wrong terminator, reserved byte, invalid UTF-8).
    #[error("malformed ordered path key: {0}")]
    MalformedKey(&'static str),
}

/// A validated, normalized relative path (see the module docs for the rules).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NormPath(String);

/// Validates one component (no `/` inside; callers split first).
fn check_component(c: &str) -> Result<(), PathError> {
    match c {
        "" => Err(PathError::EmptyComponent),
        "." => Err(PathError::DotComponent),
        ".." => Err(PathError::DotDotComponent),
        _ => Ok(()),
    }
}

/// Normalizes (validates) a relative path. No cleanup is performed: the input must already be in
/// canonical form.
///
/// Errors: the first violated rule as a [`PathError`].
pub fn normalize(relative: &str) -> Result<NormPath, PathError> {
    normalize_with(relative, MAX_PATH_BYTES, MAX_PATH_COMPONENTS)
}

/// Longest Workbench section name (`metadata`), in bytes.
pub const MAX_SECTION_BYTES: usize = 8;
/// Most components of a *stored* workbench-relative path: a section plus a relative path of at
/// most [`MAX_PATH_COMPONENTS`] (docs/workbench.md applies the normalizer's limits to the path an
/// agent sends, which is relative to its section).
pub const MAX_STORED_PATH_COMPONENTS: usize = MAX_PATH_COMPONENTS + 1;
/// Longest *stored* workbench-relative path in bytes: a section, `/`, and a relative path of at
/// most [`MAX_PATH_BYTES`].
pub const MAX_STORED_PATH_BYTES: usize = MAX_PATH_BYTES + 1 + MAX_SECTION_BYTES;

/// Places an already normalized section-relative path under `section` (one component of at most
/// [`MAX_SECTION_BYTES`] bytes), giving the stored workbench-relative path `section/relative`.
///
/// Errors: the first normalizer rule `section` breaks, or [`PathError::TooLong`] for a section
/// longer than [`MAX_SECTION_BYTES`].
pub fn section_path(section: &str, relative: &NormPath) -> Result<NormPath, PathError> {
    check_component(section)?;
    if section.contains('/') || section.len() > MAX_SECTION_BYTES {
        return Err(PathError::TooLong {
            bytes: section.len(),
        });
    }
    normalize_with(
        &format!("{section}/{}", relative.as_str()),
        MAX_STORED_PATH_BYTES,
        MAX_STORED_PATH_COMPONENTS,
    )
}

/// Validates a *stored* workbench-relative path (same rules as [`normalize`], with room for a
/// leading section: [`MAX_STORED_PATH_BYTES`], [`MAX_STORED_PATH_COMPONENTS`]). Used when
/// decoding keys and records.
///
/// Errors: the first violated rule as a [`PathError`].
pub fn normalize_stored(path: &str) -> Result<NormPath, PathError> {
    normalize_with(path, MAX_STORED_PATH_BYTES, MAX_STORED_PATH_COMPONENTS)
}

/// The normalizer with explicit limits (the rules are the same everywhere; only stored paths get
/// room for their section).
fn normalize_with(
    relative: &str,
    max_bytes: usize,
    max_components: usize,
) -> Result<NormPath, PathError> {
    if relative.is_empty() {
        return Err(PathError::Empty);
    }
    if relative.starts_with('/') {
        return Err(PathError::Absolute);
    }
    if relative.contains('\\') {
        return Err(PathError::Backslash);
    }
    if relative.contains('\0') {
        return Err(PathError::Nul);
    }
    if relative.len() > max_bytes {
        return Err(PathError::TooLong {
            bytes: relative.len(),
        });
    }
    let mut count = 0usize;
    for c in relative.split('/') {
        check_component(c)?;
        count += 1;
    }
    if count > max_components {
        return Err(PathError::TooManyComponents { count });
    }
    Ok(NormPath(relative.to_owned()))
}

impl NormPath {
    /// The path as `c0/c1/…/cn`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The components in order (never empty).
    pub fn components(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.split('/')
    }

    /// Number of components (1..=65; 65 only for a stored path under a section).
    pub fn len_components(&self) -> usize {
        self.components().count()
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The parent directory, or `None` for a single-component path (whose parent is the
    /// workspace root).
    pub fn parent(&self) -> Option<NormPath> {
        self.0.rfind('/').map(|i| NormPath(self.0[..i].to_owned()))
    }

    /// Appends `name` (one component, or itself a relative path such as `b/c`); the joined path
    /// is revalidated as a whole against the stored-path limits ([`MAX_STORED_PATH_BYTES`],
    /// [`MAX_STORED_PATH_COMPONENTS`]). Errors: any normalizer rule the result breaks.
    pub fn join(&self, name: &str) -> Result<NormPath, PathError> {
        normalize_with(
            &format!("{}/{}", self.0, name),
            MAX_STORED_PATH_BYTES,
            MAX_STORED_PATH_COMPONENTS,
        )
    }

    /// Whether `self` lies strictly inside directory `dir` (component-wise; `a/bc` is not inside
    /// `a/b`, and a path is not inside itself).
    pub fn starts_with_dir(&self, dir: &NormPath) -> bool {
        self.0.len() > dir.0.len()
            && self.0.as_bytes().starts_with(dir.0.as_bytes())
            && self.0.as_bytes().get(dir.0.len()) == Some(&b'/')
    }
}

impl fmt::Display for NormPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NormPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NormPath({:?})", self.0)
    }
}

impl std::str::FromStr for NormPath {
    type Err = PathError;
    fn from_str(s: &str) -> Result<Self, PathError> {
        normalize(s)
    }
}

fn push_ordered(out: &mut Vec<u8>, component: &str) {
    // Valid UTF-8 never contains 0xff, so `b + 1` cannot overflow.
    out.extend(component.bytes().map(|b| b.wrapping_add(1)));
}

/// The canonical ordered key of a path (without any root/incarnation prefix):
/// `ordered(c0) 0x00 … ordered(cn) 0x01`.
pub fn ordered_key(path: &NormPath) -> Vec<u8> {
    let mut out = ordered_components(path);
    out.push(EXACT_TERMINATOR);
    out
}

/// The ordered, NUL-separated component bytes without the exact terminator:
/// `ordered(c0) 0x00 … ordered(cn)`. This is the path part of a RevisionRef(Path) owner id
/// (docs/metadata-format.md, "RevisionRef"), which carries its own u32 length.
pub fn ordered_components(path: &NormPath) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.0.len() + 1);
    for (i, c) in path.components().enumerate() {
        if i > 0 {
            out.push(COMPONENT_DELIMITER);
        }
        push_ordered(&mut out, c);
    }
    out
}

/// The children/subtree prefix of a directory: every component of `dir` encoded and followed by
/// 0x00. Empty for the workspace root (`None`). `dir_prefix(Some(a))` never matches keys of `ab`.
pub fn dir_prefix(dir: Option<&NormPath>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(dir) = dir {
        for c in dir.components() {
            push_ordered(&mut out, c);
            out.push(COMPONENT_DELIMITER);
        }
    }
    out
}

fn decode_component(enc: &[u8]) -> Result<String, PathError> {
    if enc.is_empty() {
        return Err(PathError::MalformedKey("empty component"));
    }
    let mut raw = Vec::with_capacity(enc.len());
    for &b in enc {
        if b < 0x02 {
            return Err(PathError::MalformedKey("reserved byte inside a component"));
        }
        // `/` inside one encoded component would decode to a path whose canonical key differs
        // (two keys, one path): only the NUL separator may split components.
        if b - 1 == b'/' {
            return Err(PathError::MalformedKey("`/` inside an encoded component"));
        }
        raw.push(b - 1);
    }
    String::from_utf8(raw).map_err(|_| PathError::MalformedKey("component is not UTF-8"))
}

/// Decodes ordered, NUL-separated component bytes (no terminator) back into a path.
///
/// Errors: [`PathError::MalformedKey`] or any normalizer rule the decoded path breaks.
pub fn decode_ordered_components(enc: &[u8]) -> Result<NormPath, PathError> {
    let mut s = String::with_capacity(enc.len());
    for (i, part) in enc.split(|b| *b == COMPONENT_DELIMITER).enumerate() {
        if i > 0 {
            s.push('/');
        }
        s.push_str(&decode_component(part)?);
    }
    normalize_with(&s, MAX_STORED_PATH_BYTES, MAX_STORED_PATH_COMPONENTS)
}

/// Decodes a canonical ordered key (`… 0x01`) back into a path.
///
/// Errors: [`PathError::MalformedKey`] for a missing terminator, reserved bytes, or non-UTF-8;
/// any normalizer rule the decoded path breaks.
pub fn decode_ordered_key(key: &[u8]) -> Result<NormPath, PathError> {
    match key.split_last() {
        Some((&EXACT_TERMINATOR, body)) => decode_ordered_components(body),
        _ => Err(PathError::MalformedKey("missing exact terminator")),
    }
}

/// Kind of direct child found under a directory prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildKey {
    /// An exact row `ordered(name) 0x01` — a published file.
    File(String),
    /// A rollup `ordered(name) 0x00` — an implicit directory with descendants.
    Dir(String),
}

/// Decodes the remainder of a key or holt `CommonPrefix` after a directory prefix into the direct
/// child name: `ordered(name) 0x01` is a file, `ordered(name) 0x00` a directory rollup.
///
/// Errors: [`PathError::MalformedKey`] if the remainder is not exactly one encoded component
/// followed by a terminator or delimiter.
pub fn decode_child(remainder: &[u8]) -> Result<ChildKey, PathError> {
    let (last, body) = remainder
        .split_last()
        .ok_or(PathError::MalformedKey("empty child remainder"))?;
    if body.iter().any(|b| *b < 0x02) {
        return Err(PathError::MalformedKey("child remainder spans components"));
    }
    let name = decode_component(body)?;
    check_component(&name)?;
    match *last {
        EXACT_TERMINATOR => Ok(ChildKey::File(name)),
        COMPONENT_DELIMITER => Ok(ChildKey::Dir(name)),
        _ => Err(PathError::MalformedKey("child remainder lacks delimiter")),
    }
}

/// Encodes a single child name (for list pagination markers): `ordered(name)`.
///
/// Errors: the name is empty, `.`/`..`, or contains `/`, backslash or NUL.
pub fn ordered_child_name(name: &str) -> Result<Vec<u8>, PathError> {
    check_component(name)?;
    if name.contains('/') {
        return Err(PathError::EmptyComponent);
    }
    if name.contains('\\') {
        return Err(PathError::Backslash);
    }
    if name.contains('\0') {
        return Err(PathError::Nul);
    }
    let mut out = Vec::with_capacity(name.len());
    push_ordered(&mut out, name);
    Ok(out)
}

#[cfg(test)]
mod decode_canonical_tests {
    use super::*;

    #[test]
    fn an_encoded_slash_inside_a_component_is_not_a_second_spelling_of_a_path() {
        // ordered("a/b") as ONE component: b'a'+1, b'/'+1, b'b'+1.
        let one_component = [0x62, 0x30, 0x63];
        assert!(decode_ordered_components(&one_component).is_err());
        let mut key = one_component.to_vec();
        key.push(0x01);
        assert!(decode_ordered_key(&key).is_err());
        // The canonical spelling still decodes.
        assert_eq!(
            decode_ordered_components(&[0x62, 0x00, 0x63])
                .unwrap()
                .as_str(),
            "a/b"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> NormPath {
        normalize(s).unwrap()
    }

    #[test]
    fn normalizer_rejects_every_invalid_shape_with_a_typed_error() {
        assert_eq!(normalize(""), Err(PathError::Empty));
        assert_eq!(normalize("/a"), Err(PathError::Absolute));
        assert_eq!(normalize("a//b"), Err(PathError::EmptyComponent));
        assert_eq!(normalize("a/"), Err(PathError::EmptyComponent));
        assert_eq!(normalize("./a"), Err(PathError::DotComponent));
        assert_eq!(normalize("a/.."), Err(PathError::DotDotComponent));
        assert_eq!(normalize("a\\b"), Err(PathError::Backslash));
        assert_eq!(normalize("a\0b"), Err(PathError::Nul));
        assert_eq!(
            normalize(&"x".repeat(4097)),
            Err(PathError::TooLong { bytes: 4097 })
        );
        assert_eq!(
            normalize(&vec!["a"; 65].join("/")),
            Err(PathError::TooManyComponents { count: 65 })
        );
        assert!(normalize(&vec!["a"; 64].join("/")).is_ok());
        assert!(normalize(&"x".repeat(4096)).is_ok());
    }

    #[test]
    fn normalizer_does_no_case_or_unicode_folding() {
        let nfc = p("caf\u{e9}");
        let nfd = p("cafe\u{301}");
        assert_ne!(nfc, nfd);
        assert_ne!(ordered_key(&nfc), ordered_key(&nfd));
        assert_ne!(p("A"), p("a"));
        assert!(normalize("...").is_ok());
        assert!(normalize(".hidden").is_ok());
    }

    #[test]
    fn path_accessors_work() {
        let x = p("a/b/c.txt");
        assert_eq!(x.len_components(), 3);
        assert_eq!(x.file_name(), "c.txt");
        assert_eq!(x.parent(), Some(p("a/b")));
        assert_eq!(p("a").parent(), None);
        assert_eq!(p("a").join("b").unwrap(), p("a/b"));
        assert_eq!(p("a").join("b/c").unwrap(), p("a/b/c"));
        assert!(p("a").join("").is_err());
        assert!(p("a").join("..").is_err());
        assert!(x.starts_with_dir(&p("a")));
        assert!(x.starts_with_dir(&p("a/b")));
        assert!(!x.starts_with_dir(&p("a/b/c.txt")));
        assert!(!p("a/bc").starts_with_dir(&p("a/b")));
    }

    #[test]
    fn golden_ordered_key_bytes() {
        assert_eq!(ordered_key(&p("a")), vec![0x62, 0x01]);
        assert_eq!(ordered_key(&p("a/b")), vec![0x62, 0x00, 0x63, 0x01]);
        assert_eq!(dir_prefix(Some(&p("a/b"))), vec![0x62, 0x00, 0x63, 0x00]);
        assert_eq!(dir_prefix(None), Vec::<u8>::new());
        assert_eq!(ordered_components(&p("a/b")), vec![0x62, 0x00, 0x63]);
    }

    #[test]
    fn acceptance_order_puts_subtree_then_exact_then_longer_siblings() {
        let names = ["ab", "a\u{1}", "a", "a/b", "a/b/c"];
        let mut keys: Vec<(Vec<u8>, &str)> =
            names.iter().map(|n| (ordered_key(&p(n)), *n)).collect();
        keys.sort();
        let order: Vec<&str> = keys.iter().map(|(_, n)| *n).collect();
        assert_eq!(order, vec!["a/b/c", "a/b", "a", "a\u{1}", "ab"]);
        let child_prefix = dir_prefix(Some(&p("a")));
        assert!(ordered_key(&p("a/b")).starts_with(&child_prefix));
        assert!(!ordered_key(&p("ab")).starts_with(&child_prefix));
        assert!(!ordered_key(&p("a\u{1}")).starts_with(&child_prefix));
        for (x, _) in &keys {
            for (y, _) in &keys {
                if x != y {
                    assert!(!y.starts_with(x), "exact key is a prefix of another");
                }
            }
        }
    }

    #[test]
    fn decode_child_distinguishes_files_and_rollups() {
        assert_eq!(decode_child(&[0x62, 0x01]), Ok(ChildKey::File("a".into())));
        assert_eq!(decode_child(&[0x62, 0x00]), Ok(ChildKey::Dir("a".into())));
        assert!(decode_child(&[0x62, 0x00, 0x63, 0x01]).is_err());
        assert!(decode_child(&[0x01]).is_err());
        assert!(decode_child(&[]).is_err());
        assert!(decode_ordered_key(&[0x62]).is_err());
        assert!(decode_ordered_key(&[0x62, 0x00, 0x01]).is_err());
    }

    fn component() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._ \u{1}\u{7f}\u{e9}\u{4e2d}-]{1,6}"
            .prop_filter("dots", |c| c != "." && c != "..")
    }

    fn path_strategy() -> impl Strategy<Value = NormPath> {
        proptest::collection::vec(component(), 1..5).prop_map(|cs| p(&cs.join("/")))
    }

    proptest! {
        #[test]
        fn ordered_key_round_trips(path in path_strategy()) {
            let key = ordered_key(&path);
            prop_assert_eq!(decode_ordered_key(&key).unwrap(), path.clone());
            prop_assert_eq!(decode_ordered_components(&ordered_components(&path)).unwrap(), path);
        }

        #[test]
        fn key_order_is_subtree_first_component_order(a in path_strategy(), b in path_strategy()) {
            let (ka, kb) = (ordered_key(&a), ordered_key(&b));
            // Expected order: compare component-wise; at the first differing component compare
            // bytes; if one path is a proper prefix (ancestor) of the other, the descendant first.
            let ca: Vec<&str> = a.components().collect();
            let cb: Vec<&str> = b.components().collect();
            let mut expected = std::cmp::Ordering::Equal;
            for i in 0..ca.len().max(cb.len()) {
                match (ca.get(i), cb.get(i)) {
                    (Some(x), Some(y)) if x == y => continue,
                    (Some(x), Some(y)) => { expected = x.as_bytes().cmp(y.as_bytes()); break; }
                    (None, Some(_)) => { expected = std::cmp::Ordering::Greater; break; }
                    (Some(_), None) => { expected = std::cmp::Ordering::Less; break; }
                    (None, None) => break,
                }
            }
            prop_assert_eq!(ka.cmp(&kb), expected);
            if a != b {
                prop_assert!(!ka.starts_with(&kb) && !kb.starts_with(&ka));
            }
        }

        #[test]
        fn child_prefix_matches_exactly_the_descendants(a in path_strategy(), d in path_strategy()) {
            let inside = ordered_key(&a).starts_with(&dir_prefix(Some(&d)));
            prop_assert_eq!(inside, a.starts_with_dir(&d));
        }
    }
}
