//! Exact JSON numbers (docs/workbench.md, "Numbers": structured reads return JSON numbers exactly as
//! stored — no rounding of large integers or long decimals).
//!
//! The workspace builds `serde_json` with `arbitrary_precision`, so a parsed
//! [`serde_json::Number`] keeps the caller's token digit for digit and serializing it writes the
//! same token back. This module is the one place that interprets such tokens:
//!
//! - [`canonical_number`]: the number form of canonical JSON (commit manifests, snapshot
//!   annotations). Integers are written as their exact digits. Other numbers are written as their
//!   exact decimal value in the layout serde_json uses for an `f64` (shortest digits; `1000.0`,
//!   `0.001`, `1.5e-7`, `1e+22`): every number an `f64` holds exactly as its shortest form is
//!   therefore written as before `arbitrary_precision` (same digests), and a longer decimal is
//!   kept, never rounded.
//!
//! With `arbitrary_precision`, serde_json keeps every digit of a token but writes an exponent
//! as `e+N` / `e-N` (`1E5` reads back as `1e+5`); the value and its digits are unchanged.
//! - [`exact_f64`]: the `f64` of a token only when that `f64`'s shortest form has the token's
//!   exact value (`0.1`, `1.50`, `2e3`), so an index never stores a rounded number.
//! - [`exact_index_number`]: the typed index value of a number (`Int`, `UInt` or `Float`), or an
//!   error naming why it has none.

use serde_json::Number;

use meta::index::IndexValue;

/// A finite decimal `(-1)^negative × digits × 10^exponent`; `digits` has no leading or trailing
/// zeros (empty for zero).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decimal {
    /// Sign (also kept for zero, so `-0.0` stays `-0.0`).
    pub negative: bool,
    /// Significant decimal digits, no leading or trailing zeros; empty for zero.
    pub digits: String,
    /// Power of ten of the last digit.
    pub exponent: i64,
}

impl Decimal {
    /// Parses a JSON number token (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`). `None` for
    /// anything else, or an exponent beyond ±2^62.
    pub fn parse(token: &str) -> Option<Decimal> {
        let (negative, rest) = match token.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, token),
        };
        let (mantissa, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (int, frac) = match mantissa.split_once('.') {
            Some((i, f)) => (i, f),
            None => (mantissa, ""),
        };
        let int_ok = int == "0" || (int.starts_with(|c: char| ('1'..='9').contains(&c)));
        if !int_ok
            || !int.bytes().all(|b| b.is_ascii_digit())
            || (mantissa.contains('.') && frac.is_empty())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let mut exponent: i64 = match exp {
            None => 0,
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let magnitude: i64 = digits
                    .trim_start_matches('0')
                    .parse::<i64>()
                    .ok()
                    .or_else(|| digits.bytes().all(|b| b == b'0').then_some(0))?;
                if magnitude > 1 << 62 {
                    return None;
                }
                if e.starts_with('-') {
                    -magnitude
                } else {
                    magnitude
                }
            }
        };
        let mut digits = String::with_capacity(int.len() + frac.len());
        digits.push_str(int);
        digits.push_str(frac);
        exponent = exponent.checked_sub(i64::try_from(frac.len()).ok()?)?;
        let trimmed_end = digits.trim_end_matches('0');
        exponent = exponent.checked_add(i64::try_from(digits.len() - trimmed_end.len()).ok()?)?;
        let digits = trimmed_end.trim_start_matches('0').to_string();
        if digits.is_empty() {
            exponent = 0;
        }
        Some(Decimal {
            negative,
            digits,
            exponent,
        })
    }

    /// The decimal in the layout serde_json uses for an `f64`: plain notation when the first
    /// digit's power of ten is in -5..=15 (`12340000000.0`, `12.34`, `0.00001234`), else
    /// `d.ddde+x` / `d.ddde-x`.
    pub fn to_float_layout(&self) -> String {
        let mut out = String::new();
        if self.negative {
            out.push('-');
        }
        if self.digits.is_empty() {
            out.push_str("0.0");
            return out;
        }
        let len = self.digits.len() as i64;
        let k = self.exponent;
        let kk = len + k; // 10^(kk-1) <= |v| < 10^kk
        if (0..=16).contains(&kk) && k >= 0 {
            out.push_str(&self.digits);
            out.extend(std::iter::repeat_n('0', k as usize));
            out.push_str(".0");
        } else if 0 < kk && kk <= 16 {
            let (a, b) = self.digits.split_at(kk as usize);
            out.push_str(a);
            out.push('.');
            out.push_str(b);
        } else if -5 < kk && kk <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-kk) as usize));
            out.push_str(&self.digits);
        } else {
            let (a, b) = self.digits.split_at(1);
            out.push_str(a);
            if !b.is_empty() {
                out.push('.');
                out.push_str(b);
            }
            let exp = kk - 1;
            out.push_str(if exp < 0 { "e-" } else { "e+" });
            out.push_str(&exp.unsigned_abs().to_string());
        }
        out
    }
}

/// Whether a number token is an integer literal (no fraction, no exponent).
pub fn is_integer_token(token: &str) -> bool {
    !token.contains(['.', 'e', 'E'])
}

/// The canonical-JSON form of a number (see the module docs): integer literals as their exact
/// digits (`-0` as `0`), other numbers as their exact decimal in the `f64` layout. A token that
/// does not parse (not reachable from serde_json) is returned unchanged.
pub fn canonical_number(n: &Number) -> String {
    let token = n.to_string();
    if is_integer_token(&token) {
        return if token == "-0" { "0".into() } else { token };
    }
    match Decimal::parse(&token) {
        Some(d) => d.to_float_layout(),
        None => token,
    }
}

/// The `f64` of a number when its shortest form has exactly the number's decimal value
/// (`0.1`, `1.50`, `2e3`, `-0.0`), `None` when an `f64` would round it or it is out of range.
pub fn exact_f64(n: &Number) -> Option<f64> {
    let token = n.to_string();
    let wanted = Decimal::parse(&token)?;
    let f = token.parse::<f64>().ok().filter(|f| f.is_finite())?;
    let shortest = Number::from_f64(f)?.to_string();
    let got = Decimal::parse(&shortest)?;
    (got.digits == wanted.digits && got.exponent == wanted.exponent).then_some(f)
}

/// The typed index value of a JSON number: integer literals within i64 as `Int`, within u64 as
/// `UInt`, other numbers as `Float` when [`exact_f64`] holds them.
///
/// Errors: a message saying why the number has no exact index representation (an integer beyond
/// 64 bits, a decimal an `f64` would round, or a value beyond the `f64` range); callers turn it
/// into their typed `InvalidArgument` / `InvalidArguments` — an index never stores a rounded
/// number.
pub fn exact_index_number(n: &Number) -> Result<IndexValue, String> {
    let token = n.to_string();
    if is_integer_token(&token) {
        if let Ok(i) = token.parse::<i64>() {
            return Ok(IndexValue::Int(i));
        }
        if let Ok(u) = token.parse::<u64>() {
            return Ok(IndexValue::UInt(u));
        }
        return Err(format!(
            "the integer {token} does not fit in 64 bits, so an index cannot hold it exactly; store it as a string"
        ));
    }
    let f = exact_f64(n).ok_or_else(|| {
        format!(
            "the number {token} cannot be held exactly by an index (64-bit floating point would round it); store it as a string"
        )
    })?;
    IndexValue::float(f).map_err(|e| format!("the number {token}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Number {
        s.parse().expect("number")
    }

    #[test]
    fn tokens_are_kept_digit_for_digit() {
        for t in [
            "12345678901234567890123",
            "-99999999999999999999",
            "0.1000000000000000000001",
            "1.50",
            "1e+400",
            "-2.5e-300",
        ] {
            assert_eq!(num(t).to_string(), t);
        }
        // Only the exponent's spelling is normalized.
        assert_eq!(num("1E400").to_string(), "1e+400");
    }

    #[test]
    fn canonical_numbers_match_the_f64_layout_for_f64_values() {
        for (t, want) in [
            ("1", "1"),
            ("-0", "0"),
            ("18446744073709551615", "18446744073709551615"),
            ("12345678901234567890123", "12345678901234567890123"),
            ("1.0", "1.0"),
            ("1.50", "1.5"),
            ("1e3", "1000.0"),
            ("1E+3", "1000.0"),
            ("0.001", "0.001"),
            ("1e-7", "1e-7"),
            ("1.5e-7", "1.5e-7"),
            ("1e22", "1e+22"),
            ("0.00001234", "0.00001234"),
            ("1234e-9", "1.234e-6"),
            ("-0.0", "-0.0"),
            ("123456789012345678.5", "1.234567890123456785e+17"),
            ("0.1000000000000000000001", "0.1000000000000000000001"),
            ("1e400", "1e+400"),
        ] {
            assert_eq!(canonical_number(&num(t)), want, "{t}");
        }
        // Every f64 the old canonical form wrote keeps its bytes.
        for f in [
            0.1,
            2.5,
            1e16,
            1e-5,
            123.456,
            -7.25e-12,
            1.7976931348623157e308,
        ] {
            let old = serde_json::to_string(&f).unwrap();
            assert_eq!(canonical_number(&num(&old)), old, "{f}");
        }
    }

    #[test]
    fn exact_f64_refuses_values_an_f64_would_round() {
        assert_eq!(exact_f64(&num("0.1")), Some(0.1));
        assert_eq!(exact_f64(&num("1.50")), Some(1.5));
        assert_eq!(exact_f64(&num("2e3")), Some(2000.0));
        assert_eq!(exact_f64(&num("0.1000000000000000000001")), None);
        assert_eq!(exact_f64(&num("1e400")), None);
        assert_eq!(exact_f64(&num("12345678901234567890123.0")), None);
    }

    #[test]
    fn index_numbers_are_exact_or_refused() {
        assert_eq!(exact_index_number(&num("-5")), Ok(IndexValue::Int(-5)));
        assert_eq!(
            exact_index_number(&num("18446744073709551615")),
            Ok(IndexValue::UInt(u64::MAX))
        );
        assert_eq!(
            exact_index_number(&num("2.5")),
            Ok(IndexValue::float(2.5).unwrap())
        );
        assert!(exact_index_number(&num("12345678901234567890123")).is_err());
        assert!(exact_index_number(&num("-99999999999999999999")).is_err());
        assert!(exact_index_number(&num("0.1000000000000000000001")).is_err());
    }

    #[test]
    fn malformed_tokens_do_not_parse() {
        for t in ["", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "--1"] {
            assert_eq!(Decimal::parse(t), None, "{t}");
        }
    }
}
