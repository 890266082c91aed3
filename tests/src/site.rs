//! A small web server on 127.0.0.1 for ownership-proof tests: it answers
//! by `Host` header and path from a table the test fills (a body, or a
//! redirect), and 404 for everything else. Apps reach it through the
//! scanner's connect-to overrides ([`Site::env`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub enum Page {
    Body(String),
    Redirect(String),
}

type Pages = Arc<Mutex<HashMap<(String, String), Page>>>;

pub struct Site {
    pub port: u16,
    pages: Pages,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Site {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Site {
    pub async fn start() -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("site bind");
        let port = listener.local_addr().expect("site addr").port();
        let pages: Pages = Arc::default();
        let shared = pages.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let pages = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, pages).await;
                });
            }
        });
        Site { port, pages, task }
    }

    /// Serves `page` at `path` of `host`.
    pub fn put(&self, host: &str, path: &str, page: Page) {
        self.pages
            .lock()
            .unwrap()
            .insert((host.to_ascii_lowercase(), path.to_string()), page);
    }

    /// Scanner settings: plain HTTP on port 80 of every name goes to this
    /// site, HTTPS to a closed port (refused at once), private addresses
    /// allowed.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("SCANFLEET_SCANNER__ALLOW_PRIVATE".into(), "true".into()),
            (
                "SCANFLEET_SCANNER__CONNECT_TO".into(),
                format!(":80:127.0.0.1:{},:443:127.0.0.1:9", self.port),
            ),
        ]
    }
}

async fn serve(mut stream: TcpStream, pages: Pages) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let path = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("/")
        .to_string();
    let host = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("host").then(|| {
                value
                    .trim()
                    .split(':')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase()
            })
        })
        .unwrap_or_default();
    let page = pages.lock().unwrap().get(&(host, path)).cloned();
    let response = match page {
        Some(Page::Body(body)) => format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
        Some(Page::Redirect(to)) => format!(
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        None => "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found"
            .to_string(),
    };
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
