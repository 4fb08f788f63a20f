//! Expiring workbenches (docs/metadata-format.md, "Workbench Expiry"): [`Client::expire_workbench`]
//! records, moves or removes a workbench's expiry deadline; [`Client::workbench_expired_at`] says
//! whether (and since when) a workbench is expired, which every front door uses to answer
//! `NotFound` with the reason. The next GC pass removes an expired workbench's paths; commits,
//! tags and snapshots keep what they reference, and a commit stays restorable.
//!
//! The text forms every front door accepts are parsed here once: durations such as `90m`, `2h`,
//! `7d` ([`parse_duration`]) and RFC 3339 times ([`parse_time`]); [`format_time`] writes a Unix
//! millisecond as RFC 3339 in UTC.

use std::time::Duration;

use serde_json::{json, Value};

use crate::client::Client;
use crate::error::{Error, Result};
pub use meta::ops::expiry::{ExpiredWorkbench, ExpiryReceipt, ExpirySetting};

/// The expiry a caller asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Expire this long after now on the store clock.
    After(Duration),
    /// Expire at this Unix millisecond (at or before now: at once).
    At(u64),
    /// Never expire (removes a deadline).
    Never,
}

/// Parses a duration: one or more `<integer><unit>` groups, units `s`, `m`, `h`, `d`, `w`
/// (seconds, minutes, hours, days, weeks), e.g. `90m`, `2h`, `7d`, `1d12h`.
///
/// Errors: [`Error::InvalidArgument`] naming the accepted form (empty text, a missing number or
/// unit, an unknown unit, a duration longer than any deadline a workbench may have:
/// [`meta::ops::expiry::MAX_DEADLINE_UNIX_MS`] milliseconds after 1970).
pub fn parse_duration(text: &str) -> Result<Duration> {
    let bad = || {
        Error::InvalidArgument(format!(
            "`{text}` is not a duration: use a number and a unit s, m, h, d or w, e.g. 90m, 2h, 7d"
        ))
    };
    let mut total: u64 = 0;
    let mut digits = String::new();
    if text.is_empty() {
        return Err(bad());
    }
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: u64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    if total.saturating_mul(1000) > meta::ops::expiry::MAX_DEADLINE_UNIX_MS {
        return Err(Error::InvalidArgument(format!(
            "`{text}` is longer than any expiry can be: deadlines end at 9999-12-31T23:59:59.999Z"
        )));
    }
    Ok(Duration::from_secs(total))
}

/// Parses an RFC 3339 date-time (`2026-12-24T18:00:00Z`, `2026-12-24T19:00:00+01:00`) to Unix
/// milliseconds.
///
/// Errors: [`Error::InvalidArgument`] for other text or a time before 1970.
pub fn parse_time(text: &str) -> Result<u64> {
    let bad = || {
        Error::InvalidArgument(format!(
            "`{text}` is not an RFC 3339 time after 1970, e.g. 2026-12-24T18:00:00Z"
        ))
    };
    let t = meta::index::Timestamp::parse_rfc3339(text).ok_or_else(bad)?;
    let seconds = u64::try_from(t.seconds()).map_err(|_| bad())?;
    seconds
        .checked_mul(1000)
        .and_then(|ms| ms.checked_add(u64::from(t.nanos() / 1_000_000)))
        .ok_or_else(bad)
}

/// A Unix millisecond as RFC 3339 in UTC (`2026-12-24T18:00:00Z`, milliseconds when not zero).
pub fn format_time(unix_ms: u64) -> String {
    meta::index::Timestamp::from_unix_millis(i64::try_from(unix_ms).unwrap_or(i64::MAX))
        .to_rfc3339()
}

/// The JSON result of an expiry change, as every front door prints it: `status`,
/// `workbench_id`, `expires_at` (RFC 3339 or null) and `expires_at_unix_ms`,
/// `previous_expires_at` and `previous_expires_at_unix_ms`, `expired` (the workbench is expired
/// now), `clock` and `clock_unix_ms` (the store clock the decision used), `changed` and
/// `commit_version` (null when the setting was already recorded).
pub fn receipt_envelope(r: &ExpiryReceipt) -> Value {
    json!({
        "status": "success",
        "workbench_id": r.workbench_id,
        "expires_at": r.expires_at_unix_ms.map(format_time),
        "expires_at_unix_ms": r.expires_at_unix_ms,
        "previous_expires_at": r.previous_expires_at_unix_ms.map(format_time),
        "previous_expires_at_unix_ms": r.previous_expires_at_unix_ms,
        "expired": r.expired,
        "clock": format_time(r.clock_unix_ms),
        "clock_unix_ms": r.clock_unix_ms,
        "changed": r.commit_version.is_some(),
        "commit_version": r.commit_version,
    })
}

/// The receipt of a [`receipt_envelope`] (a server's answer).
///
/// Errors: [`Error::InvalidArgument`] naming the missing or malformed field.
pub fn receipt_from_envelope(v: &Value) -> Result<ExpiryReceipt> {
    let bad =
        |field: &str| Error::InvalidArgument(format!("the expiry result lacks a valid `{field}`"));
    let opt_u64 = |field: &str| -> Result<Option<u64>> {
        match v.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(x) => x.as_u64().map(Some).ok_or_else(|| bad(field)),
        }
    };
    Ok(ExpiryReceipt {
        workbench_id: v
            .get("workbench_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("workbench_id"))?
            .to_owned(),
        expires_at_unix_ms: opt_u64("expires_at_unix_ms")?,
        previous_expires_at_unix_ms: opt_u64("previous_expires_at_unix_ms")?,
        expired: v
            .get("expired")
            .and_then(Value::as_bool)
            .ok_or_else(|| bad("expired"))?,
        clock_unix_ms: opt_u64("clock_unix_ms")?.ok_or_else(|| bad("clock_unix_ms"))?,
        commit_version: opt_u64("commit_version")?,
    })
}

impl Client {
    /// Records, moves or removes the expiry deadline of the live workbench `workbench_id`
    /// (docs/metadata-format.md, "Workbench Expiry"). [`Expiry::After`] counts from the store
    /// clock (`max(this client's clock, the store's persisted clock)`); a deadline at or before
    /// it expires the workbench at once. Once expired, a workbench is not listed and answers
    /// `NotFound` through every front door, and no clock set back brings it back; the next GC
    /// pass removes its paths.
    ///
    /// Errors: [`Error::InvalidArgument`] (invalid id, a deadline beyond the clock's range);
    /// [`Error::WorkbenchNotFound`] when the workbench does not exist or is already expired
    /// (see [`Client::workbench_expired_at`]); [`Error::ReadOnlyStore`]; `Error::Meta` for
    /// fencing and storage failures.
    pub fn expire_workbench(&self, workbench_id: &str, expiry: Expiry) -> Result<ExpiryReceipt> {
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let setting = match expiry {
            Expiry::Never => ExpirySetting::Never,
            Expiry::At(ms) => ExpirySetting::At(ms),
            Expiry::After(d) => {
                ExpirySetting::After(u64::try_from(d.as_millis()).map_err(|_| {
                    Error::InvalidArgument("the expiry is beyond the clock's range".into())
                })?)
            }
        };
        Ok(self.meta().set_workspace_expiry(
            workbench_id,
            setting,
            self.snapshot_policy().skew_grace_ms,
        )?)
    }

    /// When `workbench_id` expired (its deadline, Unix ms), if it is expired — recorded
    /// `Expired`, or past its deadline on the store clock; `None` for a live workbench, one
    /// without a deadline, or a name that does not exist. One point read (two with a deadline).
    ///
    /// Errors: [`Error::InvalidArgument`] for an invalid id; `Error::Meta` for storage failures.
    pub fn workbench_expired_at(&self, workbench_id: &str) -> Result<Option<u64>> {
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        Ok(self.meta().read().workspace_expired_at(workbench_id)?)
    }

    /// The expiry deadline recorded for the live workbench `workbench_id`, Unix ms (`None`: it
    /// never expires).
    ///
    /// Errors: [`Error::WorkbenchNotFound`] (absent or expired); [`Error::InvalidArgument`];
    /// `Error::Meta` for storage failures.
    pub fn workbench_expiry(&self, workbench_id: &str) -> Result<Option<u64>> {
        meta::validate_workbench_id(workbench_id)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        Ok(self
            .meta()
            .read()
            .visible_workspace(workbench_id)?
            .expires_at_unix_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_unit_and_refuse_other_text() {
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(5_400));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7_200));
        assert_eq!(parse_duration("7d").unwrap(), Duration::from_secs(604_800));
        assert_eq!(parse_duration("1w").unwrap(), Duration::from_secs(604_800));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_duration("1d12h").unwrap(),
            Duration::from_secs(129_600)
        );
        for bad in [
            "",
            "5",
            "h",
            "2x",
            "-1h",
            "1.5h",
            "2 h",
            "99999999999999999999d",
        ] {
            assert!(
                matches!(parse_duration(bad), Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn times_parse_as_rfc3339_and_round_trip() {
        let ms = parse_time("2026-12-24T18:00:00Z").unwrap();
        assert_eq!(ms, 1_798_135_200_000);
        assert_eq!(format_time(ms), "2026-12-24T18:00:00Z");
        assert_eq!(parse_time("2026-12-24T19:00:00+01:00").unwrap(), ms);
        assert_eq!(parse_time("2026-12-24T18:00:00.250Z").unwrap(), ms + 250);
        for bad in ["tomorrow", "2026-12-24", "1969-12-31T23:59:59Z", ""] {
            assert!(
                matches!(parse_time(bad), Err(Error::InvalidArgument(_))),
                "{bad:?}"
            );
        }
    }
}
