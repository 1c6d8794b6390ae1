//! The floor: the fastest client of the same RLock wire protocol this
//! machine can run, as the physical limit the other clients are compared to
//! in scenarios 1 and 2 (issue 12).
//!
//! No async runtime: one blocking `std::net::TcpStream` (TCP_NODELAY) per
//! task, RESP2 encoded and decoded by hand into reused buffers, the same
//! scripts as the library and the ceiling (`lua/args.lua` + `lua/lock.lua`,
//! `lua/args.lua` + `lua/unlock.lua`, loaded once with SCRIPT LOAD and run
//! with EVALSHA), the same keys, arguments, lease and latch TTL. The only
//! pipelining the protocol allows is used: the latch `DEL` after an unlock
//! needs no answer before the client goes on, so it is written in the same
//! `write` as the next command (the next lock), or alone by [`Floor::finish`].
//! A lock+unlock pair is then 2 writes and 2 replies awaited: the lock's
//! reply must be seen before the holder's work and its unlock, and the
//! unlock's before the next lock (a lock client has to know it holds).
//!
//! For many tasks (scenario 2) it is used in two ways: one thread and one
//! connection per task ([`Floor::lock`], [`Floor::unlock`]), or one thread
//! and one connection for all of them in lockstep ([`Floor::step`]): every
//! task's lock in one write, every task's unlock in the next, the latches of
//! a step deleted by one DEL written with the next step's locks, which is
//! the most a client multiplexing many tasks on one connection can batch.
//!
//! It takes free locks only (scenarios 1 and 2 never contend): a lock that
//! is held is an error, there is no waiting, no pub/sub, no watchdog (a 30 s
//! lease like the library's default), no timeouts, no reconnects.

use std::io::{Read, Write};
use std::net::TcpStream;

use anyhow::{bail, ensure, Context, Result};

use crate::ceiling::{LATCH_TTL_MS, LEASE_MS, LOCK_LUA, UNLOCK_LUA};

/// One connection of the floor client.
pub struct Floor {
    stream: TcpStream,
    out: Vec<u8>,
    buf: Vec<u8>,
    /// Unread reply bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    lock_sha: String,
    unlock_sha: String,
    id: String,
    next_owner: u64,
    rng: u64,
    lease: String,
    latch_ttl: String,
    /// The latch keys of the unlocks since the last DEL, RESP-encoded: their
    /// DEL goes out with the next command.
    latches: Vec<u8>,
    pending: u64,
    writes: u64,
    reads: u64,
}

enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Simple,
    /// An array header (`*<n>`); its elements are read as the next replies.
    Array(i64),
}

impl Floor {
    /// Connect to `redis://host:port[/0]` (no AUTH, no TLS) and load the scripts.
    pub fn connect(url: &str) -> Result<Floor> {
        let rest = url
            .strip_prefix("redis://")
            .context("the floor client takes redis:// URLs only")?;
        ensure!(!rest.contains('@'), "the floor client speaks no AUTH");
        let host_port = rest.split('/').next().unwrap_or(rest);
        let addr = if host_port.contains(':') {
            host_port.to_owned()
        } else {
            format!("{host_port}:6379")
        };
        let stream = TcpStream::connect(&addr).with_context(|| format!("floor: {addr}"))?;
        stream.set_nodelay(true)?;
        let random = uuid::Uuid::new_v4();
        let mut floor = Floor {
            stream,
            out: Vec::with_capacity(1024),
            buf: vec![0; 16 * 1024],
            start: 0,
            end: 0,
            lock_sha: String::new(),
            unlock_sha: String::new(),
            id: random.hyphenated().to_string(),
            next_owner: 1,
            rng: random.as_u64_pair().0 | 1,
            lease: LEASE_MS.to_string(),
            latch_ttl: LATCH_TTL_MS.to_string(),
            latches: Vec::with_capacity(4096),
            pending: 0,
            writes: 0,
            reads: 0,
        };
        floor.lock_sha = floor.load(LOCK_LUA)?;
        floor.unlock_sha = floor.load(UNLOCK_LUA)?;
        Ok(floor)
    }

    fn load(&mut self, script: &str) -> Result<String> {
        command(&mut self.out, 3);
        arg(&mut self.out, &[b"SCRIPT"]);
        arg(&mut self.out, &[b"LOAD"]);
        arg(&mut self.out, &[script.as_bytes()]);
        self.send()?;
        match self.reply()? {
            Reply::Bulk(sha) => Ok(String::from_utf8(sha)?),
            _ => bail!("SCRIPT LOAD: unexpected reply"),
        }
    }

    /// Take the free lock `name`; returns the owner id to unlock it with.
    pub fn lock(&mut self, name: &str) -> Result<u64> {
        let del = self.queue_del();
        let owner = self.queue_lock(name);
        self.send()?;
        if del {
            self.del_reply()?;
        }
        self.lock_reply(name)?;
        Ok(owner)
    }

    /// Release `name` held by `owner`: the unlock script with a fresh latch
    /// key; the latch DEL is sent with the next command.
    pub fn unlock(&mut self, name: &str, owner: u64) -> Result<()> {
        self.queue_unlock(name, owner);
        self.send()?;
        self.unlock_reply(name)
    }

    /// `names.len()` tasks of one connection, each on its own free name, in
    /// lockstep: every task's lock in one write (after the DEL of the
    /// previous step's latches), then every task's unlock in one write.
    /// Replies come back in order. One step = `names.len()` pairs.
    pub fn step(&mut self, names: &[String], owners: &mut Vec<u64>) -> Result<()> {
        let del = self.queue_del();
        owners.clear();
        for name in names {
            let owner = self.queue_lock(name);
            owners.push(owner);
        }
        self.send()?;
        if del {
            self.del_reply()?;
        }
        for name in names {
            self.lock_reply(name)?;
        }
        for (name, owner) in names.iter().zip(owners.iter()) {
            self.queue_unlock(name, *owner);
        }
        self.send()?;
        for name in names {
            self.unlock_reply(name)?;
        }
        Ok(())
    }

    /// Send the latch DEL still waiting for a command to ride with, if any.
    pub fn finish(&mut self) -> Result<()> {
        if self.queue_del() {
            self.send()?;
            self.del_reply()?;
        }
        Ok(())
    }

    /// (write, read) system calls so far.
    pub fn syscalls(&self) -> (u64, u64) {
        (self.writes, self.reads)
    }

    fn queue_lock(&mut self, name: &str) -> u64 {
        let owner = self.next_owner;
        self.next_owner += 1;
        let mut digits = [0u8; 20];
        let owner_digits = itoa(owner, &mut digits);
        command(&mut self.out, 6);
        arg(&mut self.out, &[b"EVALSHA"]);
        arg(&mut self.out, &[self.lock_sha.as_bytes()]);
        arg(&mut self.out, &[b"1"]);
        arg(&mut self.out, &[name.as_bytes()]);
        arg(&mut self.out, &[self.lease.as_bytes()]);
        arg(&mut self.out, &[self.id.as_bytes(), b":", owner_digits]);
        owner
    }

    fn lock_reply(&mut self, name: &str) -> Result<()> {
        match self.reply()? {
            // `{count}`: taken (the floor takes free locks only, so count is 1).
            Reply::Array(1) => match self.reply()? {
                Reply::Int(1) => Ok(()),
                _ => bail!("lock script: unexpected hold count"),
            },
            Reply::Int(ttl) => {
                bail!("floor: {name} is held (PTTL {ttl}); it takes free locks only")
            }
            _ => bail!("lock script: unexpected reply"),
        }
    }

    /// Queue the unlock script; its latch key joins the pending DEL.
    fn queue_unlock(&mut self, name: &str, owner: u64) {
        let hex = self.latch_id();
        let mut digits = [0u8; 20];
        let owner_digits = itoa(owner, &mut digits);
        let name = name.as_bytes();
        command(&mut self.out, 10);
        arg(&mut self.out, &[b"EVALSHA"]);
        arg(&mut self.out, &[self.unlock_sha.as_bytes()]);
        arg(&mut self.out, &[b"3"]);
        arg(&mut self.out, &[name]);
        arg(&mut self.out, &[b"redisson_lock__channel:{", name, b"}"]);
        let latch: [&[u8]; 4] = [b"redisson_unlock_latch:{", name, b"}:", &hex];
        arg(&mut self.out, &latch);
        arg(&mut self.out, &[b"0"]);
        arg(&mut self.out, &[self.id.as_bytes(), b":", owner_digits]);
        arg(&mut self.out, &[b"PUBLISH"]);
        arg(&mut self.out, &[self.latch_ttl.as_bytes()]);
        arg(&mut self.latches, &latch);
        self.pending += 1;
    }

    fn unlock_reply(&mut self, name: &str) -> Result<()> {
        match self.reply()? {
            Reply::Int(0 | 1) => Ok(()),
            Reply::Nil => bail!("floor: unlock of {name} not held"),
            _ => bail!("unlock script: unexpected reply"),
        }
    }

    /// Queue one DEL of every pending latch key into the output buffer.
    fn queue_del(&mut self) -> bool {
        if self.pending == 0 {
            return false;
        }
        command(&mut self.out, 1 + self.pending);
        arg(&mut self.out, &[b"DEL"]);
        self.out.extend_from_slice(&self.latches);
        self.latches.clear();
        self.pending = 0;
        true
    }

    fn del_reply(&mut self) -> Result<()> {
        match self.reply()? {
            Reply::Int(_) => Ok(()),
            _ => bail!("DEL: unexpected reply"),
        }
    }

    /// 32 hex digits, like the library's latch ids (splitmix64, twice).
    fn latch_id(&mut self) -> [u8; 32] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for half in out.chunks_exact_mut(16) {
            self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            for (i, c) in half.iter_mut().enumerate() {
                *c = HEX[((z >> (60 - 4 * i)) & 0xf) as usize];
            }
        }
        out
    }

    fn send(&mut self) -> Result<()> {
        self.stream.write_all(&self.out)?;
        self.writes += 1;
        self.out.clear();
        Ok(())
    }

    /// Make at least `n` unread bytes available, reading from the socket.
    fn want(&mut self, n: usize) -> Result<()> {
        while self.end - self.start < n {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() < n {
                self.buf.resize(n.next_power_of_two(), 0);
            }
            let got = self.stream.read(&mut self.buf[self.end..])?;
            self.reads += 1;
            ensure!(got > 0, "floor: the server closed the connection");
            self.end += got;
        }
        Ok(())
    }

    /// Length of the first line of the unread bytes, without its CRLF.
    fn line(&mut self) -> Result<usize> {
        let mut from = 0;
        loop {
            let unread = &self.buf[self.start..self.end];
            if let Some(i) = unread[from..].windows(2).position(|w| w == b"\r\n") {
                return Ok(from + i);
            }
            let have = unread.len();
            from = have.saturating_sub(1);
            self.want(have + 1)?;
        }
    }

    fn reply(&mut self) -> Result<Reply> {
        let len = self.line()?;
        let line = &self.buf[self.start..self.start + len];
        let (kind, body) = (line[0], &line[1..]);
        let mut used = len + 2;
        let reply = match kind {
            b':' => Reply::Int(parse_int(body)?),
            b'+' => Reply::Simple,
            b'_' => Reply::Nil,
            b'*' => Reply::Array(parse_int(body)?),
            b'$' => {
                let n = parse_int(body)?;
                if n < 0 {
                    Reply::Nil
                } else {
                    let n = n as usize;
                    self.want(used + n + 2)?;
                    let bulk = self.buf[self.start + used..self.start + used + n].to_vec();
                    used += n + 2;
                    Reply::Bulk(bulk)
                }
            }
            b'-' => bail!("server error: {}", String::from_utf8_lossy(body)),
            other => bail!("floor: unexpected reply type {:?}", other as char),
        };
        self.start += used;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(reply)
    }
}

/// `*<n>\r\n`
fn command(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    out.push(b'*');
    out.extend_from_slice(itoa(n, &mut digits));
    out.extend_from_slice(b"\r\n");
}

/// One bulk-string argument made of `parts`: `$<len>\r\n<parts>\r\n`.
fn arg(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    let mut digits = [0u8; 20];
    out.push(b'$');
    out.extend_from_slice(itoa(len as u64, &mut digits));
    out.extend_from_slice(b"\r\n");
    for p in parts {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n");
}

fn itoa(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[i..];
        }
    }
}

fn parse_int(text: &[u8]) -> Result<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    ensure!(!digits.is_empty(), "floor: empty integer");
    let mut n: i64 = 0;
    for &c in digits {
        ensure!(c.is_ascii_digit(), "floor: bad integer");
        n = n * 10 + i64::from(c - b'0');
    }
    Ok(if negative { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_resp() {
        let mut out = Vec::new();
        command(&mut out, 2);
        arg(&mut out, &[b"DEL"]);
        arg(&mut out, &[b"a{", b"b", b"}"]);
        assert_eq!(out, b"*2\r\n$3\r\nDEL\r\n$4\r\na{b}\r\n");
        let mut d = [0u8; 20];
        assert_eq!(itoa(0, &mut d), b"0");
        assert_eq!(itoa(u64::MAX, &mut d), b"18446744073709551615");
        assert_eq!(parse_int(b"-1").unwrap(), -1);
        assert_eq!(parse_int(b"30000").unwrap(), 30000);
    }
}
