//! JSON encodings shared by the SDK and every front door: the one canonical-JSON function and
//! commit identity ([`canonical`]), tool payload decoding ([`payload`]) and exact JSON numbers
//! ([`numbers`]). Leaf modules: they depend on the protocol's error type and `meta`'s index value
//! only, never on the client.

pub mod canonical;
pub mod numbers;
pub mod payload;
