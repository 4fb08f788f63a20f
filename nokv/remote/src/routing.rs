//! Root routing of the remote client through the control plane (docs/design.md, "Distribution").
//!
//! A routed [`crate::client::RemoteClient`] names a root, not a server. Before a call it resolves
//! root → logical shard (the RootPlacement) → owner (the lease-bound shard-owner record) in the
//! control plane and sends the call to `http://<owner address>/roots/<root>/…` of that
//! `nokv serve --control` server. The owner is cached until a call to it fails with a
//! connection failure or answers `NotOwner` / `LeaseLost`; then the next attempt resolves
//! again. Writes keep their request id (`Idempotency-Key`) across every attempt.

use std::sync::Mutex;
use std::time::Duration;

#[cfg(feature = "control")]
use nokv::control::ControlPlane;
use nokv::error::{Error, Result};

/// How long a routed call keeps re-resolving and repeating by default: longer than a default
/// lease (10 s) plus the takeover of the shard by another server.
pub const DEFAULT_ROUTING_DEADLINE: Duration = Duration::from_secs(30);

/// How long a routed attempt waits for the response head by default before it re-resolves
/// the owner.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The control plane, the root and the cached owner of a routed client.
pub(crate) struct Routing {
    #[cfg(feature = "control")]
    control: ControlPlane,
    /// A build without the `control` feature never builds a routed client.
    #[cfg(not(feature = "control"))]
    control: std::convert::Infallible,
    #[cfg_attr(not(feature = "control"), allow(dead_code))]
    root: String,
    owner: Mutex<Option<String>>,
    deadline: Duration,
}

impl Routing {
    /// Errors: [`Error::InvalidArgument`] for bad URLs, namespace or root name.
    #[cfg(feature = "control")]
    pub(crate) fn new(control: &str, namespace: &str, root: &str) -> Result<Routing> {
        nokv::control::placement::validate_root_name(root)?;
        let endpoints = nokv::control::parse_control_url(control)?;
        Ok(Routing {
            control: ControlPlane::connect(endpoints, namespace)?,
            root: root.to_owned(),
            owner: Mutex::new(None),
            deadline: DEFAULT_ROUTING_DEADLINE,
        })
    }

    #[cfg(not(feature = "control"))]
    pub(crate) fn with_deadline(&self, _deadline: Duration) -> Routing {
        match self.control {}
    }

    #[cfg(feature = "control")]
    pub(crate) fn with_deadline(&self, deadline: Duration) -> Routing {
        Routing {
            control: self.control.clone(),
            root: self.root.clone(),
            owner: Mutex::new(self.owner.lock().ok().and_then(|o| o.clone())),
            deadline,
        }
    }

    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// `root NAME via URLS` (error messages, `RemoteClient::url`).
    #[cfg_attr(not(feature = "control"), allow(dead_code))]
    pub(crate) fn describe(&self) -> String {
        #[cfg(not(feature = "control"))]
        match self.control {}
        #[cfg(feature = "control")]
        format!(
            "root {} via {}",
            self.root,
            self.control.endpoints().join(",")
        )
    }

    /// The base URL of the root's current owner (`http://ADDR/roots/NAME`), cached.
    ///
    /// Errors: [`Error::Placement`] (`UnknownRoot`) when the control plane has no such root;
    /// [`Error::Connection`] (retryable) when no server owns the root's shard right now or the
    /// owner is an embedded process; [`Error::Meta`] when the control plane is unreachable.
    pub(crate) fn base(&self) -> Result<String> {
        if let Some(b) = self.owner.lock().ok().and_then(|o| o.clone()) {
            return Ok(b);
        }
        let base = self.resolve()?;
        if let Ok(mut o) = self.owner.lock() {
            *o = Some(base.clone());
        }
        Ok(base)
    }

    /// A build without the `control` feature never builds a routed client.
    #[cfg(not(feature = "control"))]
    fn resolve(&self) -> Result<String> {
        match self.control {}
    }

    /// The owner's base URL from the control plane (uncached); errors as [`Routing::base`].
    #[cfg(feature = "control")]
    fn resolve(&self) -> Result<String> {
        let record = self.control.root_by_name(&self.root)?.ok_or_else(|| {
            nokv::control::refused(
                nokv::control::PlacementErrorKind::UnknownRoot,
                format!("the control plane has no root named {:?}", self.root),
            )
        })?;
        let (owner, _) = self
            .control
            .shard_owner(&record.placement.logical_shard_id)?;
        let address = match owner {
            Some(o) if !o.address.is_empty() => o.address,
            Some(_) => {
                return Err(Error::Connection {
                    url: self.describe(),
                    reason: "an embedded process owns the root's shard; no server serves it".into(),
                })
            }
            None => {
                return Err(Error::Connection {
                    url: self.describe(),
                    reason: "no server owns the root's shard right now".into(),
                })
            }
        };
        Ok(format!(
            "http://{address}/roots/{}",
            crate::wire::encode_component(&self.root)
        ))
    }

    /// Drops the cached owner if it is still `base`.
    pub(crate) fn forget(&self, base: &str) {
        if let Ok(mut o) = self.owner.lock() {
            if o.as_deref() == Some(base) {
                *o = None;
            }
        }
    }

    /// Drops the cached owner.
    pub(crate) fn forget_all(&self) {
        if let Ok(mut o) = self.owner.lock() {
            *o = None;
        }
    }
}

/// Whether a transport refusal `code` redirects to another owner.
pub(crate) fn is_redirect(code: &str) -> bool {
    matches!(code, "NotOwner" | "LeaseLost")
}

/// Whether a routed call repeats after `e`: connection failures (the owner died or is being
/// replaced), redirects, retryable refusals, and an unreachable control plane.
pub(crate) fn reroutes(e: &Error) -> bool {
    match e {
        Error::Connection { .. } => true,
        Error::Server {
            code, retryable, ..
        } => *retryable || is_redirect(code),
        Error::Meta(meta::Error::StoreUnavailable { .. }) => true,
        _ => false,
    }
}
