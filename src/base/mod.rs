//! Types and helpers every layer uses and that know no lock kind and no
//! connection: errors, owners, wire names (key and channel layout), back-off,
//! a value observed by others, and telemetry.

pub(crate) mod backoff;
pub(crate) mod error;
pub(crate) mod keys;
pub mod layout;
pub(crate) mod lost;
pub(crate) mod mapper;
pub(crate) mod observed;
pub(crate) mod owner;
pub(crate) mod telemetry;
pub(crate) mod time;
