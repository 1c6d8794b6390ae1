//! Usage, connection and credential errors; TLS URLs.

use std::process::{Command, Output};

use crate::common::*;
use crate::{code, stderr, stdout};

/// The tool on `args` alone, as a user would type it: no `--url` added and
/// no `REDIS_URL` from the environment.
fn tool(args: &[&str]) -> Output {
    Command::new(BIN)
        .env_remove("REDIS_URL")
        .args(args)
        .output()
        .expect("run redisson-lock")
}

/// The tool on `args` with `REDIS_URL` set to `url` (and no `--url`).
fn tool_with_redis_url(url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .env("REDIS_URL", url)
        .args(args)
        .output()
        .expect("run redisson-lock")
}

#[test]
fn usage_connection_and_credential_errors_have_their_statuses_and_hide_passwords() {
    for bad in [
        &["frobnicate"][..],
        &[],
        &["status"],
        &["run", "x", "--wait", "soon", "--", "true"],
        &["run", "x", "-n", "--wait", "1s", "--", "true"],
        &["run", "x", "--json", "--", "true"],
        &["run", "x"],
        // Bad values of every duration flag are usage errors alike (issue
        // 29: --watchdog 0 and --timeout 0 were configuration errors, 78).
        &["run", "x", "--lease", "0", "--", "true"],
        &["run", "x", "--watchdog", "0", "--", "true"],
        &["run", "x", "--watchdog", "2ms", "--", "true"],
        &["--timeout", "0", "status", "x"],
        &["status", "x", "--timeout", "0"],
        &["run", "x", "--check", "0", "--", "true"],
    ] {
        let out = tool(bad);
        assert_eq!(code(&out), 64, "{bad:?}");
        assert!(!stderr(&out).is_empty(), "{bad:?}");
    }
    // An empty name is refused in the library's words, by every command
    // that takes one.
    for empty in [
        &["status", ""][..],
        &["watch", ""],
        &["force-unlock", ""],
        &["run", "", "--", "true"],
    ] {
        let out = tool(empty);
        assert_eq!(code(&out), 64, "{empty:?}");
        assert!(
            stderr(&out).contains("lock name must not be empty"),
            "{empty:?}: {}",
            stderr(&out)
        );
    }
    let out = tool(&["--help"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("EXIT STATUS"));
    // Each command has its own help.
    for (command, option) in [
        ("run", "--nonblock"),
        ("status", "--kind"),
        ("watch", "--interval"),
        ("list", "--counters"),
        ("force-unlock", "--kind"),
    ] {
        let out = tool(&[command, "--help"]);
        assert_eq!(code(&out), 0, "{command}");
        assert!(stdout(&out).contains(option), "{command}: {}", stdout(&out));
    }
    let out = tool(&["completions", "bash"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("force-unlock"));
    let out = tool(&["--version"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).starts_with("redisson-lock "));

    // Nobody listens: 69, and the password is not printed.
    let port = free_port();
    let url = format!("redis://:hunter2secret@127.0.0.1:{port}");
    let out = tool(&["--url", &url, "--timeout", "500ms", "status", "x"]);
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(!stderr(&out).contains("hunter2secret"));
    assert!(!stdout(&out).contains("hunter2secret"));

    // REDIS_URL is used when --url is not given.
    let server = Server::private(&["--requirepass", "right-pass"]);
    let with_password = |password: &str| {
        let url = format!("redis://:{password}@127.0.0.1:{}", server.port);
        tool_with_redis_url(&url, &["status", "x"])
    };
    let out = with_password("wrong-pass");
    assert_eq!(code(&out), 77, "{}", stderr(&out));
    assert!(!stderr(&out).contains("wrong-pass"));
    let out = with_password("right-pass");
    assert_eq!(code(&out), 1, "{}", stderr(&out));

    // A URL that is not one: 78, not echoed.
    let out = tool(&["--url", "http://user:pw-xyz@host", "list"]);
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(!stderr(&out).contains("pw-xyz"));
}

/// `rediss://` with the tool's TLS feature (on by default) is tried for
/// real; without one it is refused with 78, naming the tool's own feature.
#[test]
fn rediss_urls_follow_the_tools_tls_features() {
    let port = free_port();
    let url = format!("rediss://:tls-secret@127.0.0.1:{port}");
    let out = tool(&["--url", &url, "--timeout", "500ms", "status", "x"]);
    let err = stderr(&out);
    assert!(!err.contains("tls-secret"), "{err}");
    if cfg!(any(feature = "tls-rustls", feature = "tls-native-tls")) {
        // Nobody listens there: unreachable, not a configuration error.
        assert_eq!(code(&out), 69, "{err}");
    } else {
        assert_eq!(code(&out), 78, "{err}");
        assert!(
            err.contains("tls-rustls") && err.contains("redisson-lock-cli"),
            "{err}"
        );
    }
}

/// An ACL user the locks' scripts cannot work for (issue 34, item 5):
/// without PUBLISH, `run` is refused when it connects, with 77, naming the
/// command, and never runs the command. One whose channel rules leave out
/// the lock's channel gets the lock, runs the command, and then cannot
/// release it: 77, the real cause, and (where the server can check a
/// channel rule in a script: Redis 7, Valkey) the hold left whole, held
/// until its TTL, as the message says.
#[test]
fn acl_refusals_exit_77_with_the_cause() {
    let server = Server::private(&[]);
    let mut raw = server.raw();
    raw.cmd(&[
        "ACL", "SETUSER", "nopub", "on", ">pw", "~*", "&*", "+@all", "-publish",
    ]);
    let url = format!("redis://nopub:pw@127.0.0.1:{}", server.port);
    let out = tool_with_redis_url(
        &url,
        &["run", "acl-nopub", "--", "touch", "/nonexistent/ran"],
    );
    assert_eq!(code(&out), 77, "{}", stderr(&out));
    assert!(stderr(&out).contains("PUBLISH"), "{}", stderr(&out));
    assert!(!raw.exists("acl-nopub"));

    raw.cmd(&[
        "ACL",
        "SETUSER",
        "nochan",
        "on",
        ">pw",
        "~*",
        "resetchannels",
        "&other:*",
        "+@all",
    ]);
    let scripts_check = raw
        .cmd(&["EVAL", "return redis.acl_check_cmd and 1 or 0", "0"])
        .int()
        == 1;
    let url = format!("redis://nochan:pw@127.0.0.1:{}", server.port);
    let out = tool_with_redis_url(&url, &["run", "acl-nochan", "--", "true"]);
    assert_eq!(code(&out), 77, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("could not release"),
        "{}",
        stderr(&out)
    );
    if scripts_check {
        assert!(raw.exists("acl-nochan"), "the hold stays until its TTL");
    }
}
