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

/// The pool's contents under its lock.
struct Kept {
    lists: HashMap<PoolKey, Vec<Idle>, ahash::RandomState>,
    /// Connections in `lists`, kept as they come and go.
    total: usize,
    /// When the expired connections of every key were last dropped.
    swept: Instant,
}

impl Kept {
    /// Takes out every connection idle for `timeout` or longer, of every
    /// key, for the caller to drop once the lock is released.
    fn expired(&mut self, now: Instant, timeout: Duration) -> Vec<Idle> {
        self.swept = now;
        let mut gone = Vec::new();
        self.lists.retain(|_, list| {
            let expired = list.partition_point(|c| now.duration_since(c.since) >= timeout);
            gone.extend(list.drain(..expired));
            !list.is_empty()
        });
        self.total -= gone.len();
        gone
    }
}

/// Idle keep-alive connections, bounded per key and in total. Connections
/// idle longer than `idle_timeout` are not reused, since servers commonly
/// close idle connections after a few seconds; they are closed when their
/// key is next looked at, and those of every key at least once an
/// `idle_timeout` while the pool is used and whenever it is full: a
/// client that has moved on to other hosts neither keeps the old ones'
/// sockets open nor finds its pool full of them.
pub(crate) struct Pool {
    /// Taken by a request before it connects, given back after a complete
    /// response; a connection is owned by one request at a time.
    idle: Mutex<Kept>,
    max_per_key: usize,
    max_total: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub(crate) fn new(max_per_key: usize, max_total: usize, idle_timeout: Duration) -> Pool {
        Pool {
            idle: Mutex::new(Kept {
                lists: HashMap::default(),
                total: 0,
                swept: Instant::now(),
            }),
            max_per_key,
            max_total,
            idle_timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recently returned live connection for `key`, if any.
    pub(crate) fn take(&self, key: &PoolKey) -> Option<Conn> {
        let mut kept = self.lock();
        let list = kept.lists.get_mut(key)?;
        let now = Instant::now();
        // Kept in the order they were put back, so the expired ones are a
        // prefix: found by bisection, not by checking every one.
        let expired = list.partition_point(|c| now.duration_since(c.since) >= self.idle_timeout);
        let gone: Vec<Idle> = list.drain(..expired).collect();
        let conn = list.pop().map(|c| c.conn);
        if list.is_empty() {
            kept.lists.remove(key);
        }
        kept.total -= gone.len() + usize::from(conn.is_some());
        drop(kept);
        drop(gone);
        conn
    }

    /// Keeps `conn` for reuse, or drops (closes) it when the pool is full
    /// of live connections or its key has its share.
    pub(crate) fn put(&self, key: PoolKey, conn: Conn) {
        let now = Instant::now();
        let mut kept = self.lock();
        let mut gone = Vec::new();
        if kept.total >= self.max_total || now.duration_since(kept.swept) >= self.idle_timeout {
            gone = kept.expired(now, self.idle_timeout);
        }
        if kept.total < self.max_total {
            let list = kept.lists.entry(key).or_default();
            if list.len() < self.max_per_key {
                list.push(Idle { conn, since: now });
                kept.total += 1;
            }
        }
        drop(kept);
        drop(gone);
    }

    /// Closes the idle connections whose host name `closes` says, and
    /// answers how many.
    pub(crate) fn close_where(&self, closes: impl Fn(&str) -> bool) -> usize {
        let mut kept = self.lock();
        let mut gone = Vec::new();
        kept.lists.retain(|key, list| {
            if closes(&key.host) {
                gone.append(list);
                false
            } else {
                true
            }
        });
        kept.total -= gone.len();
        drop(kept);
        gone.len()
    }

    /// Number of idle connections held (for tests and metrics).
    pub(crate) fn idle_count(&self) -> usize {
        self.lock().total
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
        // Taken before the pool's own sweep, the expired ones go with the
        // look at their key.
        assert_eq!(pool.take(&key()).map(|c| c.peer.port()), None);
        assert_eq!(pool.idle_count(), 0);
        pool.put(key(), conn(3));
        pool.put(key(), conn(4));
        assert_eq!(pool.take(&key()).map(|c| c.peer.port()), Some(4));
        assert_eq!(pool.idle_count(), 1);
        assert_eq!(pool.take(&key()).map(|c| c.peer.port()), Some(3));
        assert!(pool.take(&key()).is_none());
        pool.put(key(), conn(5));
        std::thread::sleep(Duration::from_millis(700));
        assert!(pool.take(&key()).is_none());
        assert_eq!(pool.idle_count(), 0);
    }

    fn key_of(host: &str, port: u16) -> PoolKey {
        PoolKey {
            host: host.into(),
            port,
            ..key()
        }
    }

    #[test]
    fn a_pool_full_of_expired_connections_takes_new_ones() {
        // Full of connections to hosts never asked for again: they are
        // closed to make room rather than refusing every new one.
        let pool = Pool::new(8, 4, Duration::from_millis(300));
        for port in 0..4 {
            pool.put(key_of(&format!("old{port}.test"), port), conn(port));
        }
        pool.put(key_of("new.test", 80), conn(9));
        assert_eq!(
            pool.idle_count(),
            4,
            "full of live ones: the new one is closed"
        );
        std::thread::sleep(Duration::from_millis(400));
        pool.put(key_of("new.test", 80), conn(10));
        assert_eq!(pool.idle_count(), 1);
        assert_eq!(
            pool.take(&key_of("new.test", 80)).map(|c| c.peer.port()),
            Some(10)
        );
    }

    #[test]
    fn expired_connections_of_other_hosts_are_closed_once_a_timeout_passes() {
        let pool = Pool::new(8, 64, Duration::from_millis(300));
        pool.put(key_of("old.test", 80), conn(1));
        pool.put(key_of("old.test", 81), conn(2));
        std::thread::sleep(Duration::from_millis(400));
        // Any use of the pool a timeout after the last sweep closes them,
        // though nothing asks for their host.
        pool.put(key_of("new.test", 80), conn(3));
        assert_eq!(pool.idle_count(), 1);
    }

    #[test]
    fn close_where_closes_the_named_hosts_only() {
        let pool = Pool::new(8, 64, Duration::from_secs(60));
        pool.put(key_of("a.test", 80), conn(1));
        pool.put(key_of("a.test", 443), conn(2));
        pool.put(key_of("b.test", 80), conn(3));
        assert_eq!(pool.close_where(|h| h == "a.test"), 2);
        assert_eq!(pool.idle_count(), 1);
        assert!(pool.take(&key_of("a.test", 80)).is_none());
        assert_eq!(
            pool.take(&key_of("b.test", 80)).map(|c| c.peer.port()),
            Some(3)
        );
        assert_eq!(pool.idle_count(), 0);
    }
}
