//! The Redis layer: configuration and URL parsing (TLS included), the
//! command connection with its retries, the Lua scripts and their calls, the
//! pub/sub hub, and the deletion of unlock latches. It knows no lock kind.

pub(crate) mod config;
pub(crate) mod pubsub;
pub(crate) mod pubsub_commands;
pub(crate) mod redis;
pub(crate) mod script;
pub(crate) mod tls;
pub(crate) mod unlock_latches;
