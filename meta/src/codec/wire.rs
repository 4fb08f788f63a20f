//! Byte-level building blocks shared by every family codec.
//!
//! Conventions (seed 000): all integers unsigned big-endian; general variable byte strings are a
//! u32 big-endian length followed by the exact bytes; an optional value is one tag byte
//! (`0` = absent, `1` = present) followed by the value when present; every value starts with its
//! u16 big-endian value format version. Decoders reject truncation, trailing bytes, invalid UTF-8
//! and unknown tags with [`Error::Codec`].

use crate::error::{Error, Result};

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
macro_rules! durable_enum {
    ($(#[$doc:meta])* $name:ident, $family:literal { $($(#[$vdoc:meta])* $variant:ident = $value:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant = $value),+
        }

        impl $name {
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
    };
}
pub(crate) use durable_enum;
