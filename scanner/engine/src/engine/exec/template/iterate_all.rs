//! `iterate-all: true`: a request after the first of a block is sent once
//! per extracted value instead of with the first value only.
//!
//! Nuclei (`operators.MakeDynamicValuesCallback`) collects every list the
//! block's responses extracted so far and sends the request in rounds: in
//! round `i` each name takes its `i`-th value, or its last one when the list
//! is shorter, so lists of the same length go in step (the `key` and `slug`
//! of one repository) and a single value stays fixed. Lists from later
//! responses are added to what was collected, without repeats.

use crate::engine::vars::{string_value, VarMap};
use crate::operators::OperatorResult;

/// Every value extracted so far in one block execution, by name, in order.
#[derive(Debug, Default)]
pub(super) struct Gathered {
    lists: Vec<(String, Vec<String>)>,
}

impl Gathered {
    pub(super) fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    pub(super) fn add(&mut self, result: &OperatorResult) {
        // Sorted: the operators' map has no order, rounds should have one.
        let mut names: Vec<&String> = result.internal.keys().collect();
        names.sort();
        for name in names {
            let values = &result.internal[name];
            if values.is_empty() {
                continue;
            }
            let at = match self.lists.iter().position(|(n, _)| n == name) {
                Some(at) => at,
                None => {
                    self.lists.push((name.clone(), Vec::new()));
                    self.lists.len() - 1
                }
            };
            let list = &mut self.lists[at].1;
            for v in values {
                if !list.contains(v) {
                    list.push(v.clone());
                }
            }
        }
    }

    /// One variable layer per round, in order.
    pub(super) fn rounds(&self) -> Vec<VarMap> {
        let longest = self.lists.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        (0..longest)
            .map(|i| {
                self.lists
                    .iter()
                    .map(|(name, values)| {
                        let v = &values[i.min(values.len() - 1)];
                        (name.clone(), string_value(v.clone()))
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(pairs: &[(&str, &[&str])]) -> OperatorResult {
        let mut r = OperatorResult::default();
        for (name, values) in pairs {
            r.internal.insert(
                name.to_string(),
                values.iter().map(|v| v.to_string()).collect(),
            );
        }
        r
    }

    fn text(rounds: &[VarMap], name: &str) -> Vec<String> {
        rounds.iter().map(|m| m[name].to_string_lossy()).collect()
    }

    #[test]
    fn lists_go_in_step_and_shorter_ones_repeat_their_last_value() {
        let mut g = Gathered::default();
        g.add(&result(&[("key", &["A", "B", "C"]), ("slug", &["a", "b"])]));
        g.add(&result(&[("one", &["x"])]));
        let rounds = g.rounds();
        assert_eq!(text(&rounds, "key"), ["A", "B", "C"]);
        assert_eq!(text(&rounds, "slug"), ["a", "b", "b"]);
        assert_eq!(text(&rounds, "one"), ["x", "x", "x"]);
    }

    #[test]
    fn later_responses_add_new_values_without_repeats() {
        let mut g = Gathered::default();
        g.add(&result(&[("name", &["t1", "t2"])]));
        g.add(&result(&[("name", &["t1", "t2"]), ("column", &["c1"])]));
        g.add(&result(&[
            ("name", &["t2"]),
            ("column", &["c2"]),
            ("empty", &[]),
        ]));
        let rounds = g.rounds();
        assert_eq!(text(&rounds, "name"), ["t1", "t2"]);
        assert_eq!(text(&rounds, "column"), ["c1", "c2"]);
        assert!(rounds.iter().all(|m| !m.contains_key("empty")));
    }
}
