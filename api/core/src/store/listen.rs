//! `LISTEN` on a Postgres channel, on a connection of its own, for as long
//! as the process runs: the one loop behind the auth cache's credential
//! changes ([`listen`]), the webhook outbox's wake-ups and the scheduler's
//! schedule changes (both [`wake_on`]).

use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::AsyncMessage;
use tokio_util::sync::CancellationToken;

/// The first wait after a failed connection; it doubles up to
/// [`MAX_BACKOFF`] and starts over once a `LISTEN` succeeds.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What the listening connection tells its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard<'a> {
    /// The `LISTEN` took effect. Notifications sent while no connection was
    /// listening were missed: whatever they would have triggered is due now.
    Listening,
    /// A notification on the channel, with its payload.
    Notified(&'a str),
    /// The connection was lost; a new one is being opened. Until the next
    /// [`Heard::Listening`], notifications are missed.
    Lost,
}

/// Listens on `channel` until `stop` is cancelled, reconnecting with a
/// backoff, and hands what it hears to `on`. `what` names the listener in
/// the log.
pub async fn listen(
    database_url: &str,
    channel: &str,
    what: &str,
    stop: &CancellationToken,
    mut on: impl FnMut(Heard<'_>),
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let ended = tokio::select! {
            () = stop.cancelled() => return,
            ended = session(database_url, channel, &mut backoff, &mut on) => ended,
        };
        on(Heard::Lost);
        match ended {
            Ok(()) => tracing::warn!("{what}: the listening connection closed; reconnecting"),
            Err(e) => {
                tracing::warn!(error = %e, "{what}: the listening connection failed; reconnecting")
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// [`listen`] for an owner that only needs waking: `wake` runs once each
/// `LISTEN` takes effect (what was committed while nobody listened is due
/// then) and on every notification; a lost connection needs nothing. Owns
/// its arguments, so it can be spawned as it is.
pub async fn wake_on(
    database_url: String,
    channel: &'static str,
    what: &'static str,
    stop: CancellationToken,
    mut wake: impl FnMut(),
) {
    listen(&database_url, channel, what, &stop, |heard| match heard {
        Heard::Listening | Heard::Notified(_) => wake(),
        Heard::Lost => {}
    })
    .await;
}

/// One connection: `LISTEN`, then notifications until it ends.
async fn session(
    database_url: &str,
    channel: &str,
    backoff: &mut Duration,
    on: &mut impl FnMut(Heard<'_>),
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) =
        tokio_postgres::connect(database_url, tokio_postgres::NoTls).await?;
    let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx)).boxed();
    // The connection makes progress only while its messages are polled, so
    // the LISTEN is sent while polling them.
    let sql = format!("LISTEN {channel}");
    let listening = client.batch_execute(&sql);
    tokio::pin!(listening);
    loop {
        tokio::select! {
            done = &mut listening => { done?; break; }
            message = messages.next() => match message {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    *backoff = FIRST_BACKOFF;
    on(Heard::Listening);
    while let Some(message) = messages.next().await {
        if let AsyncMessage::Notification(n) = message? {
            on(Heard::Notified(n.payload()));
        }
    }
    Ok(())
}
