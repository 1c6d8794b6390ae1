//! [`ReadWriteLock`]: Redisson's `RedissonReadWriteLock` (docs/PROTOCOL.md §5).
//!
//! One hash `N` shared by both halves: field `mode` (`read` or `write`), one
//! field per reader `<clientId>:<ownerId>` holding its read count, and at most
//! one writer field `<clientId>:<ownerId>:write`. Each read acquisition also
//! writes a timeout key `{N}:<owner>:rwlock_timeout:<k>` with the lease, so a
//! reader's unlock can shrink the hash's TTL to the longest-lived remaining
//! reader and drop the hash when every other reader is dead. Both halves
//! publish on `redisson_rwlock:{N}`: `0` from a read release (wakes one local
//! waiter), `1` from a write release (wakes all).
//!
//! Deviation from Redisson, deliberately: when a write unlock downgrades the
//! lock to `read` (the writer still holds read locks), this crate also
//! publishes `1`, so waiting readers (Rust and Java) re-check at once instead
//! of sleeping until the writer's TTL; on Java's side the extra message only
//! causes a harmless re-check.

use std::sync::Arc;

use fred::types::{Key, Value};

use crate::base::error::{Error, Result};
use crate::base::keys::LockKeys;
use crate::base::layout;
use crate::client::Client;
use crate::connection::script::{script, Script, ScriptCall};
use crate::engine::protocol::{Protocol, Take, Unlock};
use crate::engine::registry::Renewal;
use crate::engine::script_env::ScriptEnv;
use crate::locks::guard::LockGuard;
use crate::locks::kind::{sealed, Kind, ReentrantKind};
use crate::locks::lock::Lock;
use crate::locks::rlock::{force_unlock_call, lease_owner_call, unlock_call};

// The scripts this module runs (`lua/`, embedded at build time).
script!(RW_READ_LOCK, "args.lua", "rw_read_lock.lua");
script!(RW_READ_UNLOCK, "args.lua", "rw_read_unlock.lua");
script!(RW_WRITE_LOCK, "args.lua", "rw_write_lock.lua");
script!(RW_WRITE_UNLOCK, "args.lua", "rw_write_unlock.lua");
script!(RW_READ_FORCE_UNLOCK, "args.lua", "rw_read_force_unlock.lua");
script!(
    RW_WRITE_FORCE_UNLOCK,
    "args.lua",
    "rw_write_force_unlock.lua"
);
script!(RW_READ_IS_LOCKED, "rw_read_is_locked.lua");
script!(RW_WRITE_IS_LOCKED, "rw_write_is_locked.lua");
script!(RW_RENEW_READ, "args.lua", "rw_renew_read.lua");

/// The read half of a [`ReadWriteLock`] (Redisson's `readLock()`): shared
/// among readers, excluded by a writer other than the reader itself.
pub type ReadLock = Lock<Read>;

/// The write half of a [`ReadWriteLock`] (Redisson's `writeLock()`):
/// exclusive, reentrant per owner.
pub type WriteLock = Lock<Write>;

/// Redisson's read-write lock (`getReadWriteLock(name)`): a handle that hands
/// out its [`read`](Self::read) and [`write`](Self::write) halves. Cheap to
/// clone; no command is sent until a half is used.
///
/// Acquisitions follow the crate's owner model: each gets a fresh
/// [`Owner`](crate::Owner) unless the half was made with
/// [`with_owner`](Lock::with_owner). A writer that wants to read (re-entry
/// across halves) must therefore use the same owner on both halves, as a
/// Java thread does; [`LockGuard::downgrade`] does it for a write guard:
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let rw = client.read_write_lock("catalog")?;
/// let write = rw.write().lock().await?;
/// // ... update ...
/// let read = write.downgrade().await?; // now held for reading only; readers wake
/// read.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    client: Client,
    keys: Arc<RwKeys>,
}

impl Client {
    /// A handle to the read-write lock `name` (Redisson's
    /// `getReadWriteLock(name)`): readers share it, a writer excludes
    /// everyone else. No command is sent.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for an empty name.
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        Ok(ReadWriteLock {
            client: self.clone(),
            keys: Arc::new(RwKeys::new(&self.map_name(name)?)?),
        })
    }
}

impl ReadWriteLock {
    /// The lock's name (the Redis key of its hash).
    pub fn name(&self) -> &str {
        &self.keys.lock.name
    }

    /// The channel both halves publish on (`redisson_rwlock:{N}`, after the
    /// name mapper).
    pub fn channel(&self) -> &str {
        &self.keys.lock.channel
    }

    /// The read half.
    pub fn read(&self) -> ReadLock {
        let kind = Arc::new(Read {
            keys: self.keys.clone(),
        });
        Lock::new(self.client.clone(), kind.clone(), kind)
    }

    /// The write half.
    pub fn write(&self) -> WriteLock {
        let kind = Arc::new(Write {
            keys: self.keys.clone(),
        });
        Lock::new(self.client.clone(), kind.clone(), kind)
    }
}

/// The [`ReadLock`] kind and its scripts (docs/PROTOCOL.md §5.2, §5.3, §5.6, §5.7).
#[derive(Debug)]
pub struct Read {
    keys: Arc<RwKeys>,
}

impl sealed::Sealed for Read {}
impl Kind for Read {}
impl ReentrantKind for Read {}

/// The [`WriteLock`] kind and its scripts (docs/PROTOCOL.md §5.4, §5.5, §5.7);
/// renewed like an RLock, with the `:write` field.
#[derive(Debug)]
pub struct Write {
    keys: Arc<RwKeys>,
}

impl sealed::Sealed for Write {}
impl Kind for Write {}
impl ReentrantKind for Write {}

impl ReadLock {
    /// The channel read and write releases are published on
    /// (`redisson_rwlock:{N}`, after the name mapper).
    pub fn channel(&self) -> &str {
        &self.kind.keys.lock.channel
    }
}

impl WriteLock {
    /// The channel read and write releases are published on
    /// (`redisson_rwlock:{N}`, after the name mapper).
    pub fn channel(&self) -> &str {
        &self.kind.keys.lock.channel
    }
}

impl LockGuard<Write> {
    /// Turn this write hold into a read hold of the same owner, atomically
    /// for other writers: the read lock is taken first (the writer may
    /// read), then the write hold released, which publishes so that waiting
    /// readers (Rust and Java) re-check at once. The read hold keeps this
    /// guard's lease (or the watchdog).
    ///
    /// # Errors
    ///
    /// [`Error::NotHeld`] if this hold was lost; a transient error if Redis
    /// could not be reached for the read acquisition (tried once), or
    /// through `retry_attempts` retries of the write release;
    /// [`Error::Closed`] after [`Client::shutdown`](crate::Client::shutdown).
    /// On any error, the write hold is released as if the guard were dropped
    /// (in the background), and so is a read hold already taken.
    ///
    /// # Cancel safety
    ///
    /// This guard is moved into the future: dropping the future part-way
    /// releases the write hold in the background, and a read hold taken so
    /// far (or whose command was on its way) too. The lock is then free,
    /// not downgraded.
    pub async fn downgrade(self) -> Result<LockGuard<Read>> {
        let reading = self.read_hold().await?;
        self.unlock().await?;
        Ok(reading)
    }

    /// The first half of [`downgrade`](Self::downgrade): a read hold of
    /// this guard's owner, taken while the write hold is kept.
    pub(crate) async fn read_hold(&self) -> Result<LockGuard<Read>> {
        let kind = Arc::new(Read {
            keys: self.kind().keys.clone(),
        });
        let client = crate::client::Client {
            inner: self.hold().raw().inner().clone(),
        };
        let read = Lock::new(client, kind.clone(), kind).with_owner(self.owner());
        if self.is_lost() {
            return Err(Error::NotHeld {
                name: self.name().to_owned(),
                owner: self.field().to_owned(),
            });
        }
        let reading = match self.lease() {
            Some(lease) => {
                read.try_lock_for_with_lease(std::time::Duration::ZERO, lease)
                    .await?
            }
            None => read.try_lock().await?,
        };
        reading.ok_or_else(|| Error::NotHeld {
            name: self.name().to_owned(),
            owner: self.field().to_owned(),
        })
    }
}

/// The names derived from `N` (docs/PROTOCOL.md §5.1, §1.4).
#[derive(Debug)]
struct RwKeys {
    /// `N`, the hash; its channel `redisson_rwlock:{N}`; its latches.
    lock: LockKeys,
    /// `{N}` (or `N` if it contains `{`): the start of every timeout key.
    key_prefix: String,
}

impl RwKeys {
    fn new(name: &str) -> Result<RwKeys> {
        let mut lock = LockKeys::new(name)?;
        lock.channel = layout::rw_channel(name);
        Ok(RwKeys {
            lock,
            key_prefix: layout::rw_key_prefix(name),
        })
    }

    /// `sfx(N, field) + ":rwlock_timeout"`; the read count `:<k>` follows.
    fn timeout_prefix(&self, field: &str) -> String {
        layout::rw_timeout_prefix(&self.lock.name, field)
    }

    /// The call of one half's read-only `isLocked` script: KEYS `[N]`.
    fn is_locked(&self, script: &'static Script) -> ScriptCall {
        ScriptCall::new(script, &[&self.lock.name], Vec::new())
    }
}

impl Protocol for Read {
    fn kind_label(&self) -> &'static str {
        "read_lock"
    }

    fn keys(&self) -> &LockKeys {
        &self.keys.lock
    }

    fn acquire_call(&self, _: &ScriptEnv, take: Take<'_>) -> ScriptCall {
        ScriptCall::new(
            &RW_READ_LOCK,
            &[&self.keys.lock.name, &self.keys.timeout_prefix(take.field)],
            vec![
                Value::Integer(take.lease_ms),
                Value::from(take.field),
                Value::from(write_field(take.field)),
            ],
        )
    }

    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall {
        let Unlock {
            field,
            lease_ms,
            latch,
            need_ms,
        } = unlock;
        ScriptCall::new(
            &RW_READ_UNLOCK,
            &[
                &self.keys.lock.name,
                &self.keys.lock.channel,
                &self.keys.timeout_prefix(field),
                &self.keys.key_prefix,
                latch,
            ],
            [
                Value::from("0"),
                Value::from(field),
                env.publish(),
                env.unlock_latch_ttl_ms(lease_ms),
            ]
            .into_iter()
            .chain(need_ms.map(|ms| Value::Integer(ms.max(1))))
            .collect(),
        )
    }

    fn releases_to_need(&self) -> bool {
        true
    }

    fn is_locked_call(&self) -> ScriptCall {
        self.keys.is_locked(&RW_READ_IS_LOCKED)
    }

    fn force_unlock_call(&self, env: &ScriptEnv) -> ScriptCall {
        force_unlock_call(&RW_READ_FORCE_UNLOCK, env, &self.keys.lock, "0")
    }

    fn renewal(&self) -> Renewal {
        // A read hold (docs/PROTOCOL.md §5.6, Redisson 4.5+): `HGET N field`, then
        // `PEXPIRE` the owner's timeout keys `{N}:field:rwlock_timeout:1..count`
        // and `N`. One pair `[N, key prefix]` per hold; ARGV `1, field`.
        Renewal {
            script: &RW_RENEW_READ,
            append: |name, field, keys, args| {
                keys.push(Key::from(name));
                keys.push(Key::from(layout::rw_key_prefix(name)));
                args.push(Value::Integer(1));
                args.push(Value::from(field));
            },
        }
    }
}

impl Protocol for Write {
    fn kind_label(&self) -> &'static str {
        "write_lock"
    }

    fn keys(&self) -> &LockKeys {
        &self.keys.lock
    }

    fn field(&self, env: &ScriptEnv, owner: crate::base::owner::Owner) -> String {
        write_field(&env.field(owner))
    }

    fn acquire_call(&self, _: &ScriptEnv, take: Take<'_>) -> ScriptCall {
        lease_owner_call(
            &RW_WRITE_LOCK,
            &[&self.keys.lock.name],
            take.field,
            take.lease_ms,
        )
    }

    fn unlock_call(&self, env: &ScriptEnv, unlock: Unlock<'_>) -> ScriptCall {
        unlock_call(&RW_WRITE_UNLOCK, "1", env, &self.keys.lock, unlock)
    }

    fn is_locked_call(&self) -> ScriptCall {
        self.keys.is_locked(&RW_WRITE_IS_LOCKED)
    }

    fn force_unlock_call(&self, env: &ScriptEnv) -> ScriptCall {
        force_unlock_call(&RW_WRITE_FORCE_UNLOCK, env, &self.keys.lock, "1")
    }
}

/// The write field of the owner whose read field is `field`.
fn write_field(field: &str) -> String {
    format!("{field}:write")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::owner::Owner;
    use crate::locks::rlock::tests::{env, keys};

    #[test]
    fn names_follow_the_brace_rule() {
        let keys = RwKeys::new("orders").unwrap();
        assert_eq!(keys.lock.channel, "redisson_rwlock:{orders}");
        assert_eq!(
            crate::base::layout::unlock_latch_prefix(&keys.lock.name),
            "redisson_unlock_latch:{orders}"
        );
        assert_eq!(keys.key_prefix, "{orders}");
        assert_eq!(keys.timeout_prefix("u:57"), "{orders}:u:57:rwlock_timeout");

        let keys = RwKeys::new("{shop}:orders").unwrap();
        assert_eq!(keys.lock.channel, "redisson_rwlock:{shop}:orders");
        assert_eq!(keys.key_prefix, "{shop}:orders");
        assert_eq!(
            keys.timeout_prefix("u:57"),
            "{shop}:orders:u:57:rwlock_timeout"
        );
    }

    #[test]
    fn empty_name_is_refused() {
        assert!(RwKeys::new("").is_err());
    }

    // docs/PROTOCOL.md §5: the read and write halves' calls, without a server.
    #[test]
    fn read_write_calls() -> Result<()> {
        let env = env();
        let keys_of = Arc::new(RwKeys::new("doc")?);
        let (read, write) = (
            Read {
                keys: keys_of.clone(),
            },
            Write { keys: keys_of },
        );
        let owner = Owner::new(3);
        assert_eq!(read.field(&env, owner), "c:3");
        assert_eq!(write.field(&env, owner), "c:3:write");
        let release = read.unlock_call(
            &env,
            Unlock {
                field: "c:3",
                lease_ms: 30_000,
                latch: "latch",
                need_ms: None,
            },
        );
        assert_eq!(
            keys(&release),
            [
                "doc",
                "redisson_rwlock:{doc}",
                "{doc}:c:3:rwlock_timeout",
                "{doc}",
                "latch"
            ]
        );
        assert_eq!(
            release.args[..3],
            [Value::from("0"), Value::from("c:3"), Value::from("PUBLISH")]
        );
        let release = write.unlock_call(
            &env,
            Unlock {
                field: "c:3:write",
                lease_ms: 30_000,
                latch: "latch",
                need_ms: None,
            },
        );
        assert_eq!(keys(&release), ["doc", "redisson_rwlock:{doc}", "latch"]);
        assert_eq!(release.args[0], Value::from("1"));
        assert_eq!(read.release_channel(), Some("redisson_rwlock:{doc}"));
        assert_eq!(write.latch_prefix(), "redisson_unlock_latch:{doc}");
        Ok(())
    }
}
