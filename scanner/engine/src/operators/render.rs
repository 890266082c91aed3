//! `{{...}}` markers inside matcher words. Nuclei renders each word against
//! the response variables before searching for it (`{{randstr}}` echoed
//! back, `{{username}}` from a payload), so a word is either a literal known
//! at compile time or a [`TemplateString`] rendered per response with the
//! DSL's interpolation rules.

use std::borrow::Cow;

use crate::dsl::{TemplateString, Vars};

/// A word as written in the template, compiled once.
#[derive(Debug)]
pub(crate) struct Word {
    raw: Vec<u8>,
    /// `None` when the word holds no marker.
    template: Option<TemplateString>,
}

impl Word {
    pub(crate) fn compile(raw: Vec<u8>) -> Word {
        let template = std::str::from_utf8(&raw)
            .ok()
            .filter(|text| text.contains("{{"))
            .and_then(|text| TemplateString::parse(text).ok())
            .filter(|t| !t.is_plain());
        Word { raw, template }
    }

    pub(crate) fn is_literal(&self) -> bool {
        self.template.is_none()
    }

    pub(crate) fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The word with its markers rendered; `None` when a marker could not be
    /// resolved (an unknown variable), which Nuclei treats as a failed
    /// render: an `and` matcher fails, an `or` matcher searches for the word
    /// as written.
    pub(crate) fn render(&self, ctx: &dyn Vars) -> Option<Cow<'_, [u8]>> {
        let Some(template) = &self.template else {
            return Some(Cow::Borrowed(&self.raw));
        };
        let rendered = template.render(ctx);
        if rendered.is_complete() {
            Some(Cow::Owned(rendered.bytes))
        } else {
            None
        }
    }
}
