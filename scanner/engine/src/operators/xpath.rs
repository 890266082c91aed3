//! XPath over HTML and XML responses.
//!
//! Nuclei parses a body that starts with `<?xml` as XML and anything else as
//! HTML, then runs XPath 1.0 queries (antchfx/xpath). We do the same with
//! maintained crates: `scraper` (html5ever, the browsers' HTML5 parsing
//! algorithm, so `<tbody>` is inserted exactly where Nuclei's Go HTML5 parser
//! inserts it) for HTML, `roxmltree` for XML, and `sxd-xpath` as the XPath
//! 1.0 engine over an `sxd-document` tree built from either. One engine for
//! both keeps queries behaving identically whatever the body is.
//!
//! Two antchfx behaviours templates rely on are reproduced:
//! - names match by the prefix written in the document, not by namespace
//!   URI: `/wfs:WFS_Capabilities/FeatureTypeList` matches a WFS document whose
//!   default namespace is set. Each element is given the pseudo namespace of
//!   its written prefix (none when unprefixed), and every prefix a query uses
//!   is bound to the same pseudo namespace.
//! - the XPath 2.0 helpers `matches`, `lower-case`, `upper-case` and
//!   `ends-with` are available.
//!
//! `sxd_xpath::XPath` is not `Send`, so compiled operators keep the query
//! text (validated at compile time) and parse it per evaluation; that cost is
//! small next to parsing the document itself.

use sxd_document::dom::{Document, Element};
use sxd_document::Package;
use sxd_xpath::context::Evaluation;
use sxd_xpath::function::{Args, Error as FnError, Function};
use sxd_xpath::nodeset::Node;
use sxd_xpath::{Context, Factory, Value as XValue};

use super::error::{OperatorError, XPathError};
use crate::goregex;

/// Elements nested deeper than this are attached to their ancestor at this
/// depth: the XPath engine recurses over the tree, and hostile bodies must
/// not exhaust a worker thread's stack.
const MAX_DEPTH: usize = 256;

const PREFIX_NAMESPACE: &str = "urn:scanfleet:xml-prefix:";

/// Validated XPath query texts.
#[derive(Debug, Clone)]
pub(crate) struct XPathQueries(Vec<String>);

impl XPathQueries {
    pub(crate) fn compile(queries: Vec<String>) -> Result<XPathQueries, OperatorError> {
        for query in &queries {
            match Factory::new().build(query) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(OperatorError::BadXPath {
                        query: query.clone(),
                        reason: XPathError::Empty,
                    })
                }
                Err(e) => {
                    return Err(OperatorError::BadXPath {
                        query: query.clone(),
                        reason: e.into(),
                    })
                }
            }
        }
        Ok(XPathQueries(queries))
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

/// What a query selected.
pub(crate) enum Selection<'d> {
    Nodes(Vec<Node<'d>>),
    /// A query such as `concat(...)` or `count(...)`.
    Scalar(XValue<'d>),
}

impl<'d> Selection<'d> {
    /// Number of hits, for matchers: selected nodes, or one for a true,
    /// non-zero or non-empty scalar.
    pub(crate) fn hit_count(&self) -> usize {
        match self {
            Selection::Nodes(nodes) => nodes.len(),
            Selection::Scalar(value) => usize::from(value.boolean()),
        }
    }

    /// Extracted strings: the attribute of each selected element when
    /// `attribute` is set (empty when absent, as antchfx's `SelectAttr`),
    /// otherwise each node's text content.
    pub(crate) fn strings(&self, attribute: Option<&str>) -> Vec<String> {
        match self {
            Selection::Nodes(nodes) => nodes
                .iter()
                .map(|node| match (attribute, node) {
                    (Some(attr), Node::Element(e)) => {
                        e.attribute_value(attr).unwrap_or_default().to_string()
                    }
                    _ => node.string_value(),
                })
                .collect(),
            Selection::Scalar(value) => vec![value.string()],
        }
    }
}

/// Parses a response body into an XPath-ready document; `None` for XML
/// that is not well-formed (Nuclei reports no match then) or an empty body.
pub(crate) fn parse_document(corpus: &[u8]) -> Option<Package> {
    let text = String::from_utf8_lossy(corpus);
    let trimmed = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if trimmed.is_empty() {
        return None;
    }
    let package = Package::new();
    {
        let document = package.as_document();
        if trimmed.starts_with("<?xml") {
            copy_xml(&document, trimmed)?;
        } else {
            copy_html(&document, trimmed);
        }
    }
    Some(package)
}

/// Runs one query; `None` when it fails at run time (unknown function,
/// type error), which Nuclei treats as no hit.
pub(crate) fn select<'d>(document: &Document<'d>, query: &str) -> Option<Selection<'d>> {
    let xpath = Factory::new().build(query).ok()??;
    let mut context = Context::new();
    for prefix in query_prefixes(query) {
        context.set_namespace(prefix, &format!("{PREFIX_NAMESPACE}{prefix}"));
    }
    context.set_function("matches", Matches);
    context.set_function("lower-case", ChangeCase { upper: false });
    context.set_function("upper-case", ChangeCase { upper: true });
    context.set_function("ends-with", EndsWith);
    match xpath.evaluate(&context, document.root()).ok()? {
        XValue::Nodeset(nodes) => Some(Selection::Nodes(nodes.document_order())),
        other => Some(Selection::Scalar(other)),
    }
}

fn copy_html(document: &Document<'_>, text: &str) {
    let html = scraper::Html::parse_document(text);
    let root = html.root_element();
    let top = document.create_element(root.value().name());
    for (name, value) in root.value().attrs() {
        top.set_attribute_value(name, value);
    }
    document.root().append_child(top);
    // Iterative walk: depth is attacker-controlled.
    let mut pending = vec![(*root, top, 1usize)];
    while let Some((source, target, depth)) = pending.pop() {
        for child in source.children() {
            match child.value() {
                scraper::Node::Element(e) => {
                    let element = document.create_element(e.name());
                    for (name, value) in e.attrs() {
                        element.set_attribute_value(name, value);
                    }
                    target.append_child(element);
                    pending.push(descend(child, element, target, depth));
                }
                scraper::Node::Text(t) => target.append_child(document.create_text(&t.text)),
                _ => {}
            }
        }
    }
}

/// Where the children of a new element go: into the element itself, or,
/// past the depth limit, into the capped ancestor.
fn descend<'d, N>(
    source: N,
    element: Element<'d>,
    parent: Element<'d>,
    depth: usize,
) -> (N, Element<'d>, usize) {
    if depth >= MAX_DEPTH {
        (source, parent, depth)
    } else {
        (source, element, depth + 1)
    }
}

fn copy_xml(document: &Document<'_>, text: &str) -> Option<()> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let xml = roxmltree::Document::parse_with_options(text, options).ok()?;
    let root = xml.root_element();
    let top = create_xml_element(document, root);
    document.root().append_child(top);
    let mut pending = vec![(root, top, 1usize)];
    while let Some((source, target, depth)) = pending.pop() {
        for child in source.children() {
            if child.is_element() {
                let element = create_xml_element(document, child);
                target.append_child(element);
                pending.push(descend(child, element, target, depth));
            } else if child.is_text() {
                if let Some(t) = child.text() {
                    target.append_child(document.create_text(t));
                }
            }
        }
    }
    Some(())
}

fn create_xml_element<'d>(document: &Document<'d>, node: roxmltree::Node<'_, '_>) -> Element<'d> {
    let tag = node.tag_name();
    let element = match written_prefix(node) {
        Some(p) if !p.is_empty() => {
            let ns = format!("{PREFIX_NAMESPACE}{p}");
            document.create_element((ns.as_str(), tag.name()))
        }
        _ => document.create_element(tag.name()),
    };
    for attr in node.attributes() {
        element.set_attribute_value(attr.name(), attr.value());
    }
    element
}

/// The prefix of an element's name as written in the source (`wfs` in
/// `<wfs:WFS_Capabilities>`). The parser resolves prefixes to namespace
/// URIs, and a default namespace often shares its URI with a prefix, so the
/// written form is read back from the source text.
fn written_prefix<'a>(node: roxmltree::Node<'a, '_>) -> Option<&'a str> {
    let source = node.document().input_text();
    let start = node.range().start + 1;
    let rest = source.get(start..)?;
    let name_end = rest.find(|c: char| c.is_whitespace() || c == '>' || c == '/')?;
    let (prefix, _) = rest[..name_end].split_once(':')?;
    Some(prefix)
}

/// Prefixes used in a query (`wfs` in `/wfs:WFS_Capabilities`), skipping
/// axes (`child::`). Names follow XML's NCName rules, as the XPath
/// tokenizer reads them (so `\u{FFFD}pe:div` has the prefix `\u{FFFD}pe`);
/// every name-start position of the run before a colon is taken, so the
/// prefix the tokenizer settles on is always bound. An unbound prefix makes
/// the evaluator panic; an extra binding costs nothing.
fn query_prefixes(query: &str) -> Vec<&str> {
    use sxd_document::XmlChar;
    let chars: Vec<(usize, char)> = query.char_indices().collect();
    let mut prefixes = Vec::new();
    for (k, &(at, c)) in chars.iter().enumerate() {
        if c != ':' || k == 0 {
            continue;
        }
        let prev_colon = chars[k - 1].1 == ':';
        let next_colon = chars.get(k + 1).is_some_and(|&(_, n)| n == ':');
        if prev_colon || next_colon {
            continue;
        }
        let mut first = k;
        while first > 0 && chars[first - 1].1.is_ncname_char() {
            first -= 1;
        }
        for &(from, start) in &chars[first..k] {
            if start.is_ncname_start_char() {
                let prefix = &query[from..at];
                if !prefixes.contains(&prefix) {
                    prefixes.push(prefix);
                }
            }
        }
    }
    prefixes
}

/// XPath 2.0 `matches(input, pattern[, flags])`.
struct Matches;

impl Function for Matches {
    fn evaluate<'c, 'd>(
        &self,
        _: &Evaluation<'c, 'd>,
        args: Vec<XValue<'d>>,
    ) -> Result<XValue<'d>, FnError> {
        let mut args = Args(args);
        args.at_least(2)?;
        args.at_most(3)?;
        let flags = if args.len() == 3 {
            args.pop_string()?
        } else {
            String::new()
        };
        let pattern = args.pop_string()?;
        let input = args.pop_string()?;
        let mut inline = String::new();
        for flag in flags.chars().filter(|c| matches!(c, 'i' | 's' | 'm' | 'x')) {
            inline.push(flag);
        }
        let pattern = if inline.is_empty() {
            pattern
        } else {
            format!("(?{inline}){pattern}")
        };
        let regex = goregex::compile(&pattern)
            .map_err(|_| FnError::Other("invalid regex in matches()".to_string()))?;
        Ok(XValue::Boolean(regex.is_match(input.as_bytes())))
    }
}

/// XPath 2.0 `lower-case` / `upper-case`.
struct ChangeCase {
    upper: bool,
}

impl Function for ChangeCase {
    fn evaluate<'c, 'd>(
        &self,
        _: &Evaluation<'c, 'd>,
        args: Vec<XValue<'d>>,
    ) -> Result<XValue<'d>, FnError> {
        let mut args = Args(args);
        args.exactly(1)?;
        let input = args.pop_string()?;
        Ok(XValue::String(if self.upper {
            input.to_uppercase()
        } else {
            input.to_lowercase()
        }))
    }
}

/// XPath 2.0 `ends-with(input, suffix)`.
struct EndsWith;

impl Function for EndsWith {
    fn evaluate<'c, 'd>(
        &self,
        _: &Evaluation<'c, 'd>,
        args: Vec<XValue<'d>>,
    ) -> Result<XValue<'d>, FnError> {
        let mut args = Args(args);
        args.exactly(2)?;
        let suffix = args.pop_string()?;
        let input = args.pop_string()?;
        Ok(XValue::Boolean(input.ends_with(&suffix)))
    }
}
