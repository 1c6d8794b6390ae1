//! What the crate tells its operators: the `tracing` spans and events
//! ([`traces`]) and, with the `metrics` feature, the metrics
//! (`metrics_recorded`) the README documents. Both capture per thread, so
//! tests do not see each other's output (`tests/secrets.rs`, which needs one
//! global subscriber, is a binary of its own).
mod common;

#[path = "observability/metrics_recorded.rs"]
mod metrics_recorded;
#[path = "observability/traces.rs"]
mod traces;
