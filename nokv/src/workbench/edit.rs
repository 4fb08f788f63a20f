//! Literal string replacement for `workbench_edit` (WORKBENCH.md, "edit").
//!
//! Matching is byte-exact and literal: no regex, no `$` substitution, no whitespace, case or
//! line-ending tolerance. Matches are found left to right and never overlap. When nothing
//! matches, the error carries near-miss hints so an agent can fix its `old_string`.

use super::errors::{ErrorCode, ToolError, ToolResult};
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
/// `details.hints` is an array of `{kind, line_number}` near misses, where `kind` is
/// `"line_endings"` (matches once `\r\n` is treated as `\n`), `"indentation"` (matches once
/// leading spaces/tabs of every line are ignored) or `"case"` (matches ignoring ASCII case), and
/// `line_number` (from 1) is the line of the body where that near miss starts; `AmbiguousEdit`
/// with `details.matches` (the count) when `old` occurs more than once and `replace_all` is false.
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

fn line_number_at(haystack: &str, byte_pos: usize) -> usize {
    haystack.as_bytes()[..byte_pos.min(haystack.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn hint(kind: &str, line_number: usize) -> Value {
    let mut m = Map::new();
    m.insert("kind".into(), Value::from(kind));
    m.insert("line_number".into(), Value::from(line_number));
    Value::Object(m)
}

fn strip_indentation(s: &str) -> String {
    s.split('\n')
        .map(|line| line.trim_start_matches([' ', '\t']))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Near-miss hints for a failed literal match. Every transformation keeps the number of `\n`
/// characters before a position, so line numbers in the transformed text equal the body's.
fn near_miss_hints(text: &str, old: &str) -> Vec<Value> {
    let mut hints = Vec::new();

    let t = text.replace("\r\n", "\n");
    let o = old.replace("\r\n", "\n");
    if (t.len() != text.len() || o.len() != old.len()) && !o.is_empty() {
        if let Some(pos) = t.find(&o) {
            hints.push(hint("line_endings", line_number_at(&t, pos)));
        }
    }

    let t = strip_indentation(text);
    let o = strip_indentation(old);
    if !o.trim().is_empty() {
        if let Some(pos) = t.find(&o) {
            hints.push(hint("indentation", line_number_at(&t, pos)));
        }
    }

    let t = text.to_ascii_lowercase();
    let o = old.to_ascii_lowercase();
    if let Some(pos) = t.find(&o) {
        hints.push(hint("case", line_number_at(&t, pos)));
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

    #[test]
    fn no_match_hints_line_ending_mismatch() {
        let e =
            apply_edit("first\r\nsecond\r\nthird\r\n", "second\nthird", "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        let hints = e.details["hints"].as_array().unwrap();
        assert_eq!(hints.len(), 1);
        assert_eq!(hints[0]["kind"], "line_endings");
        assert_eq!(hints[0]["line_number"], 2);
    }

    #[test]
    fn no_match_hints_indentation_mismatch() {
        let text = "fn main() {\n    let x = 1;\n    let y = 2;\n}\n";
        let e = apply_edit(text, "let x = 1;\nlet y = 2;", "x", false).unwrap_err();
        assert_eq!(e.code, ErrorCode::NoMatch);
        let hints = e.details["hints"].as_array().unwrap();
        assert_eq!(hints, &vec![hint("indentation", 2)]);
    }

    #[test]
    fn no_match_hints_case_mismatch() {
        let e = apply_edit("one\ntwo\nHello World\n", "hello world", "x", false).unwrap_err();
        let hints = e.details["hints"].as_array().unwrap();
        assert_eq!(hints, &vec![hint("case", 3)]);
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
