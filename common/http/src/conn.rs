//! Connections and the keep-alive pool.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::BufMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::url::Scheme;

/// A byte stream the client can speak HTTP over: plain TCP or TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Most bytes one read takes in.
const READ_CHUNK: usize = 16 * 1024;

/// One open connection plus the bytes read from it but not yet parsed.
pub(crate) struct Conn {
    io: Box<dyn Io>,
    pub(crate) buf: Vec<u8>,
    pub(crate) peer: SocketAddr,
}

impl Conn {
    pub(crate) fn new(io: Box<dyn Io>, peer: SocketAddr) -> Conn {
        Conn {
            io,
            buf: Vec::new(),
            peer,
        }
    }

    /// Reads up to [`READ_CHUNK`] more bytes into `buf`; 0 means the peer
    /// closed.
    pub(crate) async fn fill(&mut self) -> io::Result<usize> {
        // Straight into the buffer's spare room: a chunk array here would
        // sit in the state of every future that awaits a read, and be
        // zeroed and copied with them on every request.
        self.buf.reserve(READ_CHUNK);
        let mut room = (&mut self.buf).limit(READ_CHUNK);
        self.io.read_buf(&mut room).await
    }

    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.io.write_all(bytes).await?;
        self.io.flush().await
    }

    /// Tells the peer we will send nothing more (TCP FIN; for TLS a
    /// close_notify first); reading stays open.
    pub(crate) async fn shutdown_write(&mut self) -> io::Result<()> {
        self.io.shutdown().await
    }
}

/// Identifies connections that may be shared: same scheme, same host name
/// (it went into SNI and Host), same port, same peer address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    pub(crate) scheme: Scheme,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) addr: SocketAddr,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// Idle keep-alive connections, bounded per key and in total. Connections
/// idle longer than `idle_timeout` are dropped when next looked at, since
/// servers commonly close idle connections after a few seconds.
pub(crate) struct Pool {
    /// Taken by a request before it connects, given back after a complete
    /// response; a connection is owned by one request at a time.
    idle: Mutex<HashMap<PoolKey, Vec<Idle>, ahash::RandomState>>,
    max_per_key: usize,
    max_total: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub(crate) fn new(max_per_key: usize, max_total: usize, idle_timeout: Duration) -> Pool {
        Pool {
            idle: Mutex::new(HashMap::default()),
            max_per_key,
            max_total,
            idle_timeout,
        }
    }

    /// The most recently returned live connection for `key`, if any.
    pub(crate) fn take(&self, key: &PoolKey) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(key)?;
        let now = Instant::now();
        // Kept in the order they were put back, so the expired ones are a
        // prefix: found by bisection, not by checking every one.
        let expired = list.partition_point(|c| now.duration_since(c.since) >= self.idle_timeout);
        list.drain(..expired);
        let conn = list.pop().map(|c| c.conn);
        if list.is_empty() {
            idle.remove(key);
        }
        conn
    }

    /// Keeps `conn` for reuse, or drops (closes) it when the pool is full.
    pub(crate) fn put(&self, key: PoolKey, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = idle.values().map(Vec::len).sum();
        if total >= self.max_total {
            return;
        }
        let list = idle.entry(key).or_default();
        if list.len() < self.max_per_key {
            list.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }

    /// Number of idle connections held (for tests and metrics).
    pub(crate) fn idle_count(&self) -> usize {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(port: u16) -> Conn {
        let (ours, _theirs) = tokio::io::duplex(64);
        Conn::new(Box::new(ours), SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn key() -> PoolKey {
        PoolKey {
            scheme: Scheme::Http,
            host: "shop.test".into(),
            port: 80,
            addr: SocketAddr::from(([127, 0, 0, 1], 80)),
        }
    }

    #[test]
    fn take_gives_the_newest_live_connection_and_drops_the_expired_ones() {
        let pool = Pool::new(8, 64, Duration::from_millis(500));
        pool.put(key(), conn(1));
        pool.put(key(), conn(2));
        std::thread::sleep(Duration::from_millis(700));
        pool.put(key(), conn(3));
        pool.put(key(), conn(4));
        assert_eq!(pool.idle_count(), 4);
        assert_eq!(pool.take(&key()).map(|c| c.peer.port()), Some(4));
        // The two that idled past the timeout went with that look.
        assert_eq!(pool.idle_count(), 1);
        assert_eq!(pool.take(&key()).map(|c| c.peer.port()), Some(3));
        assert!(pool.take(&key()).is_none());
        pool.put(key(), conn(5));
        std::thread::sleep(Duration::from_millis(700));
        assert!(pool.take(&key()).is_none());
        assert_eq!(pool.idle_count(), 0);
    }
}
