//! Payload decoding for `workbench_put_file` and `workbench_append` (docs/workbench.md, "Payloads").
//!
//! Exactly one of `text` (UTF-8, stored as its bytes) or `base64` (standard alphabet, canonical
//! `=` padding, no whitespace) per call, at most [`MAX_PAYLOAD_BYTES`] decoded bytes.

use base64::Engine as _;
use nokv_protocol::errors::{ToolError, ToolResult};

/// Maximum decoded payload per put_file/append call: 16 MiB (16,777,216 bytes). Larger bodies go
/// through the SDK / `nokv collect`, which stream in blocks.
pub const MAX_PAYLOAD_BYTES: u64 = 16 * 1024 * 1024;

/// Default content type of a `text` payload.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// Default content type of a `base64` payload.
pub const BINARY_CONTENT_TYPE: &str = "application/octet-stream";

/// Decodes a put_file/append payload into its bytes and the default content type
/// ([`TEXT_CONTENT_TYPE`] for `text`, [`BINARY_CONTENT_TYPE`] for `base64`).
///
/// Errors: `InvalidArguments` when both or neither of `text`/`base64` are given or the base64 is
/// not standard-alphabet with canonical padding; `PayloadTooLarge {actual_bytes, maximum_bytes}`
/// when the decoded size exceeds [`MAX_PAYLOAD_BYTES`]. An empty payload is allowed.
pub fn decode_payload(
    text: Option<&str>,
    base64: Option<&str>,
) -> ToolResult<(Vec<u8>, &'static str)> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(ToolError::invalid_arguments(
            "give exactly one of `text` or `base64`, not both",
        )),
        (None, None) => Err(ToolError::invalid_arguments(
            "give exactly one of `text` (UTF-8) or `base64` (standard alphabet) as the payload",
        )),
        (Some(text), None) => {
            let len = text.len() as u64;
            if len > MAX_PAYLOAD_BYTES {
                return Err(ToolError::payload_too_large(len, MAX_PAYLOAD_BYTES));
            }
            Ok((text.as_bytes().to_vec(), TEXT_CONTENT_TYPE))
        }
        (None, Some(encoded)) => {
            // Reject oversize input before allocating: canonical padded base64 decodes to
            // exactly len/4*3 minus the padding count.
            let enc = encoded.as_bytes();
            if enc.len() % 4 == 0 {
                let pad = enc.iter().rev().take(2).filter(|b| **b == b'=').count() as u64;
                let exact = ((enc.len() as u64) / 4 * 3).saturating_sub(pad);
                if exact > MAX_PAYLOAD_BYTES {
                    return Err(ToolError::payload_too_large(exact, MAX_PAYLOAD_BYTES));
                }
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(enc)
                .map_err(|e| {
                    ToolError::invalid_arguments(format!(
                        "`base64` is not valid standard base64 with padding ({e}); encode the \
                         bytes with the standard alphabet (A-Z a-z 0-9 + /), `=` padding, no line breaks"
                    ))
                    .with_detail("field", "base64")
                })?;
            let len = bytes.len() as u64;
            if len > MAX_PAYLOAD_BYTES {
                return Err(ToolError::payload_too_large(len, MAX_PAYLOAD_BYTES));
            }
            Ok((bytes, BINARY_CONTENT_TYPE))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nokv_protocol::errors::ErrorCode;

    #[test]
    fn text_payload_is_utf8_bytes_with_text_content_type() {
        let (bytes, ct) = decode_payload(Some("héllo"), None).expect("ok");
        assert_eq!(bytes, "héllo".as_bytes());
        assert_eq!(ct, "text/plain; charset=utf-8");
    }

    #[test]
    fn base64_payload_decodes_with_octet_stream_content_type() {
        let (bytes, ct) = decode_payload(None, Some("AAEC/w==")).expect("ok");
        assert_eq!(bytes, [0u8, 1, 2, 255]);
        assert_eq!(ct, "application/octet-stream");
        let (empty, _) = decode_payload(None, Some("")).expect("ok");
        assert!(empty.is_empty());
    }

    #[test]
    fn both_or_neither_payload_is_invalid_arguments() {
        let e = decode_payload(Some("a"), Some("YQ==")).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        let e = decode_payload(None, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
    }

    #[test]
    fn invalid_base64_is_invalid_arguments() {
        for bad in ["YQ", "Y Q==", "YQ==\n", "-_8=", "YR==", "@@@@"] {
            let e = decode_payload(None, Some(bad)).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArguments, "{bad:?}");
        }
    }

    #[test]
    fn payload_over_16_mib_is_payload_too_large() {
        let big = "a".repeat(MAX_PAYLOAD_BYTES as usize + 1);
        let e = decode_payload(Some(&big), None).unwrap_err();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
        assert_eq!(e.details["actual_bytes"], MAX_PAYLOAD_BYTES + 1);
        assert_eq!(e.details["maximum_bytes"], MAX_PAYLOAD_BYTES);

        let exact = "a".repeat(MAX_PAYLOAD_BYTES as usize);
        assert!(decode_payload(Some(&exact), None).is_ok());

        // 16 MiB + 3 bytes of zeros in base64.
        let enc =
            base64::engine::general_purpose::STANDARD
                .encode(vec![0u8; MAX_PAYLOAD_BYTES as usize + 3]);
        let e = decode_payload(None, Some(&enc)).unwrap_err();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge);
        assert_eq!(e.details["actual_bytes"], MAX_PAYLOAD_BYTES + 3);
    }
}
