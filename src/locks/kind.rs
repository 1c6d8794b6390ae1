//! The lock kinds as types: every [`Lock`](crate::Lock) and
//! [`LockGuard`](crate::LockGuard) carries its kind, the way `lock_api`
//! carries its raw lock, so what a kind cannot do does not compile
//! (re-entry of a non-reentrant lock, a fencing token of a plain lock, a
//! downgrade of a read lock).

/// Seals [`Kind`]: the kinds are Redisson's.
pub(crate) mod sealed {
    pub trait Sealed {}
}

/// What kind of lock a [`Lock`](crate::Lock) is: [`Reentrant`](crate::Reentrant),
/// [`NonReentrant`](crate::NonReentrant), [`Fair`](crate::Fair),
/// [`NonReentrantFair`](crate::NonReentrantFair), [`Read`](crate::Read),
/// [`Write`](crate::Write), [`Spin`](crate::Spin), [`Fenced`](crate::Fenced),
/// or [`AnyKind`] once erased. Sealed.
pub trait Kind: sealed::Sealed + std::fmt::Debug + Send + Sync + 'static {}

/// The kinds whose holder may take the lock again (hold count + 1):
/// [`LockGuard::reenter`](crate::LockGuard::reenter) exists only for them.
pub trait ReentrantKind: Kind {}

/// Any kind: what a [`MultiLock`](crate::MultiLock) sees of its members,
/// and what [`Lock::into_erased`](crate::Lock::into_erased) leaves.
#[derive(Debug)]
pub struct AnyKind {
    _private: (),
}

impl AnyKind {
    pub(crate) const fn new() -> AnyKind {
        AnyKind { _private: () }
    }
}

impl sealed::Sealed for AnyKind {}
impl Kind for AnyKind {}
