//! The integer counts the synchronizers keep (a semaphore's permits, a
//! count-down latch's count; docs/PROTOCOL.md §7): their range, how a count
//! key and a script's integer reply are read, and the calls both semaphores
//! share (`trySetPermits`, `addPermits`).

use std::time::Duration;

use fred::interfaces::KeysInterface;
use fred::types::Value;

use crate::base::error::{Error, Result};
use crate::connection::script::{millis, script, ScriptCall};
use crate::engine::shared::Inner;
use crate::synchronizers::handle::Handle;

// The scripts this module runs (`lua/`, embedded at build time).
script!(SEMAPHORE_ADD, "args.lua", "count.lua", "semaphore_add.lua");
script!(
    SEMAPHORE_TRY_SET,
    "args.lua",
    "count.lua",
    "semaphore_try_set.lua"
);

/// Refuse a permit count Java's `int` cannot hold.
pub(crate) fn check_permits(permits: u32) -> Result<()> {
    if i32::try_from(permits).is_err() {
        return Err(Error::InvalidArgument(format!(
            "permits must be at most {} (Java's int), got {permits}",
            i32::MAX
        )));
    }
    Ok(())
}

/// Parse the integer text of a count key; anything else is the wrong type.
pub(crate) fn parse_count(value: Option<String>, key: &str) -> Result<i64> {
    match value {
        None => Ok(0),
        Some(text) => text.parse().map_err(|_| Error::WrongType {
            key: key.to_owned(),
        }),
    }
}

/// An integer reply.
pub(crate) fn integer(reply: Value, what: &str) -> Result<i64> {
    match reply {
        Value::Integer(n) => Ok(n),
        other => Err(Error::Protocol(format!("{what} replied {other:?}"))),
    }
}

/// `trySetPermits` of both semaphores (the same script; a TTL only for
/// RSemaphore).
pub(crate) async fn try_set_call(
    handle: &Handle,
    permits: u32,
    ttl: Option<Duration>,
) -> Result<bool> {
    let (inner, name, channel) = (handle.inner(), &handle.name, &handle.channel);
    let reply = inner
        .redis
        .eval(|| {
            let mut args = vec![Value::Integer(permits.into()), inner.env.publish()];
            if let Some(ttl) = ttl {
                args.push(Value::Integer(millis(ttl)));
            }
            ScriptCall::new(&SEMAPHORE_TRY_SET, &[name, channel], args)
        })
        .await?;
    Ok(integer(reply, "semaphore trySetPermits")? == 1)
}

/// `addPermits` of both semaphores: RSemaphore publishes the new count,
/// the permit-expirable one the change if positive (`expirable`).
pub(crate) async fn add_call(handle: &Handle, permits: i32, expirable: bool) -> Result<i64> {
    let (inner, name, channel) = (handle.inner(), &handle.name, &handle.channel);
    let reply = inner
        .redis
        .eval(|| {
            ScriptCall::new(
                &SEMAPHORE_ADD,
                &[name, channel],
                vec![
                    Value::Integer(permits.into()),
                    inner.env.publish(),
                    Value::from(if expirable { "1" } else { "0" }),
                ],
            )
        })
        .await?;
    integer(reply, "semaphore addPermits")
}

/// `GET key` as a count (0 if absent), with retries.
pub(crate) async fn get_count(inner: &Inner, key: &str) -> Result<i64> {
    let owned = key.to_owned();
    let value: Option<String> = inner
        .redis
        .key_command(key, |c| {
            let key = owned.clone();
            async move { c.get(key).await }
        })
        .await?;
    parse_count(value, key)
}
