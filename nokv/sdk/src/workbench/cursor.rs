//! Opaque, tamper-evident continuation cursors for `workbench_list` and `workbench_grep`
//! (docs/workbench.md, "Cursors").
//!
//! A cursor binds the tool, a scope digest (root, workbench, normalized prefix, view and — for
//! grep — pattern set, glob and recursion; see [`scope_digest`]), the continuation fence (live
//! workspace incarnation + revision, or a snapshot read version) and the last child returned.
//!
//! Wire form: base64url without padding of `payload ‖ tag`, where `tag` is the first 16 bytes of
//! HMAC-SHA256 (RFC 2104) keyed by the store's [`CursorKey`] over
//! `"nokv.workbench.cursor.v1\0" ‖ payload`. The payload is binary (big-endian integers):
//! `version u8 = 1 ‖ len u16 ‖ tool ‖ scope_digest [32] ‖ fence ‖ len u32 ‖ anchor ‖ len u32 ‖
//! extra (compact JSON)`, with `fence` = `0u8 ‖ len u16 ‖ incarnation_hex ‖ workspace_revision u64`
//! (live) or `1u8 ‖ read_version u64` (snapshot). Cursors are at most [`MAX_CURSOR_BYTES`]
//! characters; an anchor of one path (≤4096 bytes) plus a small `extra` fits.

use base64::Engine as _;
use nokv_protocol::errors::{ToolError, ToolResult};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Largest accepted cursor string: 8 KiB (docs/workbench.md caps).
pub const MAX_CURSOR_BYTES: usize = 8 * 1024;

const TAG_BYTES: usize = 16;
const VERSION: u8 = 1;
const MAC_DOMAIN: &[u8] = b"nokv.workbench.cursor.v1\0";
const SCOPE_DOMAIN: &[u8] = b"nokv.workbench.cursor_scope.v1\0";
const INVALID: &str = "cursor is invalid or belongs to another request; pass the `next_cursor` of \
                       the previous call unchanged with the same arguments, or omit it to start over";

/// The 32-byte HMAC key for cursors, derived by the caller from a durable store secret so
/// cursors survive reopen but cannot be forged or moved between stores.
#[derive(Clone)]
pub struct CursorKey([u8; 32]);

impl CursorKey {
    /// Wraps 32 key bytes.
    pub fn new(bytes: [u8; 32]) -> Self {
        CursorKey(bytes)
    }
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(<redacted>)")
    }
}

/// The continuation fence of a cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fence {
    /// A live-state cursor: continues only while the workspace incarnation and revision are
    /// unchanged, else `ReadFenceChanged`.
    Live {
        /// The workspace incarnation, as lowercase hex.
        incarnation_hex: String,
        /// The workspace revision observed when the page was produced.
        workspace_revision: u64,
    },
    /// A snapshot cursor: stays at its MVCC read version.
    Snapshot {
        /// The snapshot's read version.
        read_version: u64,
    },
}

/// Everything a list/grep cursor carries.
#[derive(Clone, Debug, PartialEq)]
pub struct CursorState {
    /// Canonical tool name (`workbench_list` / `workbench_grep`).
    pub tool: String,
    /// Digest of the request scope ([`scope_digest`]); a cursor is only valid for the same scope.
    pub scope_digest: [u8; 32],
    /// The continuation fence.
    pub fence: Fence,
    /// The last child (name or relative path) returned; the next page starts after it.
    pub anchor: String,
    /// Tool-specific extra state (e.g. grep's line position or files scanned), compact JSON.
    pub extra: Value,
}

impl CursorState {
    /// Checks the cursor's fence against the fence of the current view.
    ///
    /// Errors: `ReadFenceChanged` (retryable) when both are live and the incarnation or revision
    /// moved; `InvalidArguments` when the view kind differs or the snapshot read version differs
    /// (the cursor belongs to another request).
    pub fn check_fence(&self, current: &Fence) -> ToolResult<()> {
        match (&self.fence, current) {
            (a, b) if a == b => Ok(()),
            (Fence::Live { .. }, Fence::Live { .. }) => Err(ToolError::read_fence_changed()),
            _ => Err(ToolError::invalid_arguments(INVALID).with_detail("field", "cursor")),
        }
    }
}

/// SHA-256 over the length-prefixed parts (`len u64 big-endian ‖ bytes` each, after a domain
/// tag), so distinct part lists never collide by concatenation.
pub fn scope_digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(SCOPE_DOMAIN);
    h.update((parts.len() as u64).to_be_bytes());
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// HMAC-SHA256 per RFC 2104 (block size 64 bytes).
fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        let d: [u8; 32] = Sha256::digest(key).into();
        k[..32].copy_from_slice(&d);
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    for m in message {
        inner.update(m);
    }
    let inner_digest = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner_digest);
    outer.finalize().into()
}

fn tag(key: &CursorKey, payload: &[u8]) -> [u8; TAG_BYTES] {
    let full = hmac_sha256(&key.0, &[MAC_DOMAIN, payload]);
    let mut t = [0u8; TAG_BYTES];
    t.copy_from_slice(&full[..TAG_BYTES]);
    t
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn put_u16_str(out: &mut Vec<u8>, s: &str) {
    // Tool names and incarnation hex are far shorter than 64 KiB; a longer string would be
    // truncated, and such a cursor then fails the tool or fence check instead of panicking.
    let len = s.len().min(u16::MAX as usize);
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..len]);
}

fn put_u32_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let len = b.len().min(u32::MAX as usize);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(&b[..len]);
}

/// Encodes a cursor (see the module docs for the wire form). Deterministic for equal inputs.
/// Callers keep `anchor` + `extra` within about 6 KiB so the result stays under
/// [`MAX_CURSOR_BYTES`]; [`decode_cursor`] rejects longer cursors.
pub fn encode_cursor(key: &CursorKey, state: &CursorState) -> String {
    let mut payload = Vec::with_capacity(64 + state.anchor.len());
    payload.push(VERSION);
    put_u16_str(&mut payload, &state.tool);
    payload.extend_from_slice(&state.scope_digest);
    match &state.fence {
        Fence::Live {
            incarnation_hex,
            workspace_revision,
        } => {
            payload.push(0);
            put_u16_str(&mut payload, incarnation_hex);
            payload.extend_from_slice(&workspace_revision.to_be_bytes());
        }
        Fence::Snapshot { read_version } => {
            payload.push(1);
            payload.extend_from_slice(&read_version.to_be_bytes());
        }
    }
    put_u32_bytes(&mut payload, state.anchor.as_bytes());
    let extra = serde_json::to_vec(&state.extra).unwrap_or_else(|_| b"null".to_vec());
    put_u32_bytes(&mut payload, &extra);
    let t = tag(key, &payload);
    payload.extend_from_slice(&t);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload)
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }
    fn str16(&mut self) -> Option<String> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn bytes32(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

fn parse_payload(payload: &[u8]) -> Option<CursorState> {
    let mut r = Reader { buf: payload };
    if r.u8()? != VERSION {
        return None;
    }
    let tool = r.str16()?;
    let mut scope = [0u8; 32];
    scope.copy_from_slice(r.take(32)?);
    let fence = match r.u8()? {
        0 => Fence::Live {
            incarnation_hex: r.str16()?,
            workspace_revision: r.u64()?,
        },
        1 => Fence::Snapshot {
            read_version: r.u64()?,
        },
        _ => return None,
    };
    let anchor = String::from_utf8(r.bytes32()?.to_vec()).ok()?;
    let extra: Value = serde_json::from_slice(r.bytes32()?).ok()?;
    if !r.buf.is_empty() {
        return None;
    }
    Some(CursorState {
        tool,
        scope_digest: scope,
        fence,
        anchor,
        extra,
    })
}

/// Decodes and authenticates a cursor for `tool` and the request's `scope_digest`.
///
/// Errors: `InvalidArguments` ("cursor is invalid or belongs to another request", `details.field
/// = "cursor"`) when the cursor is longer than [`MAX_CURSOR_BYTES`], not base64url, too short,
/// fails the MAC (tampered or minted by another store key), is malformed, or was issued for
/// another tool or scope. The fence is NOT checked here; see [`CursorState::check_fence`].
pub fn decode_cursor(
    key: &CursorKey,
    tool: &str,
    scope_digest: &[u8; 32],
    cursor: &str,
) -> ToolResult<CursorState> {
    let invalid = || ToolError::invalid_arguments(INVALID).with_detail("field", "cursor");
    if cursor.len() > MAX_CURSOR_BYTES {
        return Err(invalid());
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor.as_bytes())
        .map_err(|_| invalid())?;
    if raw.len() <= TAG_BYTES {
        return Err(invalid());
    }
    let (payload, got) = raw.split_at(raw.len() - TAG_BYTES);
    if !constant_time_eq(&tag(key, payload), got) {
        return Err(invalid());
    }
    let state = parse_payload(payload).ok_or_else(invalid)?;
    if state.tool != tool || &state.scope_digest != scope_digest {
        return Err(invalid());
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nokv_protocol::errors::ErrorCode;
    use serde_json::json;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn sample(fence: Fence) -> CursorState {
        CursorState {
            tool: "workbench_list".into(),
            scope_digest: scope_digest(&[b"/agents/local/wb", b"wb-1", b"outputs/"]),
            fence,
            anchor: "outputs/b.csv".into(),
            extra: json!({"files_scanned": 3}),
        }
    }

    fn live() -> Fence {
        Fence::Live {
            incarnation_hex: "00ff".into(),
            workspace_revision: 7,
        }
    }

    #[test]
    fn hmac_matches_rfc4231_vectors() {
        // Test case 1.
        let mac = hmac_sha256(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(
            hex(&mac),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        // Test case 2, message split in two parts.
        let mac = hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: key longer than the block size.
        let mac = hmac_sha256(
            &[0xaa; 131],
            &[b"Test Using Larger Than Block-Size Key - Hash Key First"],
        );
        assert_eq!(
            hex(&mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn cursor_round_trips_live_and_snapshot_fences() {
        let key = CursorKey::new([7; 32]);
        for fence in [live(), Fence::Snapshot { read_version: 42 }] {
            let state = sample(fence);
            let c = encode_cursor(&key, &state);
            assert!(c
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            let back = decode_cursor(&key, "workbench_list", &state.scope_digest, &c).unwrap();
            assert_eq!(back, state);
        }
    }

    #[test]
    fn tampered_cursor_is_invalid_arguments() {
        let key = CursorKey::new([7; 32]);
        let state = sample(live());
        let c = encode_cursor(&key, &state);
        let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&c)
            .unwrap();
        for i in [1usize, 40, raw.len() - 1] {
            raw[i] ^= 1;
            let t = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&raw);
            let e = decode_cursor(&key, "workbench_list", &state.scope_digest, &t).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArguments);
            raw[i] ^= 1;
        }
        for junk in ["", "!!!", "abc", "r:1"] {
            let e = decode_cursor(&key, "workbench_list", &state.scope_digest, junk).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArguments, "{junk:?}");
        }
    }

    #[test]
    fn cursor_from_another_key_tool_or_scope_is_invalid_arguments() {
        let key = CursorKey::new([7; 32]);
        let state = sample(live());
        let c = encode_cursor(&key, &state);
        let other_key = CursorKey::new([8; 32]);
        assert_eq!(
            decode_cursor(&other_key, "workbench_list", &state.scope_digest, &c)
                .unwrap_err()
                .code,
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            decode_cursor(&key, "workbench_grep", &state.scope_digest, &c)
                .unwrap_err()
                .code,
            ErrorCode::InvalidArguments
        );
        let other_scope = scope_digest(&[b"/agents/local/wb", b"wb-2", b"outputs/"]);
        assert_eq!(
            decode_cursor(&key, "workbench_list", &other_scope, &c)
                .unwrap_err()
                .code,
            ErrorCode::InvalidArguments
        );
    }

    #[test]
    fn oversize_cursor_is_invalid_arguments() {
        let key = CursorKey::new([7; 32]);
        let mut state = sample(live());
        state.anchor = "x".repeat(7000);
        let c = encode_cursor(&key, &state);
        assert!(c.len() > MAX_CURSOR_BYTES);
        let e = decode_cursor(&key, "workbench_list", &state.scope_digest, &c).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        // A 4096-byte anchor still fits.
        state.anchor = "y".repeat(4096);
        let c = encode_cursor(&key, &state);
        assert!(decode_cursor(&key, "workbench_list", &state.scope_digest, &c).is_ok());
    }

    #[test]
    fn moved_live_fence_is_read_fence_changed() {
        let state = sample(live());
        assert!(state.check_fence(&live()).is_ok());
        let moved = Fence::Live {
            incarnation_hex: "00ff".into(),
            workspace_revision: 8,
        };
        let e = state.check_fence(&moved).unwrap_err();
        assert_eq!(e.code, ErrorCode::ReadFenceChanged);
        assert!(e.retryable());
        let e = state
            .check_fence(&Fence::Snapshot { read_version: 7 })
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        let snap = sample(Fence::Snapshot { read_version: 5 });
        assert_eq!(
            snap.check_fence(&Fence::Snapshot { read_version: 6 })
                .unwrap_err()
                .code,
            ErrorCode::InvalidArguments
        );
    }

    #[test]
    fn scope_digest_is_length_prefixed() {
        assert_ne!(scope_digest(&[b"ab", b"c"]), scope_digest(&[b"a", b"bc"]));
        assert_ne!(scope_digest(&[b"ab"]), scope_digest(&[b"ab", b""]));
        assert_eq!(scope_digest(&[b"x"]), scope_digest(&[b"x"]));
    }
}
