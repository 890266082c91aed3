//! A TCP proxy in front of Postgres that counts the statements its clients
//! run: every simple `Query` ('Q') and every extended-protocol `Execute`
//! ('E') message a client sends. Put between the api and Postgres, it
//! answers "how many statements did the api run while X happened"
//! exactly and at once, where `pg_stat_*` views lag by up to the idle flush
//! interval and `pg_stat_statements` needs a preloaded library.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::database_url;
use crate::fleet::PgProxy;

/// The proxy; it stops when dropped.
pub struct QueryCounter {
    pub port: u16,
    statements: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl QueryCounter {
    pub async fn start() -> QueryCounter {
        let upstream = PgProxy::upstream();
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("counter bind");
        let port = listener.local_addr().expect("counter addr").port();
        let statements = Arc::new(AtomicU64::new(0));
        let counted = statements.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let counted = counted.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = relay(client, server, counted).await;
                });
            }
        });
        QueryCounter {
            port,
            statements,
            task,
        }
    }

    /// Statements run through the proxy so far.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::SeqCst)
    }

    /// `DATABASE_URL` of `db` through the proxy.
    pub fn url(&self, db: &str) -> String {
        let direct = database_url(db);
        let (scheme, rest) = direct.split_once("://").expect("database url scheme");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = authority
            .rsplit_once('@')
            .map(|(u, _)| format!("{u}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for QueryCounter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies both ways; the client's side is parsed into messages to count.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    counted: Arc<AtomicU64>,
) -> std::io::Result<()> {
    // One write per message, sent at once: Nagle's delay would add tens of
    // milliseconds to every statement otherwise.
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_rx, mut client_tx) = client.into_split();
    let mut client_rx = tokio::io::BufReader::new(client_rx);
    let (mut server_rx, mut server_tx) = server.into_split();
    let down = tokio::spawn(async move { tokio::io::copy(&mut server_rx, &mut client_tx).await });
    let up = async move {
        // Untyped start-up packets (SSLRequest, GSSENCRequest, the
        // StartupMessage) come first: length, then payload; the
        // StartupMessage ends them.
        loop {
            let len = client_rx.read_i32().await?;
            let mut message = len.to_be_bytes().to_vec();
            message.resize((len as usize).max(4), 0);
            client_rx.read_exact(&mut message[4..]).await?;
            server_tx.write_all(&message).await?;
            let code = message
                .get(4..8)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
            // 80877103: SSLRequest, 80877104: GSSENCRequest; anything else
            // is the StartupMessage (protocol 3.0).
            if !matches!(code, Some(80_877_103 | 80_877_104)) {
                break;
            }
        }
        loop {
            let kind = client_rx.read_u8().await?;
            let len = client_rx.read_i32().await?;
            let mut message = vec![kind];
            message.extend_from_slice(&len.to_be_bytes());
            message.resize(1 + (len as usize).max(4), 0);
            client_rx.read_exact(&mut message[5..]).await?;
            if kind == b'Q' || kind == b'E' {
                counted.fetch_add(1, Ordering::SeqCst);
            }
            // Messages already read wait in the buffer: send them together.
            server_tx.write_all(&message).await?;
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    };
    let result = up.await;
    down.abort();
    result
}
