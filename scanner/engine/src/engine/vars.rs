//! Variable scopes: the layered maps that request rendering and matching
//! look names up in.
//!
//! Layers are shared through `Arc` so a response body or the target's
//! variables are never copied per request, and a scope can be moved to the
//! rayon pool as a whole.

use std::collections::HashMap;
use std::sync::Arc;

use super::url::InputUrl;
use crate::dsl::{Value, Vars};
use scanfleet_http::{HttpError, TargetUrl};

/// One layer of variables. Hashed with aHash, keyed at random per process
/// like the standard library's SipHash (names from responses, such as
/// header names, are chosen by the server scanned), at a fraction of its
/// cost: building and reading these maps is done for every response.
pub type VarMap = HashMap<String, Value, ahash::RandomState>;

/// One layer of a [`Scope`]: a map, or a response's variables
/// ([`super::response::ResponseVars`]), which are made as they are read.
pub type Layer = Arc<dyn Vars + Send + Sync>;

/// Layers looked up from the first to the last: earlier layers win.
#[derive(Clone, Default)]
pub struct Scope {
    layers: Vec<Layer>,
}

impl Scope {
    pub fn new() -> Scope {
        Scope { layers: Vec::new() }
    }

    /// Adds a layer below all existing ones (lowest precedence).
    pub fn below(mut self, layer: Layer) -> Scope {
        self.layers.push(layer);
        self
    }

    /// Adds all layers of `other` below the existing ones.
    pub fn below_all(mut self, other: &Scope) -> Scope {
        self.layers.extend(other.layers.iter().cloned());
        self
    }

    /// Adds a layer above all existing ones (highest precedence).
    pub fn above(mut self, layer: Layer) -> Scope {
        self.layers.insert(0, layer);
        self
    }
}

impl Vars for Scope {
    fn get(&self, name: &str) -> Option<Value> {
        self.layers.iter().find_map(|l| l.get(name))
    }

    fn contains(&self, name: &str) -> bool {
        self.layers.iter().any(|l| l.contains(name))
    }
}

pub fn str_value(s: &str) -> Value {
    Value::from(s)
}

pub fn string_value(s: String) -> Value {
    Value::from(s)
}

pub fn bytes_value(b: Vec<u8>) -> Value {
    Value::from(b)
}

pub fn int_value(i: i64) -> Value {
    Value::from(i)
}

pub fn float_value(f: f64) -> Value {
    Value::from(f)
}

/// A map of plain strings as a variable layer.
pub fn layer_from_strings<I: IntoIterator<Item = (String, String)>>(items: I) -> VarMap {
    items
        .into_iter()
        .map(|(k, v)| (k, string_value(v)))
        .collect()
}

/// A target's input URL with its variables (`BaseURL`, `Hostname`, ...)
/// made once rather than per request: as the input gives them, and with
/// the input path's trailing slash trimmed (for `{{BaseURL}}/x`). The input
/// and its origin are parsed as client URLs once too: most requests go to
/// the input's own origin.
#[derive(Clone)]
pub struct TargetInput {
    pub url: InputUrl,
    pub full: Arc<VarMap>,
    pub trimmed: Arc<VarMap>,
    /// `scheme://authority` of the input, parsed.
    origin: Option<TargetUrl>,
    /// The input as given, parsed.
    parsed: Option<TargetUrl>,
}

impl TargetInput {
    pub fn of(url: InputUrl) -> TargetInput {
        TargetInput {
            full: Arc::new(layer_from_strings(url.variables(false))),
            trimmed: Arc::new(layer_from_strings(url.variables(true))),
            origin: TargetUrl::parse(&url.root_url()).ok(),
            parsed: TargetUrl::parse(&url.original).ok(),
            url,
        }
    }

    pub fn layer(&self, trim_trailing_slash: bool) -> Arc<VarMap> {
        if trim_trailing_slash {
            self.trimmed.clone()
        } else {
            self.full.clone()
        }
    }

    /// `scheme://authority` as a client URL: the input's own origin as
    /// parsed once, any other parsed now.
    pub fn origin_url(&self, scheme: &str, authority: &str) -> Result<TargetUrl, HttpError> {
        match &self.origin {
            Some(origin) if scheme == self.url.scheme && authority == self.url.authority => {
                Ok(origin.clone())
            }
            _ => TargetUrl::parse(&[scheme, "://", authority].concat()),
        }
    }

    /// The input as given, as a client URL.
    pub fn parsed_url(&self) -> Result<TargetUrl, HttpError> {
        match &self.parsed {
            Some(parsed) => Ok(parsed.clone()),
            None => TargetUrl::parse(&self.url.original),
        }
    }
}

/// The variables of one request, split around the place where the
/// input-derived variables go (they depend on the path being built).
#[derive(Clone, Default)]
pub struct RequestLayers {
    /// Payload values, template variables, `--var` options: above the input's.
    pub upper: Vec<Arc<VarMap>>,
    /// Extracted values and earlier blocks' history: below the input's.
    pub lower: Vec<Arc<VarMap>>,
    /// The out-of-band markers (`{{interactsh-url}}`), lowest of all.
    pub oob: Option<Layer>,
}

impl RequestLayers {
    /// The full scope with the input variables in their place.
    pub fn with_input(&self, input_layer: Arc<VarMap>) -> Scope {
        let mut layers: Vec<Layer> = Vec::with_capacity(self.upper.len() + 1 + self.lower.len());
        layers.extend(self.upper.iter().map(|l| l.clone() as Layer));
        layers.push(input_layer);
        layers.extend(self.lower.iter().map(|l| l.clone() as Layer));
        layers.extend(self.oob.iter().cloned());
        Scope { layers }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_and_input_urls_parse_as_the_client_parses_them() {
        let input = TargetInput::of(InputUrl::parse("https://Shop.test:8443/app/?q=1").unwrap());
        let own = input.origin_url("https", "Shop.test:8443").unwrap();
        assert_eq!(own, TargetUrl::parse("https://Shop.test:8443").unwrap());
        assert_eq!(
            (own.host.as_str(), own.port, own.path.as_str()),
            ("shop.test", 8443, "")
        );
        let other = input.origin_url("http", "shop.test:8080").unwrap();
        assert_eq!(other, TargetUrl::parse("http://shop.test:8080").unwrap());
        assert!(input.origin_url("https", "").is_err());
        assert_eq!(
            input.parsed_url().unwrap(),
            TargetUrl::parse("https://Shop.test:8443/app/?q=1").unwrap()
        );
    }
}
