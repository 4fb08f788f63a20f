//! Failed background checkpoints of the embedded metadata engine, made visible.
//!
//! holt flushes its in-memory delta and merges images on a background thread; a failure there
//! (an I/O error, or a damaged image block a merge has to read) loses nothing — the WAL and the
//! older images keep every commit — and is retried later, so every write keeps succeeding while
//! small images pile up. The engine only counts it (`holt::Stats::checkpoint_failures`). The
//! store's owners make it visible here, in one place shared by every front door:
//!
//! * a long-running owner ([`crate::client::Client::start_background_maintenance`], run by `nokv serve` and the
//!   embedded `nokv mcp`) checks on every maintenance pass and logs one warning each time the
//!   count has risen;
//! * every process logs one warning when it closes a store whose count is not zero (the last
//!   [`crate::client::Client`] clone dropping, after the engine's due background work has finished).
//!
//! The warnings are `tracing::warn!` events (the `nokv` binary writes them to stderr); they name
//! no local path and say to run `nokv fsck`, which scrubs every image block. `nokv serve` also
//! exports the count as `nokv_checkpoint_failures_total`.

use meta::MetaShard;

pub(crate) fn checkpoint_failures(meta: &MetaShard) -> u64 {
    meta.holt_db()
        .map_or(0, |db| db.stats().checkpoint_failures)
}

/// One maintenance-pass check of a long-running owner: logs one warning when the count of
/// failed background checkpoints is above `reported` (the count the previous warning named)
/// and returns the count to pass next time.
pub(crate) fn warn_if_checkpoint_failures_rose(meta: &MetaShard, reported: u64) -> u64 {
    let failures = checkpoint_failures(meta);
    if failures > reported {
        tracing::warn!(
            "{}",
            failures_message(failures, "since the store was opened")
        );
    }
    failures.max(reported)
}

/// The close-time check, run when the last [`crate::client::Client`] clone drops: waits for the engine's due
/// or running background checkpoint (the same wait the engine's own close does), then logs one
/// warning when any background checkpoint of this open failed.
pub(crate) fn warn_at_close(meta: &MetaShard) {
    let Some(db) = meta.holt_db() else {
        return;
    };
    db.wait_checkpointer_idle();
    let failures = db.stats().checkpoint_failures;
    if failures > 0 {
        tracing::warn!("{}", failures_message(failures, "while the store was open"));
    }
}

/// The warning's text: the count, when, and what to do. Names no local path (the engine's
/// error message does, so it is left out).
fn failures_message(failures: u64, when: &str) -> String {
    let times = if failures == 1 { "time" } else { "times" };
    format!(
        "background checkpoints of the metadata engine failed {failures} {times} {when}; the \
         WAL keeps every commit, but the store may have a damaged image block or an I/O \
         problem, and small images pile up until it is fixed: run `nokv fsck` on this store"
    )
}
