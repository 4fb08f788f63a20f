//! The versioned, order-preserving secondary-index value codec (docs/metadata-format.md: "each index declares a
//! versioned, order-preserving codec for null, boolean, signed/unsigned integer, finite float,
//! timestamp, bytes, and string values").
//!
//! # Order
//!
//! [`IndexValue`]'s [`Ord`] is the documented total order, and for any two values
//! `encode(a).cmp(&encode(b)) == a.cmp(&b)` (property-tested):
//!
//! 1. across types: `Null < Bool < Number < Timestamp < String < Bytes`;
//! 2. `false < true`;
//! 3. **one numeric domain**: [`IndexValue::Int`] (i64), [`IndexValue::UInt`] (u64) and
//!    [`IndexValue::Float`] (finite f64) are ordered together by exact mathematical value, so a
//!    `gt 4000` range finds `4000.5`, `4001` and `u64::MAX` alike. Values that are mathematically
//!    equal but differ in type (e.g. `Int(5)`, `UInt(5)`, `Float(5.0)`) are tie-broken
//!    deterministically `Int < UInt < Float`. `-0.0` is stored as `+0.0` (they are equal);
//! 4. timestamps chronologically (`seconds`, then `nanos`);
//! 5. strings and byte strings lexicographically by bytes (a strict prefix sorts first).
//!
//! # Encoding (codec version 1)
//!
//! Every encoding is `u8 codec_version (=1) | u8 type | body`. Because every value of one index
//! carries the same version byte, the byte does not disturb order; an unknown version fails closed.
//!
//! | value            | type byte | body |
//! |------------------|-----------|------|
//! | Null             | `0x10`    | — |
//! | Bool             | `0x20`    | `0x00` false / `0x01` true |
//! | negative number  | `0x30`    | `!u16 biased_exp | !u64 significand | u8 subtype` |
//! | zero             | `0x31`    | `u8 subtype` |
//! | positive number  | `0x32`    | `u16 biased_exp | u64 significand | u8 subtype` |
//! | Timestamp        | `0x40`    | `u64 (seconds XOR 2^63) | u32 nanos` |
//! | String (UTF-8)   | `0x50`    | escaped bytes, then `0x00 0x01` |
//! | Bytes            | `0x60`    | escaped bytes, then `0x00 0x01` |
//!
//! **Numbers.** Every i64, u64 and finite f64 is exactly `sig × 2^(exp − 63)` with `sig` a u64
//! whose top bit is set (the magnitude left-aligned) and `exp` = ⌊log2 |value|⌋ in
//! `−1074..=1023`; `biased_exp = exp + 1074` (u16). Comparing `(biased_exp, sig)` as big-endian
//! bytes compares magnitudes exactly, with no rounding: a u64 keeps all 64 bits, an f64 its 53.
//! Negative numbers complement both fields so a larger magnitude sorts first. The trailing
//! subtype byte (`0x01` Int, `0x02` UInt, `0x03` Float) only matters between equal values and
//! makes decoding exact (the stored type comes back). Decoding re-encodes and requires identical
//! bytes, so non-canonical bodies (an unset top bit, bits a type cannot hold) are rejected.
//!
//! **Strings and bytes** are escaped so that no encoding is a prefix of another and the key can
//! continue with the workspace incarnation and path: each `0x00` becomes `0x00 0xff` and the value
//! ends with `0x00 0x01`. Raw length is at most [`MAX_VARIABLE_VALUE_BYTES`].
//!
//! NaN and ±∞ cannot be represented: [`FiniteF64::new`] rejects them with
//! [`Error::InvalidArgument`]. Malformed encodings fail with [`Error::Codec`] (family
//! `"secondary_index"`).

use std::cmp::Ordering;

use crate::error::{Error, Result};

/// Version byte leading every encoded value.
pub const VALUE_CODEC_VERSION: u8 = 1;
/// Maximum raw length of a string or byte-string index value, in bytes.
pub const MAX_VARIABLE_VALUE_BYTES: usize = 4096;

const FAMILY: &str = "secondary_index";

const TYPE_NULL: u8 = 0x10;
const TYPE_BOOL: u8 = 0x20;
const TYPE_NUM_NEG: u8 = 0x30;
const TYPE_NUM_ZERO: u8 = 0x31;
const TYPE_NUM_POS: u8 = 0x32;
const TYPE_TIMESTAMP: u8 = 0x40;
const TYPE_STRING: u8 = 0x50;
const TYPE_BYTES: u8 = 0x60;

const SUB_INT: u8 = 0x01;
const SUB_UINT: u8 = 0x02;
const SUB_FLOAT: u8 = 0x03;

const EXP_BIAS: i32 = 1074;
const MIN_EXP: i32 = -1074;
const MAX_EXP: i32 = 1023;

const ESCAPE: u8 = 0x00;
const ESCAPED_NUL: u8 = 0xff;
const TERMINATOR: u8 = 0x01;

/// A finite `f64` (never NaN or ±∞; `-0.0` is normalized to `+0.0`).
#[derive(Clone, Copy, Debug)]
pub struct FiniteF64(f64);

impl FiniteF64 {
    /// Wraps a finite float. Errors: [`Error::InvalidArgument`] for NaN, +∞ or −∞.
    pub fn new(v: f64) -> Result<Self> {
        if !v.is_finite() {
            return Err(Error::invalid(format!(
                "index float values must be finite, got {v}"
            )));
        }
        // -0.0 == 0.0: store one representation so equality, order and bytes agree.
        Ok(FiniteF64(if v == 0.0 { 0.0 } else { v }))
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for FiniteF64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for FiniteF64 {}
impl PartialOrd for FiniteF64 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for FiniteF64 {
    fn cmp(&self, other: &Self) -> Ordering {
        // No NaN and no -0.0, so total_cmp is the numeric order.
        self.0.total_cmp(&other.0)
    }
}
impl std::hash::Hash for FiniteF64 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// A point in time: whole seconds since the Unix epoch (signed) plus `nanos` in `0..1e9`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    seconds: i64,
    nanos: u32,
}

impl Timestamp {
    /// Builds a timestamp. Errors: [`Error::InvalidArgument`] when `nanos >= 1_000_000_000`.
    pub fn new(seconds: i64, nanos: u32) -> Result<Self> {
        if nanos >= 1_000_000_000 {
            return Err(Error::invalid(format!(
                "timestamp nanos must be below 1e9, got {nanos}"
            )));
        }
        Ok(Timestamp { seconds, nanos })
    }

    /// From Unix milliseconds (e.g. a lease deadline).
    pub fn from_unix_millis(ms: i64) -> Self {
        Timestamp {
            seconds: ms.div_euclid(1000),
            // rem_euclid(1000) is in 0..1000, so the product is below 1e9 and fits u32.
            nanos: (ms.rem_euclid(1000) as u32) * 1_000_000,
        }
    }

    /// Seconds since the Unix epoch.
    pub fn seconds(self) -> i64 {
        self.seconds
    }

    /// Nanoseconds within the second (`0..1e9`).
    pub fn nanos(self) -> u32 {
        self.nanos
    }
}

impl Timestamp {
    /// Parses an RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`T` may also be
    /// `t` or a space, `Z` also `z`; 1–9 fraction digits; no leap second). Returns `None` for
    /// anything else, so callers can treat non-timestamps as plain strings.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let b = text.as_bytes();
        let num = |from: usize, len: usize| -> Option<i64> {
            let digits = b.get(from..from + len)?;
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            Some(
                digits
                    .iter()
                    .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')),
            )
        };
        let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
        if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
            return None;
        }
        let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
        let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month as u32)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        let mut at = 19;
        let mut nanos: u32 = 0;
        if b.get(at) == Some(&b'.') {
            at += 1;
            let start = at;
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            let digits = at - start;
            if digits == 0 || digits > 9 {
                return None;
            }
            let frac = num(start, digits)?;
            nanos = u32::try_from(frac * 10i64.pow(9 - digits as u32)).ok()?;
        }
        let offset = match b.get(at)? {
            b'Z' | b'z' => {
                at += 1;
                0
            }
            sign @ (b'+' | b'-') => {
                if !sep(at + 3, b":") {
                    return None;
                }
                let (oh, om) = (num(at + 1, 2)?, num(at + 4, 2)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                at += 6;
                let off = oh * 3600 + om * 60;
                if *sign == b'-' {
                    -off
                } else {
                    off
                }
            }
            _ => return None,
        };
        if at != b.len() {
            return None;
        }
        let days = days_from_civil(year, month as u32, day as u32);
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
        Timestamp::new(seconds, nanos).ok()
    }

    /// RFC 3339 in UTC: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, the fraction trimmed of trailing
    /// zeros and omitted when zero. Years outside 0..=9999 (far outside RFC 3339) are written
    /// with a sign and as many digits as needed.
    pub fn to_rfc3339(&self) -> String {
        let days = self.seconds.div_euclid(86_400);
        let secs = self.seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let year_text = if (0..=9999).contains(&year) {
            format!("{year:04}")
        } else {
            format!("{year:+05}")
        };
        let mut out = format!(
            "{year_text}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            secs / 3600,
            (secs % 3600) / 60,
            secs % 60
        );
        if self.nanos != 0 {
            let frac = format!("{:09}", self.nanos);
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
        out.push('Z');
        out
    }
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(year) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (month 1..=12, day 1..=31).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y.rem_euclid(400);
    let shifted_month = i64::from((month + 9) % 12); // March = 0
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// One typed secondary-index value (see the module docs for order and encoding).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IndexValue {
    /// JSON null / missing-as-null.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer.
    Int(i64),
    /// An unsigned 64-bit integer.
    UInt(u64),
    /// A finite float.
    Float(FiniteF64),
    /// A timestamp.
    Timestamp(Timestamp),
    /// A UTF-8 string (at most [`MAX_VARIABLE_VALUE_BYTES`] bytes).
    String(String),
    /// A byte string (at most [`MAX_VARIABLE_VALUE_BYTES`] bytes).
    Bytes(Vec<u8>),
}

/// Exact numeric view used by the reference order.
enum Num {
    I(i128),
    F(f64),
}

/// Exact comparison of a finite float with an integer.
fn cmp_float_int(f: f64, i: i128) -> Ordering {
    // 2^127: every i128 we compare (at most 64-bit magnitudes) is far inside this range.
    const TWO_127: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if f >= TWO_127 {
        return Ordering::Greater;
    }
    if f < -TWO_127 {
        return Ordering::Less;
    }
    let t = f.trunc();
    // `t` is integral with |t| < 2^127, so the cast is exact.
    let ti = t as i128;
    match ti.cmp(&i) {
        Ordering::Equal => f.partial_cmp(&t).unwrap_or(Ordering::Equal),
        o => o,
    }
}

impl Num {
    fn cmp(&self, other: &Num) -> Ordering {
        match (self, other) {
            (Num::I(a), Num::I(b)) => a.cmp(b),
            (Num::F(a), Num::F(b)) => a.total_cmp(b),
            (Num::F(a), Num::I(b)) => cmp_float_int(*a, *b),
            (Num::I(a), Num::F(b)) => cmp_float_int(*b, *a).reverse(),
        }
    }
}

impl IndexValue {
    /// A float value. Errors: [`Error::InvalidArgument`] for NaN or ±∞.
    pub fn float(v: f64) -> Result<Self> {
        Ok(IndexValue::Float(FiniteF64::new(v)?))
    }

    /// Cross-type rank (the first level of the documented order).
    fn type_rank(&self) -> u8 {
        match self {
            IndexValue::Null => 0,
            IndexValue::Bool(_) => 1,
            IndexValue::Int(_) | IndexValue::UInt(_) | IndexValue::Float(_) => 2,
            IndexValue::Timestamp(_) => 3,
            IndexValue::String(_) => 4,
            IndexValue::Bytes(_) => 5,
        }
    }

    fn num(&self) -> Option<(Num, u8)> {
        match self {
            IndexValue::Int(i) => Some((Num::I(i128::from(*i)), SUB_INT)),
            IndexValue::UInt(u) => Some((Num::I(i128::from(*u)), SUB_UINT)),
            IndexValue::Float(f) => Some((Num::F(f.get()), SUB_FLOAT)),
            _ => None,
        }
    }

    /// `(negative, exp, left-aligned significand)` of a nonzero number; `None` for zero or a
    /// non-number.
    fn num_parts(&self) -> Option<(bool, i32, u64)> {
        fn from_mag(m: u64) -> (i32, u64) {
            let lz = m.leading_zeros();
            (63 - lz as i32, m << lz)
        }
        match self {
            IndexValue::Int(0) | IndexValue::UInt(0) => None,
            IndexValue::Int(i) => {
                let (e, s) = from_mag(i.unsigned_abs());
                Some((*i < 0, e, s))
            }
            IndexValue::UInt(u) => {
                let (e, s) = from_mag(*u);
                Some((false, e, s))
            }
            IndexValue::Float(f) => {
                let f = f.get();
                if f == 0.0 {
                    return None;
                }
                let bits = f.abs().to_bits();
                let biased = (bits >> 52) as i32;
                let frac = bits & ((1u64 << 52) - 1);
                if biased == 0 {
                    let (e, s) = from_mag(frac);
                    Some((f < 0.0, e + MIN_EXP, s))
                } else {
                    Some((f < 0.0, biased - 1023, ((1u64 << 52) | frac) << 11))
                }
            }
            _ => None,
        }
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len > MAX_VARIABLE_VALUE_BYTES {
            return Err(Error::invalid(format!(
                "index value is {len} bytes; at most {MAX_VARIABLE_VALUE_BYTES} allowed"
            )));
        }
        Ok(())
    }

    /// Appends the encoding; `with_subtype = false` omits a number's trailing subtype byte
    /// (see [`IndexValue::order_prefix`]).
    fn put(&self, out: &mut Vec<u8>, with_subtype: bool) -> Result<()> {
        out.push(VALUE_CODEC_VERSION);
        match self {
            IndexValue::Null => out.push(TYPE_NULL),
            IndexValue::Bool(b) => out.extend_from_slice(&[TYPE_BOOL, u8::from(*b)]),
            IndexValue::Int(_) | IndexValue::UInt(_) | IndexValue::Float(_) => {
                match self.num_parts() {
                    None => out.push(TYPE_NUM_ZERO),
                    Some((neg, exp, sig)) => {
                        // exp is within MIN_EXP..=MAX_EXP by construction, so this fits u16.
                        let biased = (exp + EXP_BIAS) as u16;
                        if neg {
                            out.push(TYPE_NUM_NEG);
                            out.extend_from_slice(&(!biased).to_be_bytes());
                            out.extend_from_slice(&(!sig).to_be_bytes());
                        } else {
                            out.push(TYPE_NUM_POS);
                            out.extend_from_slice(&biased.to_be_bytes());
                            out.extend_from_slice(&sig.to_be_bytes());
                        }
                    }
                }
                if with_subtype {
                    if let Some((_, sub)) = self.num() {
                        out.push(sub);
                    }
                }
            }
            IndexValue::Timestamp(t) => {
                out.push(TYPE_TIMESTAMP);
                out.extend_from_slice(&((t.seconds as u64) ^ (1u64 << 63)).to_be_bytes());
                out.extend_from_slice(&t.nanos.to_be_bytes());
            }
            IndexValue::String(s) => {
                self.check_len(s.len())?;
                out.push(TYPE_STRING);
                escape(out, s.as_bytes());
            }
            IndexValue::Bytes(b) => {
                self.check_len(b.len())?;
                out.push(TYPE_BYTES);
                escape(out, b);
            }
        }
        Ok(())
    }

    /// Appends the encoding of `self` to `out`.
    ///
    /// Errors: [`Error::InvalidArgument`] for a string or byte string longer than
    /// [`MAX_VARIABLE_VALUE_BYTES`] (nothing useful is appended in that case).
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<()> {
        self.put(out, true)
    }

    /// The encoding of `self` (see the module docs).
    ///
    /// Errors: as [`IndexValue::encode_into`].
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(16);
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// The shortest prefix shared by the encodings of every value equal in order-value to
    /// `self`: for numbers the encoding without the subtype byte (so `Int(5)`, `UInt(5)` and
    /// `Float(5.0)` all start with it); for every other type the full encoding. Range queries use
    /// it as the bound: `gte x` starts at `order_prefix(x)`, `gt x` starts after every key with
    /// that prefix.
    ///
    /// Errors: as [`IndexValue::encode_into`].
    pub fn order_prefix(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(16);
        self.put(&mut out, false)?;
        Ok(out)
    }

    /// Decodes exactly one value occupying all of `bytes`.
    ///
    /// Errors: [`Error::Codec`] for an unknown codec version, type or subtype, truncation,
    /// trailing bytes, a bad escape, invalid UTF-8, or a non-canonical encoding.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let (v, used) = Self::decode_prefix(bytes)?;
        if used != bytes.len() {
            return Err(Error::codec(
                FAMILY,
                format!("{} trailing byte(s) after index value", bytes.len() - used),
            ));
        }
        Ok(v)
    }

    /// Decodes one value from the start of `bytes` (an index key continues after it) and returns
    /// it with the number of bytes it occupied.
    ///
    /// Errors: as [`IndexValue::decode`], except that trailing bytes are allowed.
    pub fn decode_prefix(bytes: &[u8]) -> Result<(Self, usize)> {
        let err = |r: &str| Error::codec(FAMILY, format!("index value: {r}"));
        let (&version, rest) = bytes.split_first().ok_or_else(|| err("empty"))?;
        if version != VALUE_CODEC_VERSION {
            return Err(err(&format!(
                "unknown codec version {version} (supported: {VALUE_CODEC_VERSION})"
            )));
        }
        let (&ty, body) = rest.split_first().ok_or_else(|| err("truncated type"))?;
        let take = |n: usize| body.get(..n).ok_or_else(|| err("truncated"));
        let (value, body_len) = match ty {
            TYPE_NULL => (IndexValue::Null, 0),
            TYPE_BOOL => match take(1)?[0] {
                0 => (IndexValue::Bool(false), 1),
                1 => (IndexValue::Bool(true), 1),
                b => return Err(err(&format!("non-canonical boolean byte {b}"))),
            },
            TYPE_NUM_ZERO => {
                let v = match take(1)?[0] {
                    SUB_INT => IndexValue::Int(0),
                    SUB_UINT => IndexValue::UInt(0),
                    SUB_FLOAT => IndexValue::Float(FiniteF64(0.0)),
                    s => return Err(err(&format!("unknown numeric subtype {s}"))),
                };
                (v, 1)
            }
            TYPE_NUM_NEG | TYPE_NUM_POS => {
                let b = take(11)?;
                let neg = ty == TYPE_NUM_NEG;
                let mut biased = u16::from_be_bytes([b[0], b[1]]);
                let mut sig = u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]);
                if neg {
                    biased = !biased;
                    sig = !sig;
                }
                let exp = i32::from(biased) - EXP_BIAS;
                let v = number_from_parts(neg, exp, sig, b[10]).map_err(|r| err(&r))?;
                (v, 11)
            }
            TYPE_TIMESTAMP => {
                let b = take(12)?;
                let raw = u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                let nanos = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
                let t = Timestamp::new((raw ^ (1u64 << 63)) as i64, nanos)
                    .map_err(|_| err("timestamp nanos out of range"))?;
                (IndexValue::Timestamp(t), 12)
            }
            TYPE_STRING | TYPE_BYTES => {
                let (raw, used) = unescape(body).map_err(err)?;
                if raw.len() > MAX_VARIABLE_VALUE_BYTES {
                    return Err(err("variable-length value longer than the maximum"));
                }
                let v = if ty == TYPE_STRING {
                    IndexValue::String(String::from_utf8(raw).map_err(|_| err("string not UTF-8"))?)
                } else {
                    IndexValue::Bytes(raw)
                };
                (v, used)
            }
            t => return Err(err(&format!("unknown type byte {t:#04x}"))),
        };
        let used = 2 + body_len;
        // Canonical form: exactly one byte sequence per value.
        let mut again = Vec::with_capacity(used);
        value
            .put(&mut again, true)
            .map_err(|_| err("value out of range"))?;
        if again.as_slice() != &bytes[..used] {
            return Err(err("non-canonical encoding"));
        }
        Ok((value, used))
    }
}

/// Rebuilds a nonzero number of the given subtype from its exact parts.
fn number_from_parts(
    neg: bool,
    exp: i32,
    sig: u64,
    sub: u8,
) -> std::result::Result<IndexValue, String> {
    if sig >> 63 != 1 {
        return Err("significand top bit not set".to_owned());
    }
    let int_mag = || -> std::result::Result<u64, String> {
        if !(0..=63).contains(&exp) {
            return Err(format!("exponent {exp} out of integer range"));
        }
        Ok(sig >> (63 - exp))
    };
    match sub {
        SUB_INT => {
            let m = int_mag()?;
            let v = if neg {
                0i128 - i128::from(m)
            } else {
                i128::from(m)
            };
            i64::try_from(v)
                .map(IndexValue::Int)
                .map_err(|_| "signed integer out of range".to_owned())
        }
        SUB_UINT => {
            if neg {
                return Err("negative unsigned integer".to_owned());
            }
            Ok(IndexValue::UInt(int_mag()?))
        }
        SUB_FLOAT => {
            if !(MIN_EXP..=MAX_EXP).contains(&exp) {
                return Err(format!("exponent {exp} out of float range"));
            }
            let bits = if exp >= -1022 {
                // Normal: 53-bit mantissa with the implicit bit dropped.
                let m = sig >> 11;
                (((exp + 1023) as u64) << 52) | (m & ((1u64 << 52) - 1))
            } else {
                // Subnormal: the top set bit sits at position exp + 1074 (0..=51).
                sig >> (63 - (exp + EXP_BIAS))
            };
            let f = f64::from_bits(bits);
            FiniteF64::new(if neg { -f } else { f })
                .map(IndexValue::Float)
                .map_err(|_| "float out of range".to_owned())
        }
        s => Err(format!("unknown numeric subtype {s}")),
    }
}

fn escape(out: &mut Vec<u8>, raw: &[u8]) {
    for &b in raw {
        if b == ESCAPE {
            out.extend_from_slice(&[ESCAPE, ESCAPED_NUL]);
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(&[ESCAPE, TERMINATOR]);
}

/// Returns the raw bytes and the number of encoded bytes consumed (including the terminator).
fn unescape(body: &[u8]) -> std::result::Result<(Vec<u8>, usize), &'static str> {
    let mut raw = Vec::new();
    let mut i = 0;
    while let Some(&b) = body.get(i) {
        if b != ESCAPE {
            raw.push(b);
            i += 1;
            continue;
        }
        match body.get(i + 1) {
            Some(&ESCAPED_NUL) => {
                raw.push(0);
                i += 2;
            }
            Some(&TERMINATOR) => return Ok((raw, i + 2)),
            Some(_) => return Err("invalid escape sequence"),
            None => return Err("truncated escape sequence"),
        }
    }
    Err("missing terminator")
}

/// The typed domain of an [`IndexValue`]: the first level of the documented order. Range
/// predicates compare only inside one domain (`gt 4000` never matches a string), and
/// [`domain_key_bounds`] gives each domain's contiguous slice of encoded keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueDomain {
    /// `null`.
    Null,
    /// `false` / `true`.
    Bool,
    /// Every i64, u64 and finite f64 (one numeric domain).
    Number,
    /// Timestamps.
    Timestamp,
    /// UTF-8 strings.
    String,
    /// Byte strings.
    Bytes,
}

impl ValueDomain {
    /// `[first type byte, last type byte + 1)` of the domain's encodings.
    fn type_bytes(self) -> (u8, u8) {
        match self {
            ValueDomain::Null => (TYPE_NULL, TYPE_NULL + 1),
            ValueDomain::Bool => (TYPE_BOOL, TYPE_BOOL + 1),
            ValueDomain::Number => (TYPE_NUM_NEG, TYPE_NUM_POS + 1),
            ValueDomain::Timestamp => (TYPE_TIMESTAMP, TYPE_TIMESTAMP + 1),
            ValueDomain::String => (TYPE_STRING, TYPE_STRING + 1),
            ValueDomain::Bytes => (TYPE_BYTES, TYPE_BYTES + 1),
        }
    }
}

/// The encoded-value bounds of one domain: every encoding `e` of a value of `domain` satisfies
/// `lower <= e < upper`, and no encoding of another domain does. Both bounds are 2-byte prefixes
/// (`codec_version | type byte`), never complete encodings.
pub fn domain_key_bounds(domain: ValueDomain) -> ([u8; 2], [u8; 2]) {
    let (lo, hi) = domain.type_bytes();
    ([VALUE_CODEC_VERSION, lo], [VALUE_CODEC_VERSION, hi])
}

/// The encoding prefix shared by every string value that starts with `prefix` (the version and
/// type bytes plus the escaped bytes of `prefix`, without the terminator): a `prefix` predicate
/// is one ordered scan over the keys starting with it.
///
/// Errors: [`Error::InvalidArgument`] when `prefix` is longer than [`MAX_VARIABLE_VALUE_BYTES`].
pub fn string_prefix_bound(prefix: &str) -> Result<Vec<u8>> {
    if prefix.len() > MAX_VARIABLE_VALUE_BYTES {
        return Err(Error::invalid(format!(
            "index string values are at most {MAX_VARIABLE_VALUE_BYTES} bytes, got {}",
            prefix.len()
        )));
    }
    let mut out = vec![VALUE_CODEC_VERSION, TYPE_STRING];
    for &b in prefix.as_bytes() {
        if b == ESCAPE {
            out.extend_from_slice(&[ESCAPE, ESCAPED_NUL]);
        } else {
            out.push(b);
        }
    }
    Ok(out)
}

/// Largest f64 strictly below 2^63 / 2^64 bounds used for exact integer conversion.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_64: f64 = 18_446_744_073_709_551_616.0;

impl IndexValue {
    /// The value's typed domain.
    pub fn domain(&self) -> ValueDomain {
        match self {
            IndexValue::Null => ValueDomain::Null,
            IndexValue::Bool(_) => ValueDomain::Bool,
            IndexValue::Int(_) | IndexValue::UInt(_) | IndexValue::Float(_) => ValueDomain::Number,
            IndexValue::Timestamp(_) => ValueDomain::Timestamp,
            IndexValue::String(_) => ValueDomain::String,
            IndexValue::Bytes(_) => ValueDomain::Bytes,
        }
    }

    /// The observed type name: `null`, `bool`, `int`, `uint`, `float`, `timestamp`, `string`
    /// or `bytes` (the catalog reports these).
    pub fn type_name(&self) -> &'static str {
        match self {
            IndexValue::Null => "null",
            IndexValue::Bool(_) => "bool",
            IndexValue::Int(_) => "int",
            IndexValue::UInt(_) => "uint",
            IndexValue::Float(_) => "float",
            IndexValue::Timestamp(_) => "timestamp",
            IndexValue::String(_) => "string",
            IndexValue::Bytes(_) => "bytes",
        }
    }

    /// The documented order *by value*: like [`Ord`] but without the `Int < UInt < Float`
    /// tie-break, so `Int(5)`, `UInt(5)` and `Float(5.0)` compare `Equal`. Queries use this for
    /// `eq`/`in`/ranges, facet buckets and group keys.
    pub fn value_cmp(&self, other: &IndexValue) -> Ordering {
        match (self.num(), other.num()) {
            (Some((a, _)), Some((b, _))) => a.cmp(&b),
            _ => self.cmp(other),
        }
    }

    /// `value_cmp(other) == Equal`.
    pub fn value_eq(&self, other: &IndexValue) -> bool {
        self.value_cmp(other) == Ordering::Equal
    }

    /// The value as an `f64` for aggregation (`None` for non-numbers; large integers round).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            IndexValue::Int(i) => Some(*i as f64),
            IndexValue::UInt(u) => Some(*u as f64),
            IndexValue::Float(f) => Some(f.get()),
            _ => None,
        }
    }

    /// Every stored representation equal by value to `self` (itself included): for a number the
    /// `Int`, `UInt` and `Float` values that hold it exactly, for anything else just `self`. An
    /// `eq` predicate seeks the exact encoding of each one.
    pub fn value_variants(&self) -> Vec<IndexValue> {
        let mut out = Vec::with_capacity(3);
        match self {
            IndexValue::Int(i) => {
                out.push(IndexValue::Int(*i));
                if let Ok(u) = u64::try_from(*i) {
                    out.push(IndexValue::UInt(u));
                }
                let f = *i as f64;
                if f < TWO_63 && f as i64 == *i {
                    out.push(IndexValue::Float(FiniteF64(if f == 0.0 { 0.0 } else { f })));
                }
            }
            IndexValue::UInt(u) => {
                if let Ok(i) = i64::try_from(*u) {
                    out.push(IndexValue::Int(i));
                }
                out.push(IndexValue::UInt(*u));
                let f = *u as f64;
                if f < TWO_64 && f as u64 == *u {
                    out.push(IndexValue::Float(FiniteF64(f)));
                }
            }
            IndexValue::Float(f) => {
                let v = f.get();
                if v.trunc() == v {
                    if (-TWO_63..TWO_63).contains(&v) {
                        out.push(IndexValue::Int(v as i64));
                    }
                    if (0.0..TWO_64).contains(&v) {
                        out.push(IndexValue::UInt(v as u64));
                    }
                }
                out.push(IndexValue::Float(*f));
            }
            other => out.push(other.clone()),
        }
        out
    }
}

impl PartialOrd for IndexValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for IndexValue {
    /// The documented order (module docs), computed from the values, not from their encodings.
    fn cmp(&self, other: &Self) -> Ordering {
        let by_type = self.type_rank().cmp(&other.type_rank());
        if by_type != Ordering::Equal {
            return by_type;
        }
        match (self, other) {
            (IndexValue::Null, IndexValue::Null) => Ordering::Equal,
            (IndexValue::Bool(a), IndexValue::Bool(b)) => a.cmp(b),
            (IndexValue::Timestamp(a), IndexValue::Timestamp(b)) => a.cmp(b),
            (IndexValue::String(a), IndexValue::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            (IndexValue::Bytes(a), IndexValue::Bytes(b)) => a.cmp(b),
            _ => match (self.num(), other.num()) {
                (Some((a, sa)), Some((b, sb))) => a.cmp(&b).then(sa.cmp(&sb)),
                // Unreachable: equal type ranks with a non-number pair were handled above.
                _ => Ordering::Equal,
            },
        }
    }
}

#[cfg(test)]
#[path = "index_value_tests.rs"]
mod tests;
