//! Payload combinations for the three attack types.
//!
//! Combinations are produced lazily: a clusterbomb over two 1,000-line
//! wordlists is a million requests, which must never sit in memory at once.

use super::error::{EngineError, UnknownAttack};

/// How payload lists combine into request values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttackType {
    /// Every value of every list, put into all payload positions at once.
    BatteringRam,
    /// The n-th values of all lists together, up to the shortest list (as
    /// Nuclei does).
    Pitchfork,
    /// Every combination of values (cartesian product).
    ClusterBomb,
}

impl AttackType {
    /// Parses the template's `attack:` value. With none given, Nuclei uses
    /// batteringram for a single payload and clusterbomb for several.
    pub fn resolve(value: Option<&str>, payload_count: usize) -> Result<AttackType, UnknownAttack> {
        match value.map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(if payload_count > 1 {
                AttackType::ClusterBomb
            } else {
                AttackType::BatteringRam
            }),
            Some(v) if v.is_empty() => Self::resolve(None, payload_count),
            Some(v) => match v.as_str() {
                "batteringram" | "sniper" => Ok(AttackType::BatteringRam),
                "pitchfork" => Ok(AttackType::Pitchfork),
                "clusterbomb" => Ok(AttackType::ClusterBomb),
                other => Err(UnknownAttack(other.to_string())),
            },
        }
    }
}

/// Named payload lists of one request block, in template order.
#[derive(Debug, Clone, Default)]
pub struct PayloadSet {
    pub attack: Option<AttackType>,
    pub lists: Vec<(String, Vec<String>)>,
}

/// One assignment of values to payload names.
pub type Combination = Vec<(String, String)>;

impl PayloadSet {
    pub fn new(
        template_id: &str,
        attack: Option<&str>,
        lists: Vec<(String, Vec<String>)>,
    ) -> Result<PayloadSet, EngineError> {
        let compile_err = |e: UnknownAttack| EngineError::Compile {
            template_id: template_id.to_string(),
            cause: e.into(),
        };
        if lists.is_empty() {
            return Ok(PayloadSet::default());
        }
        let attack = AttackType::resolve(attack, lists.len()).map_err(compile_err)?;
        Ok(PayloadSet {
            attack: Some(attack),
            lists,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The combinations in order; a single empty combination when the block
    /// has no payloads, so callers iterate uniformly.
    pub fn combinations(&self) -> Combinations<'_> {
        let state = match self.attack {
            None => State::Single(false),
            Some(AttackType::BatteringRam) => State::Ram { list: 0, item: 0 },
            Some(AttackType::Pitchfork) => State::Fork(0),
            Some(AttackType::ClusterBomb) => {
                if self.lists.iter().any(|(_, l)| l.is_empty()) {
                    State::Done
                } else {
                    State::Bomb(vec![0; self.lists.len()])
                }
            }
        };
        Combinations { set: self, state }
    }

    /// How many combinations [`PayloadSet::combinations`] yields.
    pub fn count(&self) -> usize {
        match self.attack {
            None => 1,
            Some(AttackType::BatteringRam) => self.lists.iter().map(|(_, l)| l.len()).sum(),
            Some(AttackType::Pitchfork) => {
                self.lists.iter().map(|(_, l)| l.len()).min().unwrap_or(0)
            }
            Some(AttackType::ClusterBomb) => self
                .lists
                .iter()
                .map(|(_, l)| l.len())
                .fold(1usize, |a, b| a.saturating_mul(b)),
        }
    }
}

enum State {
    Single(bool),
    Ram { list: usize, item: usize },
    Fork(usize),
    Bomb(Vec<usize>),
    Done,
}

/// Iterator over payload combinations.
pub struct Combinations<'a> {
    set: &'a PayloadSet,
    state: State,
}

impl Iterator for Combinations<'_> {
    type Item = Combination;

    fn next(&mut self) -> Option<Combination> {
        let lists = &self.set.lists;
        match &mut self.state {
            State::Done => None,
            State::Single(done) => {
                if *done {
                    None
                } else {
                    *done = true;
                    Some(Vec::new())
                }
            }
            State::Ram { list, item } => {
                while *list < lists.len() && *item >= lists[*list].1.len() {
                    *list += 1;
                    *item = 0;
                }
                let value = lists.get(*list)?.1.get(*item)?.clone();
                *item += 1;
                Some(
                    lists
                        .iter()
                        .map(|(name, _)| (name.clone(), value.clone()))
                        .collect(),
                )
            }
            State::Fork(i) => {
                let idx = *i;
                if lists.iter().any(|(_, l)| idx >= l.len()) {
                    return None;
                }
                *i += 1;
                Some(
                    lists
                        .iter()
                        .map(|(name, l)| (name.clone(), l[idx].clone()))
                        .collect(),
                )
            }
            State::Bomb(idx) => {
                let combo: Combination = lists
                    .iter()
                    .zip(idx.iter())
                    .map(|((name, l), &i)| (name.clone(), l[i].clone()))
                    .collect();
                // Odometer: the last list turns fastest.
                let mut pos = lists.len();
                loop {
                    if pos == 0 {
                        self.state = State::Done;
                        break;
                    }
                    pos -= 1;
                    idx[pos] += 1;
                    if idx[pos] < lists[pos].1.len() {
                        break;
                    }
                    idx[pos] = 0;
                }
                Some(combo)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(attack: &str, lists: &[(&str, &[&str])]) -> PayloadSet {
        PayloadSet::new(
            "t",
            Some(attack),
            lists
                .iter()
                .map(|(n, l)| (n.to_string(), l.iter().map(|s| s.to_string()).collect()))
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn clusterbomb_yields_the_cartesian_product() {
        let s = set(
            "clusterbomb",
            &[("a", &["1", "2"]), ("b", &["x", "y", "z"])],
        );
        let all: Vec<_> = s.combinations().collect();
        assert_eq!(all.len(), 6);
        assert_eq!(s.count(), 6);
        assert!(all.contains(&vec![("a".into(), "2".into()), ("b".into(), "z".into())]));
    }

    #[test]
    fn pitchfork_zips_up_to_the_shortest_list() {
        let s = set("pitchfork", &[("a", &["1", "2"]), ("b", &["x", "y"])]);
        let all: Vec<_> = s.combinations().collect();
        assert_eq!(
            all,
            vec![
                vec![("a".into(), "1".into()), ("b".into(), "x".into())],
                vec![("a".into(), "2".into()), ("b".into(), "y".into())]
            ]
        );
        let uneven = set("pitchfork", &[("a", &["1", "2", "3"]), ("b", &["x", "y"])]);
        let all: Vec<_> = uneven.combinations().collect();
        assert_eq!(all.len(), 2);
        assert_eq!(uneven.count(), 2);
        assert_eq!(
            all[1],
            vec![("a".into(), "2".into()), ("b".into(), "y".into())]
        );
    }

    #[test]
    fn batteringram_puts_one_value_everywhere() {
        let s = set("batteringram", &[("a", &["1", "2"])]);
        let all: Vec<_> = s.combinations().collect();
        assert_eq!(
            all,
            vec![
                vec![("a".into(), "1".into())],
                vec![("a".into(), "2".into())]
            ]
        );
    }

    #[test]
    fn default_attack_depends_on_the_number_of_payloads() {
        assert_eq!(AttackType::resolve(None, 1), Ok(AttackType::BatteringRam));
        assert_eq!(AttackType::resolve(None, 2), Ok(AttackType::ClusterBomb));
        assert!(AttackType::resolve(Some("spray"), 1).is_err());
    }

    #[test]
    fn no_payloads_yield_one_empty_combination() {
        let s = PayloadSet::default();
        assert_eq!(s.combinations().collect::<Vec<_>>(), vec![Vec::new()]);
    }
}
