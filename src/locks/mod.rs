//! The lock kinds: each file is one kind's protocol (its scripts, keys and
//! channel), its type and its factory method on [`Client`](crate::Client);
//! [`MultiLock`](crate::MultiLock) takes several as one.

pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod guard;
pub(crate) mod kind;
pub(crate) mod lock;
pub(crate) mod multi;
pub(crate) mod owned;
pub(crate) mod rlock;
pub(crate) mod rwlock;
pub(crate) mod spin;
