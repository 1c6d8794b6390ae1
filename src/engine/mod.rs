//! The lock engine, the same for every kind: the kinds as types, the generic
//! [`Lock`](crate::Lock) handle, the typed guard over the untyped hold, the
//! acquire/release loop and the wait loop the synchronizers share.

pub(crate) mod acquire;
pub(crate) mod armed;
pub(crate) mod events;
pub(crate) mod hold;
pub(crate) mod permits;
pub(crate) mod protocol;
pub(crate) mod raw;
pub(crate) mod registration;
pub(crate) mod registry;
pub(crate) mod renewal;
pub(crate) mod script_env;
pub(crate) mod shared;
pub(crate) mod unlock;
pub(crate) mod watch;
pub(crate) mod watches;
