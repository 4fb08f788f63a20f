//! Literal string replacement for `workbench_edit` (docs/workbench.md, "edit").
//!
//! Matching is byte-exact and literal: no regex, no `$` substitution, no whitespace, case or
//! line-ending tolerance. Matches are found left to right and never overlap. When nothing
//! matches, the error carries near-miss hints so an agent can fix its `old_string`.

use nokv_protocol::errors::{ErrorCode, ToolError, ToolResult};
use serde_json::{Map, Value};

/// The result of a successful [`apply_edit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditOutcome {
    /// The whole new body text.
    pub new_text: String,
    /// How many occurrences were replaced (1 unless `replace_all`).
    pub replacements: usize,
}

/// Requires a body to be UTF-8 text for `edit`.
///
/// Errors: `InvalidUtf8` (without `details.path`; callers that know the presentation path should
/// prefer [`ToolError::invalid_utf8`] via `map_err`).
pub fn require_utf8(bytes: &[u8]) -> ToolResult<&str> {
    std::str::from_utf8(bytes).map_err(|e| {
        ToolError::new(
            ErrorCode::InvalidUtf8,
            format!(
                "the file is not valid UTF-8 text (first invalid byte at offset {}); edit only \
                 works on text, replace the file with put_file instead",
                e.valid_up_to()
            ),
        )
    })
}

/// Replaces `old` with `new` in `text`, literally.
///
/// With `replace_all = false` exactly one occurrence must exist; with `replace_all = true` every
/// non-overlapping occurrence (left to right) is replaced. `new` is inserted verbatim (`$1`, `$&`
/// and `\` are ordinary characters).
///
/// Errors: `InvalidArguments` when `old` is empty; `NoMatch` when `old` does not occur —
/// `details.hints` lists near misses (where `old` would match once line
/// endings, tabs vs spaces, indentation, blank widths, trailing whitespace, Unicode
/// normalization or letter case are ignored; at most [`MAX_HINTS`], each
/// `{kind, differences, line_number, end_line_number, message, text?}` naming the difference(s)
/// (see [`Difference`]), the 1-based lines of the candidate and its exact text);
/// `AmbiguousEdit` with `details.matches` (the count) when `old` occurs more than once and
/// `replace_all` is false.
pub fn apply_edit(text: &str, old: &str, new: &str, replace_all: bool) -> ToolResult<EditOutcome> {
    if old.is_empty() {
        return Err(ToolError::invalid_arguments(
            "old_string must not be empty; quote the exact text to replace",
        )
        .with_detail("field", "old_string"));
    }
    let positions: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
    match positions.len() {
        0 => {
            let hints = near_miss_hints(text, old);
            let advice = if hints.is_empty() {
                "read the file again and copy the exact text, including whitespace and line breaks"
            } else {
                "a near match exists (see details.hints); copy the exact bytes of the file, \
                 including indentation, case and line endings"
            };
            Err(ToolError::new(
                ErrorCode::NoMatch,
                format!("old_string was not found in the file; {advice}"),
            )
            .with_detail("hints", Value::Array(hints)))
        }
        n if n > 1 && !replace_all => Err(ToolError::new(
            ErrorCode::AmbiguousEdit,
            format!(
                "old_string occurs {n} times; add surrounding context so it matches exactly once, \
                 or set replace_all=true to replace every occurrence"
            ),
        )
        .with_detail("matches", n)),
        n => {
            let mut out = String::with_capacity(
                text.len()
                    .saturating_add(n.saturating_mul(new.len()))
                    .saturating_sub(n.saturating_mul(old.len())),
            );
            let mut last = 0;
            for &pos in &positions {
                out.push_str(&text[last..pos]);
                out.push_str(new);
                last = pos + old.len();
            }
            out.push_str(&text[last..]);
            Ok(EditOutcome {
                new_text: out,
                replacements: n,
            })
        }
    }
}

/// Most near-miss candidates one `NoMatch` reports.
pub const MAX_HINTS: usize = 5;
/// Longest candidate text (bytes) a hint quotes in `text`; longer candidates omit it.
pub const MAX_HINT_TEXT_BYTES: usize = 4096;

/// One difference a near-miss hint names (the `kind` / `differences` strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Difference {
    /// The file uses CRLF (or CR) line ends where `old_string` uses LF, or the reverse.
    LineEndings,
    /// A run of blanks uses tabs on one side and spaces on the other.
    TabsVsSpaces,
    /// Leading blanks of a line differ in width (spaces only).
    Indentation,
    /// Blanks inside a line differ in width (spaces only).
    Whitespace,
    /// Blanks at the end of a line differ (present on one side only, or different).
    TrailingWhitespace,
    /// The same text in another Unicode normalization form (NFC vs NFD).
    UnicodeNormalization,
    /// Letter case differs.
    Case,
}

impl Difference {
    /// The hint string, e.g. `"line_endings"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Difference::LineEndings => "line_endings",
            Difference::TabsVsSpaces => "tabs_vs_spaces",
            Difference::Indentation => "indentation",
            Difference::Whitespace => "whitespace",
            Difference::TrailingWhitespace => "trailing_whitespace",
            Difference::UnicodeNormalization => "unicode_normalization",
            Difference::Case => "case",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Difference::LineEndings => "line endings (CRLF vs LF)",
            Difference::TabsVsSpaces => "tabs vs spaces",
            Difference::Indentation => "indentation width",
            Difference::Whitespace => "the width of blanks inside a line",
            Difference::TrailingWhitespace => "trailing whitespace",
            Difference::UnicodeNormalization => "Unicode normalization (NFC vs NFD)",
            Difference::Case => "letter case",
        }
    }
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// One line of a text split for near-miss comparison: leading blanks, the body between them
/// and the trailing blanks, and the raw terminator (`"\r\n"`, `"\n"`, `"\r"` or `""` at the
/// end). A line of blanks only is all trailing. Byte offsets are relative to the split text.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    start: usize,
    lead: &'a str,
    body: &'a str,
    trail: &'a str,
    term: &'a str,
}

fn split_lines_raw(s: &str) -> Vec<Line<'_>> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    loop {
        let at_end = i >= bytes.len();
        let term_len = if at_end {
            0
        } else if bytes[i] == b'\n' {
            1
        } else if bytes[i] == b'\r' {
            if bytes.get(i + 1) == Some(&b'\n') {
                2
            } else {
                1
            }
        } else {
            i += 1;
            continue;
        };
        let content = &s[start..i];
        let lead_len = content.len() - content.trim_start_matches(is_blank).len();
        let trail_len = content.len() - content.trim_end_matches(is_blank).len();
        let (lead_len, trail_len) = if lead_len == content.len() {
            (0, content.len())
        } else {
            (lead_len, trail_len)
        };
        out.push(Line {
            start,
            lead: &content[..lead_len],
            body: &content[lead_len..content.len() - trail_len],
            trail: &content[content.len() - trail_len..],
            term: &s[i..i + term_len],
        });
        if at_end {
            break;
        }
        i += term_len;
        start = i;
        if i >= bytes.len() {
            break;
        }
    }
    out
}

/// The near-miss normal form: line ends as `\n`, leading and trailing blanks dropped, blank runs
/// inside a line as one space, every other character canonically decomposed (NFD) and
/// lowercased. `map` (when given) receives, for each output byte, the byte offset of the
/// source character it came from (a `\r\n` maps to its `\r`).
fn near_miss_form(s: &str, mut map: Option<&mut Vec<u32>>) -> String {
    let mut out = String::with_capacity(s.len());
    let emit = |out: &mut String, c: char, src: usize, map: &mut Option<&mut Vec<u32>>| {
        let before = out.len();
        out.push(c);
        if let Some(m) = map.as_deref_mut() {
            m.extend(std::iter::repeat_n(src as u32, out.len() - before));
        }
    };
    for line in split_lines_raw(s) {
        let body_start = line.start + line.lead.len();
        let mut in_blank = false;
        for (i, c) in line.body.char_indices() {
            if is_blank(c) {
                if !in_blank {
                    emit(&mut out, ' ', body_start + i, &mut map);
                }
                in_blank = true;
                continue;
            }
            in_blank = false;
            unicode_normalization::char::decompose_canonical(c, |d| {
                for l in d.to_lowercase() {
                    emit(&mut out, l, body_start + i, &mut map);
                }
            });
        }
        if !line.term.is_empty() {
            let term_at = body_start + line.body.len() + line.trail.len();
            emit(&mut out, '\n', term_at, &mut map);
        }
    }
    out
}

/// Number of line terminators (`\r\n`, `\n`, `\r`) before `offset`, plus one.
fn line_of(text: &str, offset: usize) -> usize {
    let bytes = &text.as_bytes()[..offset.min(text.len())];
    let mut n = 1;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' || (*b == b'\r' && bytes.get(i + 1) != Some(&b'\n')) {
            n += 1;
        }
    }
    // A `\r` at the very end whose `\n` lies at or after `offset` is still a line end.
    if bytes.last() == Some(&b'\r') {
        n -= usize::from(text.as_bytes().get(bytes.len()) == Some(&b'\n'));
    }
    n
}

/// The differences between a candidate `seg` of the file and `old`, whose near-miss forms are
/// equal. Lines are compared pairwise: terminators, leading, inner and trailing blank runs, and
/// the remaining characters (normalization form, then case).
fn classify(seg: &str, old: &str) -> Vec<Difference> {
    let mut found = std::collections::BTreeSet::new();
    let (a, b) = (split_lines_raw(seg), split_lines_raw(old));
    if a.len() != b.len() {
        // Only possible when a candidate ends in the middle of a terminator; name what differs
        // across the whole strings.
        found.insert(Difference::LineEndings);
    }
    let tabs = |x: &str, y: &str| x.contains('\t') || y.contains('\t');
    for (x, y) in a.iter().zip(b.iter()) {
        if x.term != y.term && !x.term.is_empty() && !y.term.is_empty() {
            found.insert(Difference::LineEndings);
        }
        if x.lead != y.lead {
            found.insert(if tabs(x.lead, y.lead) {
                Difference::TabsVsSpaces
            } else {
                Difference::Indentation
            });
        }
        if x.trail != y.trail {
            found.insert(Difference::TrailingWhitespace);
        }
        let runs = |s: &'_ str| -> (Vec<String>, String) {
            let mut runs = Vec::new();
            let mut text = String::new();
            let mut run = String::new();
            for c in s.chars() {
                if is_blank(c) {
                    run.push(c);
                } else {
                    if !run.is_empty() {
                        runs.push(std::mem::take(&mut run));
                        text.push(' ');
                    }
                    text.push(c);
                }
            }
            (runs, text)
        };
        let ((xr, xt), (yr, yt)) = (runs(x.body), runs(y.body));
        for (r, q) in xr.iter().zip(yr.iter()) {
            if r != q {
                found.insert(if tabs(r, q) {
                    Difference::TabsVsSpaces
                } else {
                    Difference::Whitespace
                });
            }
        }
        if xt != yt {
            use unicode_normalization::UnicodeNormalization;
            let (xd, yd): (String, String) = (xt.nfd().collect(), yt.nfd().collect());
            if xd == yd {
                found.insert(Difference::UnicodeNormalization);
            } else if xt.to_lowercase() == yt.to_lowercase() {
                found.insert(Difference::Case);
            } else {
                if xd != xt || yd != yt {
                    found.insert(Difference::UnicodeNormalization);
                }
                found.insert(Difference::Case);
            }
        }
    }
    found.into_iter().collect()
}

/// Near-miss hints for a failed literal match: where `old` would match once line endings, tabs
/// vs spaces, indentation, blank widths, trailing whitespace, Unicode normalization (NFC/NFD)
/// and letter case are ignored, at most [`MAX_HINTS`] candidates, each
/// `{kind, differences, line_number, end_line_number, message, text?}`: `differences` names
/// every difference found (see [`Difference`]), `kind` is the first of them, the line numbers
/// (from 1) are the candidate's first and last lines in the file, and `text` quotes the
/// candidate's exact bytes from the file (when at most [`MAX_HINT_TEXT_BYTES`]) so the caller
/// can copy them. Nothing is applied.
fn near_miss_hints(text: &str, old: &str) -> Vec<Value> {
    let needle = near_miss_form(old, None);
    if needle.trim().is_empty() {
        return Vec::new();
    }
    let mut map = Vec::new();
    let hay = near_miss_form(text, Some(&mut map));
    let old_leads_blank = old.starts_with(is_blank);
    let old_trails_blank = old.ends_with(is_blank);
    let mut hints = Vec::new();
    for (pos, m) in hay.match_indices(needle.as_str()).take(MAX_HINTS) {
        let (Some(&first), Some(&last)) = (map.get(pos), map.get(pos + m.len() - 1)) else {
            continue;
        };
        let mut start = first as usize;
        let last = last as usize;
        let mut end = if text.as_bytes().get(last..last + 2) == Some(b"\r\n") {
            last + 2
        } else {
            last + text[last..].chars().next().map_or(1, char::len_utf8)
        };
        // Take in the blanks the normal form dropped when `old` has them too.
        if old_leads_blank {
            let line_start = text[..start].rfind(['\n', '\r']).map_or(0, |i| i + 1);
            if text[line_start..start].chars().all(is_blank) {
                start = line_start;
            }
        }
        if old_trails_blank {
            end += text[end..].len() - text[end..].trim_start_matches(is_blank).len();
        }
        let seg = &text[start..end];
        let differences = classify(seg, old);
        let Some(kind) = differences.first().copied() else {
            continue;
        };
        let line_number = line_of(text, start);
        let end_line_number = line_of(text, end.saturating_sub(1).max(start));
        let names: Vec<&str> = differences.iter().map(|d| d.describe()).collect();
        let lines = if end_line_number > line_number {
            format!("lines {line_number}-{end_line_number}")
        } else {
            format!("line {line_number}")
        };
        let mut h = Map::new();
        h.insert("kind".into(), Value::from(kind.as_str()));
        h.insert(
            "differences".into(),
            Value::from(differences.iter().map(|d| d.as_str()).collect::<Vec<_>>()),
        );
        h.insert("line_number".into(), Value::from(line_number));
        h.insert("end_line_number".into(), Value::from(end_line_number));
        h.insert(
            "message".into(),
            Value::from(format!(
                "old_string matches {lines} when {} {} ignored; copy the file's exact text (see `text`)",
                names.join(", "),
                if names.len() == 1 { "is" } else { "are" }
            )),
        );
        if seg.len() <= MAX_HINT_TEXT_BYTES {
            h.insert("text".into(), Value::from(seg));
        }
        hints.push(Value::Object(h));
    }
    hints
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_match_is_replaced() {
        let out = apply_edit("alpha beta gamma", "beta", "BETA", false).unwrap();
        assert_eq!(out.new_text, "alpha BETA gamma");
        assert_eq!(out.replacements, 1);
    }

    #[test]
    fn ambiguous_edit_reports_match_count() {
        let e = apply_edit("a-b-a-b-a", "a", "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::AmbiguousEdit);
        assert_eq!(e.details["matches"], 3);
        assert!(!e.retryable());
    }

    #[test]
    fn replace_all_replaces_non_overlapping_left_to_right() {
        let out = apply_edit("aaaaa", "aa", "b", true).unwrap();
        assert_eq!(out.new_text, "bba");
        assert_eq!(out.replacements, 2);
    }

    #[test]
    fn dollar_sequences_in_new_string_are_literal() {
        let out = apply_edit("price: X", "X", "$1 $& $$ ${name} \\1", false).unwrap();
        assert_eq!(out.new_text, "price: $1 $& $$ ${name} \\1");
    }

    #[test]
    fn regex_metacharacters_in_old_string_are_literal() {
        let out = apply_edit("a.b a+b", "a+b", "c", false).unwrap();
        assert_eq!(out.new_text, "a.b c");
        let e = apply_edit("abc", "a.c", "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
    }

    #[test]
    fn empty_old_string_is_invalid_arguments() {
        let e = apply_edit("abc", "", "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
    }

    #[test]
    fn identical_replacement_still_counts_but_text_is_unchanged() {
        let out = apply_edit("keep me", "keep", "keep", false).unwrap();
        assert_eq!(out.new_text, "keep me");
        assert_eq!(out.replacements, 1);
    }

    /// The single hint of a `NoMatch`: `(differences, line_number, end_line_number, text)`.
    fn only_hint(text: &str, old: &str) -> (Vec<String>, u64, u64, Option<String>) {
        let e = apply_edit(text, old, "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        let hints = e.details["hints"].as_array().unwrap();
        assert_eq!(hints.len(), 1, "{hints:?}");
        let h = &hints[0];
        let diffs: Vec<String> = h["differences"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_string())
            .collect();
        assert_eq!(h["kind"], diffs[0]);
        assert!(h["message"].as_str().unwrap().contains("line"));
        (
            diffs,
            h["line_number"].as_u64().unwrap(),
            h["end_line_number"].as_u64().unwrap(),
            h.get("text").and_then(Value::as_str).map(str::to_string),
        )
    }

    #[test]
    fn no_match_hints_line_ending_mismatch() {
        let (d, line, end, text) = only_hint("first\r\nsecond\r\nthird\r\n", "second\nthird");
        assert_eq!(d, ["line_endings"]);
        assert_eq!((line, end), (2, 3));
        assert_eq!(text.as_deref(), Some("second\r\nthird"));
    }

    #[test]
    fn no_match_hints_indentation_mismatch() {
        let text = "fn main() {\n    let x = 1;\n    let y = 2;\n}\n";
        let (d, line, end, _) = only_hint(text, "let x = 1;\nlet y = 2;");
        assert_eq!(d, ["indentation"]);
        assert_eq!((line, end), (2, 3));
    }

    #[test]
    fn no_match_hints_tabs_vs_spaces() {
        let text = "def f():\n\tif x:\n\t\treturn 1\n";
        let (d, line, end, text) = only_hint(text, "    if x:\n        return 1");
        assert_eq!(d, ["tabs_vs_spaces"]);
        assert_eq!((line, end), (2, 3));
        assert_eq!(text.as_deref(), Some("\tif x:\n\t\treturn 1"));
        // Inside a line too.
        let (d, ..) = only_hint("key\tvalue\n", "key    value");
        assert_eq!(d, ["tabs_vs_spaces"]);
    }

    #[test]
    fn no_match_hints_trailing_whitespace() {
        let (d, line, ..) = only_hint("a\nb = 1  \nc = 2\n", "b = 1\nc = 2");
        assert_eq!(d, ["trailing_whitespace"]);
        assert_eq!(line, 2);
        let (d, ..) = only_hint("a\nb = 1\nc\n", "b = 1 \nc");
        assert_eq!(d, ["trailing_whitespace"]);
    }

    #[test]
    fn no_match_hints_unicode_normalization() {
        // The file holds NFD ("e" + U+0301), old_string NFC (U+00E9).
        let (d, line, ..) = only_hint("x\ncafe\u{301} au lait\n", "caf\u{e9} au lait");
        assert_eq!(d, ["unicode_normalization"]);
        assert_eq!(line, 2);
        let (d, ..) = only_hint("caf\u{e9}\n", "cafe\u{301}");
        assert_eq!(d, ["unicode_normalization"]);
    }

    #[test]
    fn no_match_hints_case_mismatch() {
        let (d, line, ..) = only_hint("one\ntwo\nHello World\n", "hello world");
        assert_eq!(d, ["case"]);
        assert_eq!(line, 3);
        // Beyond ASCII.
        let (d, ..) = only_hint("ÄRGER\n", "ärger");
        assert_eq!(d, ["case"]);
    }

    #[test]
    fn no_match_hints_name_every_difference_of_crlf_and_tab_files() {
        // The issue's case: CRLF line ends and tab indentation in the file, LF and spaces in
        // old_string.
        let text = "fn main() {\r\n\tlet x = 1;\r\n\tlet y = 2;\r\n}\r\n";
        let (d, line, end, text) = only_hint(text, "    let x = 1;\n    let y = 2;");
        assert_eq!(d, ["line_endings", "tabs_vs_spaces"]);
        assert_eq!((line, end), (2, 3));
        assert_eq!(text.as_deref(), Some("\tlet x = 1;\r\n\tlet y = 2;"));
    }

    #[test]
    fn no_match_hints_list_several_candidates_and_never_apply_the_edit() {
        let text = "Alpha\nx\nALPHA\nalphA\n";
        let e = apply_edit(text, "alpha", "beta", false).unwrap_err();
        let hints = e.details["hints"].as_array().unwrap();
        let lines: Vec<u64> = hints
            .iter()
            .map(|h| h["line_number"].as_u64().unwrap())
            .collect();
        assert_eq!(lines, [1, 3, 4]);
        let many = "A\n".repeat(50);
        let e = apply_edit(&many, "a", "b", false).unwrap_err();
        assert_eq!(e.details["hints"].as_array().unwrap().len(), MAX_HINTS);
    }

    #[test]
    fn lone_carriage_returns_count_as_line_ends() {
        let (d, line, ..) = only_hint("a\rb\rc", "b\nc");
        assert_eq!(d, ["line_endings"]);
        assert_eq!(line, 2);
    }

    #[test]
    fn no_match_without_near_miss_has_empty_hints() {
        let e = apply_edit("abc", "zzz", "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        assert_eq!(e.details["hints"], serde_json::json!([]));
    }

    #[test]
    fn multibyte_text_is_replaced_on_char_boundaries() {
        let out = apply_edit("héllo wörld", "wörld", "мир", false).unwrap();
        assert_eq!(out.new_text, "héllo мир");
    }

    #[test]
    fn require_utf8_rejects_invalid_bytes() {
        assert_eq!(require_utf8(b"ok").unwrap(), "ok");
        let e = require_utf8(&[b'a', 0xc3]).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidUtf8);
    }
}
