//! A cap on request bodies (`SCANFLEET_API__MAX_BODY_BYTES`, 1 MiB): a
//! declared `Content-Length` over the cap is refused with 413 before any of
//! the body is read; a chunked body is read up to one byte past the cap and
//! refused as soon as it gets there. Either way a huge upload costs at most
//! the cap in memory, never its own size.

use poem::http::{header, StatusCode};
use poem::{Body, Endpoint, IntoResponse, Middleware, Request, Response};
use tokio::io::AsyncReadExt;

use crate::problem::{Problem, ProblemJson};

pub struct BodyLimit {
    max: usize,
}

impl BodyLimit {
    pub fn new(max: usize) -> BodyLimit {
        BodyLimit { max }
    }
}

impl<E: Endpoint> Middleware<E> for BodyLimit {
    type Output = BodyLimited<E>;

    fn transform(&self, inner: E) -> Self::Output {
        BodyLimited {
            inner,
            max: self.max,
        }
    }
}

pub struct BodyLimited<E> {
    inner: E,
    max: usize,
}

fn too_large(max: usize) -> Response {
    ProblemJson(Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the request body is larger than {max} bytes"),
    ))
    .into_response()
}

impl<E: Endpoint> Endpoint for BodyLimited<E> {
    type Output = Response;

    async fn call(&self, mut req: Request) -> poem::Result<Response> {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        match declared {
            Some(len) if len > self.max as u64 => return Ok(too_large(self.max)),
            Some(_) => {}
            None if req.headers().contains_key(header::TRANSFER_ENCODING) => {
                let mut buf = Vec::new();
                req.take_body()
                    .into_async_read()
                    .take(self.max as u64 + 1)
                    .read_to_end(&mut buf)
                    .await
                    .map_err(|e| poem::Error::new(e, StatusCode::BAD_REQUEST))?;
                if buf.len() > self.max {
                    return Ok(too_large(self.max));
                }
                req.set_body(Body::from(buf));
            }
            None => {}
        }
        self.inner.call(req).await.map(IntoResponse::into_response)
    }
}
