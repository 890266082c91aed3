//! A minimal SMTP listener: greets, accepts HELO/EHLO, MAIL, RCPT, DATA,
//! RSET, NOOP and QUIT, and records each transaction whose envelope or
//! message names a registered id (a target that sends mail to
//! `user@<id><nonce>.<domain>`). Nothing is delivered anywhere.

use std::net::SocketAddr;
use std::sync::Arc;

use scanfleet_interactsh::find_ids_in_text;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::recorder::{Recorder, Seen};
use crate::tcp::{self, IDLE_TIMEOUT};

/// Longest command line read; longer ones end the session.
const MAX_LINE: u64 = 4096;
/// Transcript bytes kept per transaction (the rest of a message is read
/// and dropped).
const MAX_TRANSCRIPT: usize = 64 * 1024;

/// What every SMTP session shares.
pub struct SmtpContext {
    pub recorder: Recorder,
    pub domain: String,
}

/// Serves SMTP on `listener` until `shutdown` fires.
pub async fn serve(listener: TcpListener, ctx: Arc<SmtpContext>, shutdown: CancellationToken) {
    tcp::accept_loop(listener, shutdown.clone(), move |stream, peer| {
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                result = converse(stream, peer, &ctx) => if let Err(e) = result {
                    tracing::debug!(error = %e, %peer, "SMTP session ended with an error");
                },
                () = shutdown.cancelled() => {}
            }
        }
    })
    .await;
}

/// One transaction's envelope and transcript.
#[derive(Default)]
struct Transaction {
    from: String,
    transcript: Vec<u8>,
}

impl Transaction {
    fn keep(&mut self, bytes: &[u8]) {
        let room = MAX_TRANSCRIPT.saturating_sub(self.transcript.len());
        self.transcript
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

async fn converse(stream: TcpStream, peer: SocketAddr, ctx: &SmtpContext) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let domain = &ctx.domain;
    write
        .write_all(format!("220 {domain} ESMTP scanfleet-oob\r\n").as_bytes())
        .await?;
    let mut tx = Transaction::default();
    while let Some(line) = read_line(&mut reader).await? {
        tx.keep(&line);
        let text = String::from_utf8_lossy(&line);
        let command = text.trim_end().to_ascii_uppercase();
        let reply = if command.starts_with("HELO") || command.starts_with("EHLO") {
            format!("250 {domain}\r\n")
        } else if command.starts_with("MAIL FROM:") {
            tx.from = text.trim_end()["MAIL FROM:".len()..].trim().to_string();
            "250 OK\r\n".to_string()
        } else if command.starts_with("RCPT TO:") || command == "NOOP" {
            "250 OK\r\n".to_string()
        } else if command == "RSET" {
            finish(&mut tx, peer, ctx).await;
            "250 OK\r\n".to_string()
        } else if command == "DATA" {
            write
                .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                .await?;
            read_data(&mut reader, &mut tx).await?;
            finish(&mut tx, peer, ctx).await;
            "250 OK: queued\r\n".to_string()
        } else if command == "QUIT" {
            write.write_all(b"221 Bye\r\n").await?;
            break;
        } else {
            "502 Command not implemented\r\n".to_string()
        };
        write.write_all(reply.as_bytes()).await?;
    }
    finish(&mut tx, peer, ctx).await;
    Ok(())
}

/// The message after DATA, up to the lone dot.
async fn read_data<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    tx: &mut Transaction,
) -> std::io::Result<()> {
    while let Some(line) = read_line(reader).await? {
        if line == b".\r\n" || line == b".\n" {
            break;
        }
        tx.keep(&line);
    }
    Ok(())
}

/// Records the transaction if it names an id, and starts a new one.
async fn finish(tx: &mut Transaction, peer: SocketAddr, ctx: &SmtpContext) {
    let done = std::mem::take(tx);
    let matches = find_ids_in_text(&done.transcript);
    if matches.is_empty() {
        return;
    }
    let seen = Seen {
        protocol: "smtp",
        raw_request: String::from_utf8_lossy(&done.transcript).into_owned(),
        smtp_from: done.from,
        ..Seen::default()
    };
    ctx.recorder.record(&matches, peer.ip(), &seen).await;
}

/// One line with its ending; `None` at the end of the stream. A line over
/// [`MAX_LINE`] or a peer idle for [`IDLE_TIMEOUT`] ends the session.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let read = tokio::time::timeout(
        IDLE_TIMEOUT,
        (&mut *reader).take(MAX_LINE).read_until(b'\n', &mut line),
    )
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "SMTP peer idle"))??;
    if read == 0 {
        return Ok(None);
    }
    if !line.ends_with(b"\n") {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "SMTP line too long",
        ));
    }
    Ok(Some(line))
}
