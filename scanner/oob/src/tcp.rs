//! The accept loop every TCP listener shares: one task per connection,
//! tracked so that shutdown waits (a bounded time) for those in flight.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long a connection may sit idle before it is dropped.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for connections still open.
const GRACE: Duration = Duration::from_secs(5);

/// Accepts connections until `shutdown` fires, running `handle` for each.
pub async fn accept_loop<F, Fut>(listener: TcpListener, shutdown: CancellationToken, handle: F)
where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let tracker = TaskTracker::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    tracker.spawn(handle(stream, peer));
                }
                Err(e) => {
                    // Usually EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    drop(listener);
    tracker.close();
    let _ = tokio::time::timeout(GRACE, tracker.wait()).await;
}
