//! Byte-level building blocks shared by every family codec.
//!
//! Conventions (docs/metadata-format.md): all integers unsigned big-endian; general variable byte strings are a
//! u32 big-endian length followed by the exact bytes; snapshot aliases and tag names use a u16
//! big-endian length; an optional value is one tag byte (`0` = absent, `1` = present) followed by
//! the value when present; a boolean is one byte `0`/`1`; every value starts with its u16
//! big-endian value format version. Decoders reject truncation, trailing bytes, invalid UTF-8,
//! non-canonical booleans and unknown tags with [`Error::Codec`].

use crate::error::{Error, Result};
use crate::ids::RootId;

/// Appends encoded fields to a buffer.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn new() -> Self {
        Enc(Vec::with_capacity(64))
    }
    pub(crate) fn version(version: u16) -> Self {
        let mut e = Enc::new();
        e.u16(version);
        e
    }
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub(crate) fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    /// u32 length + bytes. Lengths above u32::MAX cannot occur for validated inputs; they are
    /// saturated, which makes the decoder reject the value rather than silently truncate.
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
        self.raw(b)
    }
    pub(crate) fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
    pub(crate) fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(x) => self.u8(1).u64(x),
        }
    }
    pub(crate) fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(x) => self.u8(1).u32(x),
        }
    }
    pub(crate) fn opt_raw(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(x) => self.u8(1).raw(x),
        }
    }
    pub(crate) fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(x) => self.u8(1).str(x),
        }
    }
    pub(crate) fn opt_u8(&mut self, v: Option<u8>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(x) => self.u8(1).u8(x),
        }
    }
    pub(crate) fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// u16 length + bytes (snapshot aliases, tag names, index field ids: all validated to at most
    /// 128 bytes, so the length always fits; an oversized input saturates and fails to decode).
    pub(crate) fn str16(&mut self, s: &str) -> &mut Self {
        self.u16(u16::try_from(s.len()).unwrap_or(u16::MAX));
        self.raw(s.as_bytes())
    }
    /// u32 element count (saturating, like [`Enc::bytes`]).
    pub(crate) fn count(&mut self, n: usize) -> &mut Self {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX))
    }
    /// A path as a u32-length UTF-8 string.
    pub(crate) fn norm_path(&mut self, p: &crate::path::NormPath) -> &mut Self {
        self.str(p.as_str())
    }
    pub(crate) fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

/// Reads encoded fields from a slice, attributing failures to one family.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
    family: &'static str,
}

impl<'a> Dec<'a> {
    pub(crate) fn new(family: &'static str, buf: &'a [u8]) -> Self {
        Dec {
            buf,
            pos: 0,
            family,
        }
    }

    pub(crate) fn err(&self, reason: impl Into<String>) -> Error {
        Error::codec(self.family, reason)
    }

    /// Reads the leading u16 value format version and requires it to equal `expected`.
    pub(crate) fn expect_version(&mut self, expected: u16) -> Result<()> {
        let v = self.u16()?;
        if v != expected {
            return Err(self.err(format!(
                "unknown value format version {v} (supported: {expected})"
            )));
        }
        Ok(())
    }

    /// Reads the leading u16 value format version and requires it to be one of `supported`;
    /// returns it.
    pub(crate) fn version_in(&mut self, supported: &[u16]) -> Result<u16> {
        let v = self.u16()?;
        if !supported.contains(&v) {
            return Err(self.err(format!(
                "unknown value format version {v} (supported: {supported:?})"
            )));
        }
        Ok(v)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| self.err(format!("truncated at byte {}", self.pos)))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn arr<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.arr::<1>()?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.arr()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.arr()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.arr()?))
    }
    pub(crate) fn b16(&mut self) -> Result<[u8; 16]> {
        self.arr()
    }
    pub(crate) fn b32(&mut self) -> Result<[u8; 32]> {
        self.arr()
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub(crate) fn string(&mut self) -> Result<String> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| self.err("string is not UTF-8"))
    }
    fn tag(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            t => Err(self.err(format!("unknown option tag {t}"))),
        }
    }
    pub(crate) fn opt_u64(&mut self) -> Result<Option<u64>> {
        if self.tag()? {
            Ok(Some(self.u64()?))
        } else {
            Ok(None)
        }
    }
    pub(crate) fn opt_u32(&mut self) -> Result<Option<u32>> {
        if self.tag()? {
            Ok(Some(self.u32()?))
        } else {
            Ok(None)
        }
    }
    pub(crate) fn opt_b16(&mut self) -> Result<Option<[u8; 16]>> {
        if self.tag()? {
            Ok(Some(self.b16()?))
        } else {
            Ok(None)
        }
    }
    pub(crate) fn opt_string(&mut self) -> Result<Option<String>> {
        if self.tag()? {
            Ok(Some(self.string()?))
        } else {
            Ok(None)
        }
    }
    pub(crate) fn opt_u8(&mut self) -> Result<Option<u8>> {
        if self.tag()? {
            Ok(Some(self.u8()?))
        } else {
            Ok(None)
        }
    }
    /// Reads a present/absent option tag; `true` when a value follows.
    pub(crate) fn opt_tag(&mut self) -> Result<bool> {
        self.tag()
    }
    /// One canonical boolean byte (`0` or `1`).
    pub(crate) fn bool(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.err(format!("non-canonical boolean byte {b}"))),
        }
    }
    /// u16 length + bytes.
    pub(crate) fn bytes16(&mut self) -> Result<&'a [u8]> {
        let n = usize::from(self.u16()?);
        self.take(n)
    }
    /// u32 element count. The count is not trusted for allocation: callers push one element per
    /// iteration, so a forged count fails with truncation.
    pub(crate) fn count(&mut self) -> Result<u32> {
        self.u32()
    }
    /// Every remaining byte.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
    /// A u32-length UTF-8 path string revalidated by the one shared normalizer.
    pub(crate) fn norm_path(&mut self) -> Result<crate::path::NormPath> {
        let s = self.string()?;
        crate::path::normalize_stored(&s).map_err(|e| self.err(format!("invalid path: {e}")))
    }
    /// The remaining bytes as one canonical ordered path key (`… 0x01`).
    pub(crate) fn ordered_path_rest(&mut self) -> Result<crate::path::NormPath> {
        let rest = self.rest();
        crate::path::decode_ordered_key(rest)
            .map_err(|e| self.err(format!("invalid ordered path key: {e}")))
    }
    /// The family this decoder attributes errors to.
    pub(crate) fn family(&self) -> &'static str {
        self.family
    }
    /// Whether every byte has been consumed.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
    /// Requires that every byte was consumed.
    pub(crate) fn finish(self) -> Result<()> {
        if self.pos != self.buf.len() {
            return Err(self.err(format!("{} trailing byte(s)", self.buf.len() - self.pos)));
        }
        Ok(())
    }
}

/// Declares a fieldless durable enum with fixed discriminants, `to_u8`, and a fail-closed
/// `from_u8`.
///
/// `durable_enum!(impl Name, "family" { Variant = 1, .. })` gives the same codec to an enum declared
/// in a lower module (one the error type itself names), listing its discriminants once more.
macro_rules! durable_enum {
    ($(#[$doc:meta])* $name:ident, $family:literal { $($(#[$vdoc:meta])* $variant:ident = $value:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant = $value),+
        }

        $crate::codec::wire::durable_enum!(impl $name, $family { $($variant = $value),+ });
    };
    (impl $name:ident, $family:literal { $($variant:ident = $value:literal),+ $(,)? }) => {
        impl $name {
            /// Every variant in discriminant order (the complete registry for this enum).
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The durable discriminant.
            pub fn to_u8(self) -> u8 {
                self as u8
            }

            /// Decodes a durable discriminant. Errors: [`crate::Error::Codec`] for an unknown value.
            pub fn from_u8(v: u8) -> crate::error::Result<Self> {
                match v {
                    $($value => Ok($name::$variant),)+
                    _ => Err(crate::error::Error::codec(
                        $family,
                        format!(concat!("unknown ", stringify!($name), " discriminant {}"), v),
                    )),
                }
            }
        }

        impl TryFrom<u8> for $name {
            type Error = crate::error::Error;

            /// Fail-closed decode of a durable discriminant ([`crate::Error::Codec`] when unknown).
            fn try_from(v: u8) -> crate::error::Result<Self> {
                $name::from_u8(v)
            }
        }

        impl From<$name> for u8 {
            fn from(v: $name) -> u8 {
                v.to_u8()
            }
        }
    };
}
pub(crate) use durable_enum;

/// Decodes a key that is exactly one root id (RootFence, GcBarrier), attributing failures to
/// `family`.
///
/// Errors: [`crate::Error::Codec`] for any length other than 16.
pub fn decode_root_key(family: &'static str, key: &[u8]) -> Result<RootId> {
    let mut d = Dec::new(family, key);
    let root = RootId(d.b16()?);
    d.finish()?;
    Ok(root)
}
