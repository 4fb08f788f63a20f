//! Text for a terminal. Names that agents choose — paths, tags, workbench and snapshot names —
//! may hold control characters (only NUL is refused), so a human-readable listing (`nokv ls`,
//! `tree`, `log`, `diff --format table`, the CLI's plain error line) shows them escaped: a name
//! can then neither move the cursor, retitle or clear a terminal, nor reverse the text after it.
//! JSON output escapes control characters itself and never goes through this. A leaf.

use std::borrow::Cow;

/// `s` with every control character (C0, DEL, C1) and every bidirectional formatting character
/// (U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) written as a Rust-style `\u{…}` escape;
/// borrowed when nothing needs escaping. A backslash is kept as it is.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if needs_escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_and_bidi_characters_are_escaped_and_the_rest_is_kept() {
        assert_eq!(printable("plain/ü 名.txt"), "plain/ü 名.txt");
        assert!(matches!(printable("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            printable("\u{1b}]0;PWNED\u{7}\u{1b}[2J.txt"),
            "\\u{1b}]0;PWNED\\u{7}\\u{1b}[2J.txt"
        );
        assert_eq!(
            printable("a\nb\tc\u{7f}\u{9b}"),
            "a\\u{a}b\\u{9}c\\u{7f}\\u{9b}"
        );
        assert_eq!(printable("x\u{202e}txt.exe"), "x\\u{202e}txt.exe");
    }
}
