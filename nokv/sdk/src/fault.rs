//! Crash points for process-kill tests: the one fault-point mechanism of the SDK.
//!
//! Every durable state machine the SDK drives (publication, idempotent append, multipart
//! upload, commit, restore, GC) calls [`point`] with a stable name right after a phase boundary
//! has been made durable: `after-begin`, `after-upload`, `after-finalizing-cas` (only a body
//! staged over several ledger commands has a separate Finalizing step), `after-publish` (the
//! publication is durable; the caller has not been answered), `multipart-after-upload-id`, `multipart-after-first-part`, `move-after-command` (a path
//! move is durable; the caller has not been answered), `commit-after-<step>`,
//! `restore-after-<phase>`, `gc-after-<phase>`. With the cargo feature `fault-points`, a process
//! whose [`FAULT_POINT_ENV`] names that point writes `NOKV_FAULT_POINT reached: <name>` to
//! stderr and kills itself with SIGKILL — no destructor, flush or cleanup runs, exactly as when
//! the machine loses the process there. A test either waits for the process to die or reads the
//! stderr line first (killing an already dead child is harmless). Without the feature, [`point`]
//! compiles to nothing.
//!
//! The in-process stop of a restore ([`crate::restore::RestoreOptions::interrupt_after`]) uses
//! the same names.

/// Environment variable naming the fault point at which a `fault-points` build kills itself.
pub const FAULT_POINT_ENV: &str = "NOKV_FAULT_POINT";

/// Kills the process with SIGKILL when the `fault-points` feature is on and [`FAULT_POINT_ENV`]
/// names `name` (see the module docs). Falls back to `abort` if the `kill` command cannot be run.
#[cfg(feature = "fault-points")]
pub fn point(name: &str) {
    if std::env::var(FAULT_POINT_ENV).is_ok_and(|v| v == name) {
        eprintln!("NOKV_FAULT_POINT reached: {name}; sending SIGKILL to self");
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        std::process::abort();
    }
}

/// Fault points are compiled out without the `fault-points` feature.
#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn point(_name: &str) {}
