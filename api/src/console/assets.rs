//! The console's static files (htmx, the style sheet, our one script),
//! embedded in the binary and served by poem's embedded-files endpoint
//! under a path that names their content hash: `/assets/<hash>/app.css`.
//! A new build with changed files gets a new path, so every file can be
//! cached for a year (`immutable`), and no page ever mixes old and new.

use std::sync::LazyLock;

use poem::endpoint::EmbeddedFilesEndpoint;
use poem::http::header;
use poem::{Endpoint, EndpointExt, IntoResponse};
use rust_embed::RustEmbed;
use sha2::{Digest, Sha256};

#[derive(RustEmbed)]
#[folder = "console/assets/"]
#[exclude = "*LICENSE*"]
pub struct Assets;

/// `/assets/<first 12 hex digits of the hash of every file>`.
pub static PREFIX: LazyLock<String> = LazyLock::new(|| {
    let mut names: Vec<_> = Assets::iter().collect();
    names.sort();
    let mut all = Sha256::new();
    for name in names {
        all.update(name.as_bytes());
        if let Some(file) = Assets::get(&name) {
            all.update(file.metadata.sha256_hash());
        }
    }
    format!("/assets/{}", &hex::encode(all.finalize())[..12])
});

/// The URL of one asset.
pub fn url(name: &str) -> String {
    format!("{}/{name}", *PREFIX)
}

/// The embedded files with a year's caching.
pub fn endpoint() -> impl Endpoint {
    EmbeddedFilesEndpoint::<Assets>::new()
        .map_to_response()
        .after(|resp| async move {
            let mut resp = resp?.into_response();
            if resp.status().is_success() {
                resp.headers_mut().insert(
                    header::CACHE_CONTROL,
                    header::HeaderValue::from_static("public, max-age=31536000, immutable"),
                );
            }
            Ok(resp)
        })
}
