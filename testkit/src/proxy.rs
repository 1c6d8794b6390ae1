//! [`Proxy`]: a TCP proxy in front of a Redis server that can stall,
//! delay, cut or refuse connections, one direction or both.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// What every connection of a [`Proxy`] obeys; connections watch it, so a
/// change applies at once to open and new connections alike.
#[derive(Clone, Copy, Debug, Default)]
struct Control {
    stall_to_server: bool,
    stall_to_client: bool,
    delay: Duration,
    refuse: bool,
    /// Bumped by [`Proxy::cut`]: connections of an older generation close.
    generation: u64,
}

#[derive(Clone, Copy, Debug)]
enum Direction {
    ToServer,
    ToClient,
}

impl Control {
    fn stalled(&self, direction: Direction) -> bool {
        match direction {
            Direction::ToServer => self.stall_to_server,
            Direction::ToClient => self.stall_to_client,
        }
    }
}

/// A TCP proxy on 127.0.0.1 in front of `127.0.0.1:<upstream port>`, for
/// network faults between a client and Redis.
///
/// Every accepted connection gets its own upstream connection, made at once
/// (even while stalled), and two pumps, one per direction. A pump reads a
/// chunk, waits out the delay, waits while its direction is stalled, then
/// writes the chunk: stalled bytes are held, in order, never dropped (beyond
/// the chunk in hand, the rest waits in the kernel's socket buffers). End of
/// stream is passed on (half-close) like data, so it is held by a stall too.
///
/// All controls take `&self` (share the proxy with `Arc` to drive it from
/// another task) and apply at once to open and new connections. Dropping the
/// proxy stops its listener and closes every connection; its tasks end
/// with it. The proxy never panics once started.
pub struct Proxy {
    port: u16,
    control: watch::Sender<Control>,
    live: Arc<watch::Sender<usize>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listen on a free loopback port and forward to `127.0.0.1:upstream_port`.
    /// Must be called within a tokio runtime.
    pub async fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("proxy: bind a loopback port");
        let port = listener
            .local_addr()
            .expect("proxy: its local address")
            .port();
        let (control, watching) = watch::channel(Control::default());
        let live = Arc::new(watch::channel(0usize).0);
        let accept = tokio::spawn(accept_loop(listener, upstream_port, watching, live.clone()));
        Proxy {
            port,
            control,
            live,
            accept,
        }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`: the server, through this proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stop forwarding in both directions. Connections stay open; what they
    /// send is held and delivered by [`resume`](Self::resume). New connections
    /// are accepted and connected upstream, but forward nothing either.
    pub fn stall(&self) {
        self.control.send_modify(|c| {
            c.stall_to_server = true;
            c.stall_to_client = true;
        });
    }

    /// Stop forwarding client → server only (requests are held).
    pub fn stall_to_server(&self) {
        self.control.send_modify(|c| c.stall_to_server = true);
    }

    /// Stop forwarding server → client only (replies are held; the server
    /// still runs the commands).
    pub fn stall_to_client(&self) {
        self.control.send_modify(|c| c.stall_to_client = true);
    }

    /// Forward again in both directions, held bytes first, in order.
    pub fn resume(&self) {
        self.control.send_modify(|c| {
            c.stall_to_server = false;
            c.stall_to_client = false;
        });
    }

    /// Wait this long before forwarding each chunk, in both directions
    /// (`Duration::ZERO`: no delay). Chunks of one direction stay in order, so
    /// the delay adds up under a stream of small writes.
    pub fn set_delay(&self, delay: Duration) {
        self.control.send_modify(|c| c.delay = delay);
    }

    /// Close every open connection, both sides, at once (a FIN to each; bytes
    /// held by a stall are dropped). New connections are accepted as before.
    /// The closing happens in the connections' tasks: [`connections`](Self::connections)
    /// drops a moment later (see [`wait_connections`](Self::wait_connections)).
    pub fn cut(&self) {
        self.control.send_modify(|c| c.generation += 1);
    }

    /// While `true`, close each new connection right after accepting it (the
    /// client connects, then reads end of stream). Open connections are kept.
    pub fn refuse(&self, on: bool) {
        self.control.send_modify(|c| c.refuse = on);
    }

    /// Connections open right now (accepted and not yet closed).
    pub fn connections(&self) -> usize {
        *self.live.borrow()
    }

    /// Wait until exactly `n` connections are open; panics after `timeout`.
    pub async fn wait_connections(&self, n: usize, timeout: Duration) {
        let mut live = self.live.subscribe();
        if tokio::time::timeout(timeout, live.wait_for(|&open| open == n))
            .await
            .is_err()
        {
            panic!(
                "proxy: {} connection(s) open after {timeout:?}, expected {n}",
                self.connections()
            );
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // The accept task owns every connection task (a JoinSet, which aborts
        // them when dropped); dropping `control` also tells them to stop.
        self.accept.abort();
    }
}

/// Counts a connection as open for as long as it lives.
struct Live(Arc<watch::Sender<usize>>);

impl Live {
    fn enter(live: &Arc<watch::Sender<usize>>) -> Live {
        live.send_modify(|n| *n += 1);
        Live(live.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

async fn accept_loop(
    listener: TcpListener,
    upstream: u16,
    control: watch::Receiver<Control>,
    live: Arc<watch::Sender<usize>>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let now = *control.borrow();
                    if now.refuse {
                        drop(client);
                        continue;
                    }
                    connections.spawn(relay(
                        client,
                        upstream,
                        control.clone(),
                        now.generation,
                        Live::enter(&live),
                    ));
                }
                // e.g. out of file descriptors: back off rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// One proxied connection, until either side closes, it is cut, or the proxy
/// is dropped.
async fn relay(
    client: TcpStream,
    upstream: u16,
    control: watch::Receiver<Control>,
    generation: u64,
    _live: Live,
) {
    let mut cut = control.clone();
    let forward = async move {
        let server = TcpStream::connect(("127.0.0.1", upstream)).await?;
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::try_join!(
            pump(
                client_read,
                server_write,
                Direction::ToServer,
                control.clone()
            ),
            pump(server_read, client_write, Direction::ToClient, control),
        )?;
        Ok::<(), std::io::Error>(())
    };
    tokio::select! {
        _ = forward => {}
        // Also ends when the proxy (the sender) is dropped.
        _ = cut.wait_for(|c| c.generation != generation) => {}
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    direction: Direction,
    mut control: watch::Receiver<Control>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = from.read(&mut buf).await?;
        let delay = control.borrow().delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if control.wait_for(|c| !c.stalled(direction)).await.is_err() {
            return Err(std::io::ErrorKind::ConnectionAborted.into()); // proxy dropped
        }
        if n == 0 {
            let _ = to.shutdown().await; // pass the end of stream on
            return Ok(());
        }
        to.write_all(&buf[..n]).await?;
    }
}
