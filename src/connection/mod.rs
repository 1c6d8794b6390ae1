//! The Redis layer: configuration and URL parsing (TLS included), connecting
//! (and the ACL check made then),
//! the command connection with its retries, running Lua scripts (each kind
//! declares its own), the pub/sub hub, client tracking, and keys deleted
//! soon without a round trip of their own. It knows no lock kind.

pub(crate) mod acl;
pub(crate) mod config;
pub(crate) mod connect;
pub(crate) mod deferred_delete;
pub(crate) mod pubsub;
pub(crate) mod pubsub_commands;
pub(crate) mod redis;
pub(crate) mod script;
pub(crate) mod tls;
pub(crate) mod tracking;
