//! Pattern sets, basename globs and line matching for `workbench_grep` (docs/workbench.md, "grep").
//!
//! Grep is a case-insensitive literal substring search per line, never a regex. Lines are split
//! like structured text reads ([`super::shape::split_lines`]): `\n` and `\r\n` end a line.

use super::shape::split_lines;
use nokv_protocol::errors::{ToolError, ToolResult};

/// Maximum number of alternatives a `|`-separated `pattern` splits into, and maximum length of
/// `patterns` (docs/workbench.md: `patterns` ≤16).
pub const MAX_PATTERNS: usize = 16;

/// Maximum snippet length in characters (Unicode scalar values) per match.
pub const SNIPPET_CHARS: usize = 240;

/// Builds the grep pattern set: `pattern` followed by `patterns`.
///
/// When `patterns` is absent and `pattern` contains `|`, `pattern` is split on `|` into at most
/// [`MAX_PATTERNS`] alternatives; when `patterns` is present, `pattern` is taken literally (a `|`
/// in it is an ordinary character) and the set may hold `1 + patterns.len()` entries. Duplicates
/// under case-insensitive (Unicode lowercase) comparison are dropped, keeping the first spelling.
///
/// Errors (`InvalidArguments`): an empty `pattern`, an empty alternative (`"a||b"`, `"a|"`), an
/// empty entry in `patterns`, more than [`MAX_PATTERNS`] alternatives or `patterns` entries.
pub fn pattern_set(pattern: &str, patterns: Option<&[String]>) -> ToolResult<Vec<String>> {
    if pattern.is_empty() {
        return Err(ToolError::invalid_arguments("pattern must not be empty")
            .with_detail("field", "pattern"));
    }
    let mut raw: Vec<&str> = Vec::new();
    match patterns {
        None if pattern.contains('|') => {
            let alternatives: Vec<&str> = pattern.split('|').collect();
            if alternatives.len() > MAX_PATTERNS {
                return Err(ToolError::invalid_arguments(format!(
                    "pattern splits into {} alternatives at `|`; at most {MAX_PATTERNS} are allowed",
                    alternatives.len()
                ))
                .with_detail("field", "pattern"));
            }
            if alternatives.iter().any(|a| a.is_empty()) {
                return Err(ToolError::invalid_arguments(
                    "pattern has an empty alternative (`||` or a leading/trailing `|`); remove it, \
                     or pass literal patterns in `patterns`",
                )
                .with_detail("field", "pattern"));
            }
            raw.extend(alternatives);
        }
        None => raw.push(pattern),
        Some(list) => {
            if list.len() > MAX_PATTERNS {
                return Err(ToolError::invalid_arguments(format!(
                    "patterns has {} entries; at most {MAX_PATTERNS} are allowed",
                    list.len()
                ))
                .with_detail("field", "patterns"));
            }
            if list.iter().any(String::is_empty) {
                return Err(ToolError::invalid_arguments(
                    "patterns must not contain empty strings",
                )
                .with_detail("field", "patterns"));
            }
            raw.push(pattern);
            raw.extend(list.iter().map(String::as_str));
        }
    }
    let mut seen: Vec<String> = Vec::with_capacity(raw.len());
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for p in raw {
        let folded = p.to_lowercase();
        if !seen.contains(&folded) {
            seen.push(folded);
            out.push(p.to_string());
        }
    }
    Ok(out)
}

/// Validates a basename glob: non-empty, no `/`, backslash or NUL. Only `*` (any run of
/// characters, possibly empty) and `?` (exactly one character) are special; every other
/// character, including `[`, matches itself.
///
/// Errors: `InvalidArguments` naming the field `glob`.
pub fn validate_glob(glob: &str) -> ToolResult<()> {
    if glob.is_empty() {
        return Err(ToolError::invalid_arguments(
            "glob must not be empty; omit it to match every file",
        )
        .with_detail("field", "glob"));
    }
    if glob.contains(['/', '\\', '\0']) {
        return Err(ToolError::invalid_arguments(
            "glob filters file names only and must not contain `/`, `\\` or NUL; use `path` to \
             choose a directory",
        )
        .with_detail("field", "glob"));
    }
    Ok(())
}

/// Whether `basename` matches `glob` (`*` and `?` wildcards, case-sensitive, whole name).
/// Runs in O(len(glob) × len(basename)) worst case, without recursion.
pub fn glob_matches(glob: &str, basename: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let s: Vec<char> = basename.chars().collect();
    let (mut gi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None; // (glob index after '*', name index)
    while si < s.len() {
        if gi < g.len() && (g[gi] == '?' || (g[gi] != '*' && g[gi] == s[si])) {
            gi += 1;
            si += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi + 1, si));
            gi += 1;
        } else if let Some((after_star, matched_from)) = star {
            gi = after_star;
            si = matched_from + 1;
            star = Some((after_star, si));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

/// Finds matching lines: every line that contains at least one of `patterns` as a
/// case-insensitive (Unicode lowercase) literal substring. Returns `(line_number, snippet)`
/// pairs in line order, line numbers from 1, snippet = the first [`SNIPPET_CHARS`] characters of
/// the line (without its terminator). Empty patterns never match.
pub fn grep_lines(text: &str, patterns: &[String]) -> Vec<(u64, String)> {
    let folded: Vec<String> = patterns
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| p.to_lowercase())
        .collect();
    if folded.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (i, line) in split_lines(text).enumerate() {
        let lower = line.to_lowercase();
        if folded.iter().any(|p| lower.contains(p.as_str())) {
            out.push(((i as u64) + 1, line.chars().take(SNIPPET_CHARS).collect()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nokv_protocol::errors::ErrorCode;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pipe_pattern_splits_into_alternatives() {
        assert_eq!(
            pattern_set("error|warn|Fatal", None).unwrap(),
            strings(&["error", "warn", "Fatal"])
        );
    }

    #[test]
    fn pipe_is_literal_when_patterns_given() {
        let extra = strings(&["b"]);
        assert_eq!(
            pattern_set("a|c", Some(&extra)).unwrap(),
            strings(&["a|c", "b"])
        );
    }

    #[test]
    fn case_insensitive_duplicates_are_dropped_keeping_first() {
        let extra = strings(&["ERROR", "warn", "Warn"]);
        assert_eq!(
            pattern_set("Error", Some(&extra)).unwrap(),
            strings(&["Error", "warn"])
        );
        assert_eq!(pattern_set("x|X|y", None).unwrap(), strings(&["x", "y"]));
    }

    #[test]
    fn empty_patterns_are_invalid_arguments() {
        for p in ["", "a||b", "|a", "a|"] {
            assert_eq!(
                pattern_set(p, None).unwrap_err().code,
                ErrorCode::InvalidArguments,
                "{p:?}"
            );
        }
        let extra = strings(&["ok", ""]);
        assert_eq!(
            pattern_set("a", Some(&extra)).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
    }

    #[test]
    fn more_than_16_alternatives_is_invalid_arguments() {
        let sixteen: Vec<String> = (0..16).map(|i| format!("p{i}")).collect();
        assert_eq!(pattern_set(&sixteen.join("|"), None).unwrap().len(), 16);
        let seventeen: Vec<String> = (0..17).map(|i| format!("p{i}")).collect();
        assert_eq!(
            pattern_set(&seventeen.join("|"), None).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            pattern_set("x", Some(&seventeen)).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(pattern_set("x", Some(&sixteen)).unwrap().len(), 17);
    }

    #[test]
    fn glob_star_and_question_mark_match_basenames() {
        assert!(glob_matches("*.csv", "penguins.csv"));
        assert!(glob_matches("*.csv", ".csv"));
        assert!(!glob_matches("*.csv", "penguins.csv.bak"));
        assert!(glob_matches("run-??.log", "run-01.log"));
        assert!(!glob_matches("run-??.log", "run-1.log"));
        assert!(glob_matches("*a*b*", "xxaxxbxx"));
        assert!(!glob_matches("*a*b", "xxbxxa"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("?", "é"));
        assert!(glob_matches("[x].txt", "[x].txt"));
        assert!(!glob_matches("[x].txt", "x.txt"));
        assert!(!glob_matches("*.CSV", "a.csv"));
    }

    #[test]
    fn glob_with_separator_is_invalid_arguments() {
        for g in ["a/b", "dir\\*.txt", "", "a\0"] {
            assert_eq!(
                validate_glob(g).unwrap_err().code,
                ErrorCode::InvalidArguments,
                "{g:?}"
            );
        }
        assert!(validate_glob("*.json").is_ok());
    }

    #[test]
    fn grep_is_case_insensitive_literal_per_line() {
        let text = "INFO start\r\nwarn: disk a.b\nError: x\nnothing\n";
        let hits = grep_lines(text, &strings(&["error", "A.B"]));
        assert_eq!(
            hits,
            vec![
                (2, "warn: disk a.b".to_string()),
                (3, "Error: x".to_string())
            ]
        );
        assert!(grep_lines(text, &strings(&["a.*b"])).is_empty());
    }

    #[test]
    fn grep_snippet_is_first_240_characters() {
        let line = "é".repeat(300) + "needle";
        let hits = grep_lines(&line, &strings(&["NEEDLE"]));
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 1);
        assert_eq!(hits[0].1.chars().count(), 240);
        assert!(hits[0].1.chars().all(|c| c == 'é'));
    }

    #[test]
    fn grep_unicode_case_folding_matches() {
        let hits = grep_lines("Größe: ÄPFEL\n", &strings(&["äpfel"]));
        assert_eq!(hits.len(), 1);
    }
}
