//! Form bodies (`application/x-www-form-urlencoded`), read by name; a
//! name may repeat (the checked rows of a list).

/// The fields of a form, in order.
#[derive(Debug, Default, Clone)]
pub struct FormData(Vec<(String, String)>);

impl FormData {
    pub fn parse(body: &[u8]) -> FormData {
        FormData(form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first value of `name`, or "".
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }

    /// The value of `name` trimmed, or None when empty.
    pub fn opt(&self, name: &str) -> Option<&str> {
        Some(self.get(name).trim()).filter(|v| !v.is_empty())
    }

    /// Every value of `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a form body (the body limit has already applied).
pub async fn read(body: poem::Body) -> FormData {
    FormData::parse(&body.into_bytes().await.unwrap_or_default())
}
