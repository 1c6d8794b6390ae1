//! The ACL check a client runs when it connects (docs/PROTOCOL.md §9.5):
//! every command the scripts run, tried once by `lua/acl_probe.lua` in a form
//! that writes nothing, so that a user who may not run one of them is
//! refused here, before anything is written, with the commands named. The
//! key and channel rules are the scripts' own check, before their first
//! write (`permitted` in `lua/args.lua`).

use std::time::Duration;

use fred::interfaces::LuaInterface;
use fred::types::Value;

use crate::base::error::{Error, Result};

/// The probe, run by `EVAL` (once per client: not worth caching).
const PROBE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/acl_probe.lua"));

/// Refuse the user of `redis` if its ACL forbids a command the scripts run
/// (`publish`: the client's publish command, `PUBLISH`, `SPUBLISH` or
/// `BOTH`), with [`Error::Auth`] naming them. A user who may not run `EVAL`
/// itself is let through: its first script call is refused the same way,
/// before it writes (a user allowed only `EVALSHA` of scripts loaded for
/// it keeps working).
pub(crate) async fn check(
    redis: &fred::clients::Client,
    client_id: &str,
    publish: &str,
    timeout: Duration,
) -> Result<()> {
    let probe = format!("redisson_lock_acl_probe:{{{client_id}}}");
    let reply = redis
        .eval::<Value, _, _, _>(PROBE, Vec::<String>::new(), vec![probe.as_str(), publish])
        .await;
    let denied = match reply {
        Ok(Value::Array(names)) => names,
        Ok(other) => return Err(Error::Protocol(format!("the ACL probe replied {other:?}"))),
        Err(e) => {
            return match Error::from_redis(e, "", timeout) {
                Error::Auth(cause) => {
                    tracing::debug!(error = %cause, "EVAL refused: the scripts' calls are checked as they run");
                    Ok(())
                }
                other => Err(other),
            }
        }
    };
    if denied.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = denied.iter().filter_map(|v| v.as_string()).collect();
    Err(Error::auth(format!(
        "NOPERM this user may not run {}, which the locks' scripts need",
        names.join(", ")
    )))
}
