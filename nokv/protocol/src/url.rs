//! Percent-encoding of the parts of a `/v1/` URL (RFC 3986): the one encoder of a path segment
//! or query value, shared by the server's links and the remote clients' requests.

/// Percent-encodes one path segment or query value: every byte but the RFC 3986 unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`) becomes `%XX` (uppercase hex).
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a workbench-relative path, keeping its `/` separators.
pub fn encode_path(p: &str) -> String {
    p.split('/')
        .map(encode_component)
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unreserved_characters_stay() {
        assert_eq!(encode_component("ok-_.~1Z"), "ok-_.~1Z");
        assert_eq!(encode_component("a b/c%é"), "a%20b%2Fc%25%C3%A9");
        assert_eq!(encode_path("out/a b/c?"), "out/a%20b/c%3F");
    }
}
