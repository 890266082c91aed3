//! A request's operators as a whole: its matchers, `matchers-condition` and
//! extractors, evaluated together on one response as Nuclei's
//! `Operators.Execute` does. Extractors run first; their values are visible
//! to the matchers of the same response under the extractor's name.

use std::collections::HashMap;

use super::defs::{mentions, reads_implicitly, ExtractorDef, MatcherDef};
use super::error::OperatorError;
use super::extractor::{dedupe, Extractor};
use super::matcher::{MatchOutcome, Matcher};
use super::part::{assign_slots, PartCache};
use crate::dsl::{Chain, Value, Vars};

/// `and` / `or`, between the values of one matcher or between matchers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Condition {
    And,
    #[default]
    Or,
}

impl Condition {
    /// Parses `and`/`or`; absent or empty means `or`.
    pub fn parse(text: Option<&str>) -> Result<Condition, OperatorError> {
        match text.map(|t| t.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("or") => Ok(Condition::Or),
            Some("and") => Ok(Condition::And),
            Some(other) => Err(OperatorError::UnknownCondition(other.to_string())),
        }
    }
}

/// All operators of one request, compiled.
#[derive(Debug)]
pub struct Operators {
    matchers: Vec<Matcher>,
    extractors: Vec<Extractor>,
    condition: Condition,
    /// Matcher indexes from cheapest to costliest, for `and`.
    and_order: Vec<usize>,
    /// Distinct parts read, so one evaluation fetches each part once.
    slots: usize,
    /// Per extractor: run only once the verdict is a match, because nothing
    /// but the finding's output reads its values.
    deferred: Vec<bool>,
}

/// What the operators decided for one response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorResult {
    /// The matchers' verdict; always false when there are no matchers.
    pub matched: bool,
    /// Names of the non-internal named matchers that matched, under
    /// `matchers-condition: or` only (one result per name is reported).
    pub matched_names: Vec<String>,
    /// Snippets of each matching matcher, keyed like `matched_names`
    /// (`None` for an unnamed matcher).
    pub matcher_snippets: Vec<(Option<String>, Vec<String>)>,
    /// Values of non-internal extractors that found something, in template
    /// order.
    pub extracts: Vec<(Option<String>, Vec<String>)>,
    /// Values of internal and named extractors, to feed later requests.
    pub internal: HashMap<String, Vec<String>>,
    pub has_matchers: bool,
}

impl OperatorResult {
    /// Every non-internal extracted value, deduplicated in order: the
    /// `extracted_results` of a finding.
    pub fn extracted_results(&self) -> Vec<String> {
        dedupe(
            self.extracts
                .iter()
                .flat_map(|(_, v)| v.iter().cloned())
                .collect(),
        )
    }
}

impl Operators {
    /// Compiles matchers, extractors and the condition between matchers.
    pub fn compile(
        matchers: &[MatcherDef],
        extractors: &[ExtractorDef],
        condition: Option<&str>,
    ) -> Result<Operators, OperatorError> {
        let condition = Condition::parse(condition)?;
        let mut matchers = matchers
            .iter()
            .map(Matcher::compile)
            .collect::<Result<Vec<_>, _>>()?;
        let mut extractors = extractors
            .iter()
            .map(Extractor::compile)
            .collect::<Result<Vec<_>, _>>()?;
        let slots = assign_slots(
            matchers
                .iter_mut()
                .map(|m| &mut m.part)
                .chain(extractors.iter_mut().map(|e| &mut e.part)),
        );
        let mut and_order: Vec<usize> = (0..matchers.len()).collect();
        and_order.sort_by_key(|&i| matchers[i].cost());
        Ok(Operators {
            deferred: vec![false; extractors.len()],
            matchers,
            extractors,
            condition,
            and_order,
            slots,
        })
    }

    /// Lets named extractors whose values only the finding's output would
    /// show run after the matchers, and only when they match: most
    /// responses do not, and their extraction (often a regex built for the
    /// purpose) is then skipped. `read_elsewhere` says whether anything
    /// outside these operators may read a name: a later request, another
    /// block, a flow. `matcher_defs` and `extractor_defs` are what these
    /// operators were compiled from. Without matchers every extractor runs
    /// anyway.
    pub fn defer_unread_extractors(
        &mut self,
        matcher_defs: &[MatcherDef],
        extractor_defs: &[ExtractorDef],
        read_elsewhere: impl Fn(&str) -> bool,
    ) {
        if self.matchers.is_empty() || extractor_defs.len() != self.extractors.len() {
            return;
        }
        for i in 0..self.extractors.len() {
            self.deferred[i] = self.extractors[i]
                .name()
                .is_some_and(|n| !read_elsewhere(n))
                && unread_here(i, &self.extractors, matcher_defs, extractor_defs);
        }
    }

    /// How many extractors [`Operators::defer_unread_extractors`] deferred.
    pub fn deferred_extractors(&self) -> usize {
        self.deferred.iter().filter(|&&d| d).count()
    }

    pub fn matchers(&self) -> &[Matcher] {
        &self.matchers
    }

    pub fn extractors(&self) -> &[Extractor] {
        &self.extractors
    }

    pub fn condition(&self) -> Condition {
        self.condition
    }

    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty() && self.extractors.is_empty()
    }

    /// There are matchers and every one is `internal: true`: their match
    /// decides but is never reported.
    pub fn only_internal_matchers(&self) -> bool {
        !self.matchers.is_empty() && self.matchers.iter().all(Matcher::is_internal)
    }

    /// Evaluates everything against one response context.
    ///
    /// As in Nuclei, extractors run in template order before the matchers
    /// and each named extractor's values are visible, under its name, to the
    /// extractors after it and to the matchers. Unnamed, non-internal
    /// extractors only add to the output, so they run after the matchers and
    /// only when the output will be used (a match, or no matchers at all).
    pub fn evaluate(&self, ctx: &dyn Vars) -> OperatorResult {
        let mut result = OperatorResult {
            has_matchers: !self.matchers.is_empty(),
            ..OperatorResult::default()
        };
        let cache = PartCache::new(ctx, self.slots);
        let mut exposed: HashMap<String, Value> = HashMap::new();
        let mut found: Vec<Option<Vec<String>>> = vec![None; self.extractors.len()];
        for (index, extractor) in self.extractors.iter().enumerate() {
            if self.after_verdict(index) {
                continue;
            }
            let values = self.extract_with(extractor, &cache, &exposed, ctx);
            if values.is_empty() {
                continue;
            }
            if let Some(name) = extractor.name() {
                expose(&mut exposed, name, &values, extractor.is_internal());
                keep_internal(&mut result.internal, name, &values);
            }
            found[index] = Some(values);
        }
        if !self.matchers.is_empty() {
            // Extracted values shadow the response's variables for the
            // matchers; the part cache is rebuilt only when something is
            // shadowed.
            let chained = Chain(&exposed, ctx);
            let shadowed;
            let matcher_cache = if exposed.is_empty() {
                &cache
            } else {
                shadowed = PartCache::new(&chained, self.slots);
                &shadowed
            };
            if self.condition == Condition::And {
                self.evaluate_and(matcher_cache, &mut result);
            } else {
                self.evaluate_or(matcher_cache, &mut result);
            }
        }
        if result.matched || self.matchers.is_empty() {
            for (index, extractor) in self.extractors.iter().enumerate() {
                if !self.after_verdict(index) {
                    continue;
                }
                let values = self.extract_with(extractor, &cache, &exposed, ctx);
                if values.is_empty() {
                    continue;
                }
                // A deferred extractor is named; nothing after it reads the
                // name, so it is kept for the output only.
                if let Some(name) = extractor.name() {
                    keep_internal(&mut result.internal, name, &values);
                }
                found[index] = Some(values);
            }
        }
        for (extractor, values) in self.extractors.iter().zip(found) {
            if let Some(values) = values.filter(|_| !extractor.is_internal()) {
                result
                    .extracts
                    .push((extractor.name().map(str::to_string), values));
            }
        }
        result
    }

    /// Whether extractor `index` runs after the matchers, and only on a
    /// match: unnamed output-only extractors, and deferred named ones.
    fn after_verdict(&self, index: usize) -> bool {
        let extractor = &self.extractors[index];
        (extractor.name().is_none() && !extractor.is_internal()) || self.deferred[index]
    }

    /// Runs one extractor, over the response alone or, once earlier
    /// extractors have produced named values, over those values layered on
    /// top of the response.
    fn extract_with(
        &self,
        extractor: &Extractor,
        cache: &PartCache<'_>,
        exposed: &HashMap<String, Value>,
        ctx: &dyn Vars,
    ) -> Vec<String> {
        if exposed.is_empty() {
            return extractor.extract_cached(cache);
        }
        let chained = Chain(exposed, ctx);
        extractor.extract_cached(&PartCache::new(&chained, self.slots))
    }

    /// `or` between matchers: every matcher runs, so that each named one
    /// that matched is reported.
    fn evaluate_or(&self, cache: &PartCache<'_>, result: &mut OperatorResult) {
        for matcher in &self.matchers {
            let outcome = matcher.matches_cached(cache);
            if !outcome.matched {
                continue;
            }
            result.matched = true;
            if matcher.is_internal() {
                continue;
            }
            if let Some(name) = matcher.name() {
                if !result.matched_names.iter().any(|n| n == name) {
                    result.matched_names.push(name.to_string());
                }
            }
            result
                .matcher_snippets
                .push((matcher.name().map(str::to_string), outcome.snippets));
        }
    }

    /// `and` between matchers: matchers are pure, so they run cheapest
    /// first and the first miss settles the verdict; snippets are reported
    /// in template order.
    fn evaluate_and(&self, cache: &PartCache<'_>, result: &mut OperatorResult) {
        let mut outcomes: Vec<Option<MatchOutcome>> = Vec::with_capacity(self.matchers.len());
        outcomes.resize_with(self.matchers.len(), || None);
        for &index in &self.and_order {
            let outcome = self.matchers[index].matches_cached(cache);
            if !outcome.matched {
                return;
            }
            outcomes[index] = Some(outcome);
        }
        for (matcher, outcome) in self.matchers.iter().zip(outcomes) {
            if let Some(outcome) = outcome.filter(|_| !matcher.is_internal()) {
                result
                    .matcher_snippets
                    .push((matcher.name().map(str::to_string), outcome.snippets));
            }
        }
        result.matched = true;
    }
}

/// Makes extracted values visible to matchers the way Nuclei does: one value
/// as a string, several as a list, and for internal extractors with several
/// values also `name0`, `name1`, ...
fn expose(exposed: &mut HashMap<String, Value>, name: &str, values: &[String], internal: bool) {
    if values.len() == 1 {
        exposed.insert(name.to_string(), Value::str(&values[0]));
        return;
    }
    exposed.insert(
        name.to_string(),
        Value::List(values.iter().map(Value::str).collect()),
    );
    if internal {
        for (i, value) in values.iter().enumerate() {
            exposed.insert(format!("{name}{i}"), Value::str(value));
        }
    }
}

/// Adds an extractor's values to the named values later requests read.
fn keep_internal(internal: &mut HashMap<String, Vec<String>>, name: &str, values: &[String]) {
    let slot = internal.entry(name.to_string()).or_default();
    slot.extend(values.iter().cloned());
    if slot.len() > 1 {
        *slot = dedupe(std::mem::take(slot));
    }
}

/// Whether extractor `index` is named and no other operator of the same
/// request reads its values, so that running it after the matchers changes
/// nothing they see: no matcher or other extractor mentions its name, the
/// name shadows no part read implicitly, no other extractor shares it, and
/// it reads no later extractor's name (it would see that value if run
/// after it).
fn unread_here(
    index: usize,
    extractors: &[Extractor],
    matcher_defs: &[MatcherDef],
    extractor_defs: &[ExtractorDef],
) -> bool {
    let Some(name) = extractors[index].name() else {
        return false;
    };
    let own = &extractor_defs[index];
    !reads_implicitly(name)
        && !matcher_defs.iter().any(|m| m.mentions(name))
        && extractors.iter().enumerate().all(|(j, other)| {
            j == index
                || (!extractor_defs[j].mentions(name)
                    && other
                        .name()
                        .is_none_or(|n| !mentions(n, name) && !mentions(name, n))
                    && (j < index
                        || other
                            .name()
                            .is_none_or(|n| !own.mentions(n) && !reads_implicitly(n))))
        })
}
