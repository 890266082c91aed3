//! A minimal LDAP listener: reads BER-framed LDAP messages, records the
//! connection when the request bytes carry a registered id (a JNDI lookup
//! of `ldap://<host>/<id><nonce>` puts it in the search base), and answers
//! a bind with success and a search with an empty, successful result.
//!
//! Hand-written rather than an LDAP crate: only the message framing, the
//! message id and the operation tag are read, and the two answers are
//! fixed byte strings around the echoed message id.

use std::net::SocketAddr;
use std::sync::Arc;

use scanfleet_interactsh::find_ids_in_text;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::recorder::{Recorder, Seen};
use crate::tcp::{self, IDLE_TIMEOUT};

/// Bytes read per connection at most.
const MAX_REQUEST: usize = 64 * 1024;

const BIND_REQUEST: u8 = 0x60;
const BIND_RESPONSE: u8 = 0x61;
const UNBIND_REQUEST: u8 = 0x42;
const SEARCH_REQUEST: u8 = 0x63;
const SEARCH_RESULT_DONE: u8 = 0x65;
const EXTENDED_REQUEST: u8 = 0x77;
const EXTENDED_RESPONSE: u8 = 0x78;
const SUCCESS: u8 = 0;
const UNWILLING_TO_PERFORM: u8 = 53;

/// What every LDAP connection shares.
pub struct LdapContext {
    pub recorder: Recorder,
}

/// Serves LDAP on `listener` until `shutdown` fires.
pub async fn serve(listener: TcpListener, ctx: Arc<LdapContext>, shutdown: CancellationToken) {
    tcp::accept_loop(listener, shutdown.clone(), move |stream, peer| {
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                result = converse(stream, peer, &ctx) => if let Err(e) = result {
                    tracing::debug!(error = %e, %peer, "LDAP connection ended with an error");
                },
                () = shutdown.cancelled() => {}
            }
        }
    })
    .await;
}

async fn converse(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: &LdapContext,
) -> std::io::Result<()> {
    let mut pending = Vec::new();
    let mut transcript = Vec::new();
    let mut recorded: Vec<String> = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = tokio::time::timeout(IDLE_TIMEOUT, stream.read(&mut chunk))
            .await
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "LDAP peer idle"))??;
        if read == 0 || transcript.len() + read > MAX_REQUEST {
            return Ok(());
        }
        pending.extend_from_slice(&chunk[..read]);
        while let Some(frame) = next_message(&pending) {
            let message: Vec<u8> = pending.drain(..frame.len).collect();
            transcript.extend_from_slice(&message);
            record_new_ids(&transcript, &mut recorded, peer, ctx).await;
            let reply = match frame.op {
                BIND_REQUEST => result(&message[frame.id.clone()], BIND_RESPONSE, SUCCESS),
                SEARCH_REQUEST => result(&message[frame.id.clone()], SEARCH_RESULT_DONE, SUCCESS),
                EXTENDED_REQUEST => result(
                    &message[frame.id.clone()],
                    EXTENDED_RESPONSE,
                    UNWILLING_TO_PERFORM,
                ),
                UNBIND_REQUEST => return Ok(()),
                _ => return Ok(()),
            };
            stream.write_all(&reply).await?;
        }
        if pending.first().is_some_and(|tag| *tag != 0x30) {
            return Ok(());
        }
    }
}

/// Records the connection once for each id it names that was not yet seen.
async fn record_new_ids(
    transcript: &[u8],
    recorded: &mut Vec<String>,
    peer: SocketAddr,
    ctx: &LdapContext,
) {
    let matches: Vec<_> = find_ids_in_text(transcript)
        .into_iter()
        .filter(|m| !recorded.contains(&m.unique_id))
        .collect();
    if matches.is_empty() {
        return;
    }
    recorded.extend(matches.iter().map(|m| m.unique_id.clone()));
    let printable: String = transcript
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        })
        .collect();
    let seen = Seen {
        protocol: "ldap",
        raw_request: format!("LDAP request ({} bytes): {printable}", transcript.len()),
        ..Seen::default()
    };
    ctx.recorder.record(&matches, peer.ip(), &seen).await;
}

/// Where one complete LDAPMessage sits at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
struct Frame {
    /// The whole message's length.
    len: usize,
    /// The messageID INTEGER, tag and length included.
    id: std::ops::Range<usize>,
    /// The protocolOp tag.
    op: u8,
}

/// The first message of `buf` when it is complete: `SEQUENCE { messageID
/// INTEGER, protocolOp ... }` with definite lengths.
fn next_message(buf: &[u8]) -> Option<Frame> {
    if *buf.first()? != 0x30 {
        return None;
    }
    let (body_len, header) = ber_length(buf.get(1..)?)?;
    let len = 1 + header + body_len;
    if buf.len() < len {
        return None;
    }
    let start = 1 + header;
    if *buf.get(start)? != 0x02 {
        return None;
    }
    let id_len = usize::from(*buf.get(start + 1)?);
    let id = start..start + 2 + id_len;
    let op = *buf.get(id.end)?;
    (id.end < len).then_some(Frame { len, id, op })
}

/// A BER definite length: (value, bytes it took).
fn ber_length(bytes: &[u8]) -> Option<(usize, usize)> {
    let first = *bytes.first()?;
    if first < 0x80 {
        return Some((usize::from(first), 1));
    }
    let count = usize::from(first & 0x7f);
    if count == 0 || count > 4 {
        return None;
    }
    let value = bytes
        .get(1..=count)?
        .iter()
        .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
    Some((value, 1 + count))
}

/// `SEQUENCE { messageID, [APPLICATION op] { resultCode, matchedDN "",
/// diagnosticMessage "" } }`.
fn result(message_id: &[u8], op: u8, code: u8) -> Vec<u8> {
    let body = [op, 0x07, 0x0a, 0x01, code, 0x04, 0x00, 0x04, 0x00];
    let mut out = vec![0x30, (message_id.len() + body.len()) as u8];
    out.extend_from_slice(message_id);
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bind_request_is_framed_and_answered_with_its_message_id() {
        // Simple bind, version 3, empty name and password, message id 1.
        let bind = [
            0x30, 0x0c, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00,
        ];
        let frame = next_message(&bind).unwrap();
        assert_eq!((frame.len, frame.op), (14, BIND_REQUEST));
        assert_eq!(
            result(&bind[frame.id], BIND_RESPONSE, SUCCESS),
            [0x30, 0x0c, 0x02, 0x01, 0x01, 0x61, 0x07, 0x0a, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00]
        );
        assert!(
            next_message(&bind[..10]).is_none(),
            "an incomplete message waits for more"
        );
    }

    #[test]
    fn long_form_lengths_are_read() {
        assert_eq!(ber_length(&[0x82, 0x01, 0x00]), Some((256, 3)));
        assert_eq!(ber_length(&[0x80]), None);
    }
}
