//! Types and helpers every layer uses and that know no lock kind and no
//! connection: errors, owners, wire names (key and channel layout), back-off, a
//! value observed by others, background work that outlives its caller (and the give-backs of permits
//! pending in it), and telemetry.

pub(crate) mod backoff;
pub(crate) mod detach;
pub(crate) mod error;
pub(crate) mod keys;
pub mod layout;
pub(crate) mod lost;
pub(crate) mod mapper;
pub(crate) mod observed;
pub(crate) mod owner;
pub(crate) mod pending;
pub(crate) mod telemetry;
pub(crate) mod time;
